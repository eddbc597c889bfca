package zktest_test

import (
	"errors"
	"fmt"
	"io"
	"log"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// Start a throwaway ZooKeeper, talk to it, and reproduce a ghost node with the
// fault proxy: the server creates the node, but the client is told the
// connection closed.
func Example() {
	srv, err := zktest.StartServer()
	if err != nil {
		fmt.Println(err) // names zktest.InstallCommand when ZooKeeper is missing
		return
	}
	defer srv.Stop()

	proxy, err := zktest.NewProxy(srv.Addr())
	if err != nil {
		fmt.Println(err)
		return
	}
	defer proxy.Close()
	proxy.OnRequest(func(r zktest.Request) zktest.Action {
		if r.Op == zktest.OpCreate && r.Path == "/ghost" {
			return zktest.SwallowReply
		}
		return zktest.Forward
	})

	quiet := zk.WithLogger(log.New(io.Discard, "", 0))
	client, _, err := zk.Connect(proxy.Servers(), 5*time.Second, quiet)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer client.Close()
	_, err = client.Create("/ghost", nil, zk.FlagEphemeral, zk.WorldACL(zk.PermAll))
	fmt.Println("client sees:", errors.Is(err, zk.ErrConnectionClosed))

	observer, _, err := zk.Connect(srv.Servers(), 5*time.Second, quiet)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer observer.Close()
	ok, st, err := observer.Exists("/ghost")
	fmt.Println("node exists:", ok, err)
	fmt.Println("owned by the client's session:", st.EphemeralOwner == client.SessionID())
	// Output:
	// client sees: true
	// node exists: true <nil>
	// owned by the client's session: true
}
