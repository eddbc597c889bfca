package group_test

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/zkrecipes/zkrecipes/recipes/group"
	"github.com/zkrecipes/zkrecipes/session"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// The examples run against the package's shared ZooKeeper server, which
// TestMain starts (zktest.Main): zktest.SharedServers() returns its
// addresses. In a program, pass your ensemble's addresses instead.

// Workers find each other through a group: each joins with its id and its
// address as data, and follows the group's views on Changes. (Here two
// workers share one session; each process would have its own.)
func ExampleMember() {
	sess, err := session.Connect(context.Background(), zktest.SharedServers(), session.WithNamespace("/examples/member"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer sess.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	join := func(id, addr string) (*group.Member, error) {
		m, err := group.NewMember(sess, "/workers", id, []byte(addr))
		if err != nil {
			return nil, err // bad input
		}
		return m, m.Start()
	}
	a, err := join("worker-a", "10.0.0.1:8080")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer a.Close() // leaves the group
	views := a.Changes(ctx)
	b, err := join("worker-b", "10.0.0.2:8080")
	if err != nil {
		fmt.Println(err)
		return
	}

	show := func(want int) {
		for view := range views {
			if len(view) != want {
				continue // an earlier view: wait for the one expected
			}
			ids := make([]string, 0, len(view))
			for id := range view {
				ids = append(ids, id)
			}
			sort.Strings(ids)
			for _, id := range ids {
				fmt.Printf("%s at %s\n", id, view[id])
			}
			return
		}
		fmt.Println("no view of", want, "members:", ctx.Err())
	}
	show(2)
	b.Close() // worker-b leaves: its node is deleted
	show(1)
	// Output:
	// worker-a at 10.0.0.1:8080
	// worker-b at 10.0.0.2:8080
	// worker-a at 10.0.0.1:8080
}

// A Node keeps a znode in place: here a protected ephemeral-sequential node,
// Curator's PersistentNode layout, created again if anything removes it.
func ExampleNode() {
	sess, err := session.Connect(context.Background(), zktest.SharedServers(), session.WithNamespace("/examples/node"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer sess.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	n, err := group.NewNode(sess, "/announce/api-", group.ProtectedEphemeralSequential, []byte("v1"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer n.Close() // deletes the node
	if err := n.Start(); err != nil {
		fmt.Println(err)
		return
	}
	if err := n.Wait(ctx); err != nil { // until the node exists
		fmt.Println(err)
		return
	}
	if err := n.SetData(ctx, []byte("v2")); err != nil { // written to the node
		fmt.Println(err)
		return
	}
	fmt.Println("data:", string(n.Data()))
	fmt.Println("protected name:", len(n.Path()) == len("/announce/_c_")+36+len("-api-")+10)
	// Output:
	// data: v2
	// protected name: true
}
