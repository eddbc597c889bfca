package session_test

import (
	"context"
	"fmt"
	"time"

	"github.com/zkrecipes/zkrecipes/session"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// Connect once per process, follow the connection's states, and close the
// session at the end. The example runs against the package's
// shared ZooKeeper server, which TestMain starts (zktest.Main):
// zktest.SharedServers() returns its addresses. In a program, pass your
// ensemble's addresses instead, such as
// []string{"zk1:2181", "zk2:2181", "zk3:2181"}.
func Example() {
	// Connect returns once a session exists, or fails within ctx and the
	// connect timeout (15 s by default), naming the address.
	ctx := context.Background()
	sess, err := session.Connect(ctx, zktest.SharedServers(),
		session.WithSessionTimeout(10*time.Second),
		session.WithNamespace("/examples/session")) // every recipe path lives below it
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("state:", sess.State())
	fmt.Println("negotiated session timeout:", sess.SessionTimeout())

	// Every transition is delivered to every subscription, in order and
	// without blocking the session. Suspended means: stop the work that
	// needs the session now (lock leases have ended already); Lost means the
	// session and its ephemeral nodes are gone.
	sub := sess.Subscribe()
	defer sub.Close()
	followed := make(chan struct{})
	go func() {
		defer close(followed)
		for ev := range sub.C() {
			fmt.Println("transition:", ev.State)
		}
	}()
	// Close ends the ZooKeeper session (its ephemeral nodes go at once) and
	// delivers Closed to the subscription, whose channel then closes.
	defer func() {
		if err := sess.Close(); err != nil {
			fmt.Println(err)
		}
		<-followed
	}()

	// Recipes take paths below the namespace; Path gives the server's path.
	full, err := sess.Path("/jobs/nightly")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("server path:", full)
	// Output:
	// state: Connected
	// negotiated session timeout: 10s
	// server path: /examples/session/jobs/nightly
	// transition: Closed
}
