package cache_test

import (
	"context"
	"fmt"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/recipes/cache"
	"github.com/zkrecipes/zkrecipes/session"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// The examples run against the package's shared ZooKeeper server, which
// TestMain starts (zktest.Main); in a program, pass your ensemble's
// addresses instead of exampleServers(). Each example works in its own
// namespace.

// exampleServers returns the addresses of the shared server.
func exampleServers() []string { return zktest.SharedServers() }

// A feature flag read through a node cache: Get never waits for the
// network, and Events says when the flag changes.
func ExampleNewNode() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sess, err := session.Connect(ctx, exampleServers(), session.WithNamespace("/examples/cache-node"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer sess.Close()

	flag, err := cache.NewNode(sess, "/flags/checkout")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer flag.Close()
	on := func() bool {
		n, ok := flag.Get()
		return ok && string(n.Data) == "on"
	}

	select {
	case <-flag.Initialized(): // loaded: the flag does not exist yet
	case <-ctx.Done():
		fmt.Println(ctx.Err())
		return
	}
	fmt.Println("on:", on())

	// Another process turns the flag on.
	if err := write(ctx, sess, "/flags/checkout", "on"); err != nil {
		fmt.Println(err)
		return
	}
	defer remove(sess, "/flags/checkout")
	for ev := range flag.Events() {
		fmt.Printf("%v %s %q\n", ev.Type, ev.Node.Path, ev.Node.Data)
		if ev.Type == cache.Added {
			break
		}
	}
	fmt.Println("on:", on())
	// Output:
	// on: false
	// Initialized  ""
	// Added /flags/checkout "on"
	// on: true
}

// The children of a path with their data, e.g. the members of a group.
func ExampleNewChildren() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sess, err := session.Connect(ctx, exampleServers(), session.WithNamespace("/examples/cache-children"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer sess.Close()
	for _, m := range []string{"a", "b"} {
		if err := write(ctx, sess, "/members/"+m, "host-"+m); err != nil {
			fmt.Println(err)
			return
		}
		defer remove(sess, "/members/"+m)
	}

	members, err := cache.NewChildren(sess, "/members", cache.WithEvents(false))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer members.Close()
	select {
	case <-members.Initialized():
	case <-ctx.Done():
		fmt.Println(ctx.Err())
		return
	}
	for _, n := range members.List() {
		fmt.Println(n.Name(), string(n.Data))
	}
	// Output:
	// a host-a
	// b host-b
}

// write creates the node p (and its parents) with data, or sets its data:
// what another process would do.
func write(ctx context.Context, sess *session.Session, p, data string) error {
	full, err := sess.Path(p)
	if err != nil {
		return err
	}
	conn := sess.Conn()
	if _, err := conn.Set(full, []byte(data), -1); err != zk.ErrNoNode {
		return err
	}
	for i := 1; i < len(full); i++ {
		if full[i] == '/' {
			if _, err := conn.Create(full[:i], nil, 0, zk.WorldACL(zk.PermAll)); err != nil && err != zk.ErrNodeExists {
				return err
			}
		}
	}
	_, err = conn.Create(full, []byte(data), 0, zk.WorldACL(zk.PermAll))
	return err
}

// remove deletes the node p, for the next run of the example.
func remove(sess *session.Session, p string) {
	if full, err := sess.Path(p); err == nil {
		sess.Conn().Delete(full, -1)
	}
}
