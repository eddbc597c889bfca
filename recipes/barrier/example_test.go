package barrier_test

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/zkrecipes/zkrecipes/recipes/barrier"
	"github.com/zkrecipes/zkrecipes/session"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// The examples run against the package's shared ZooKeeper server, which
// TestMain starts (zktest.Main); in a program, pass your ensemble's
// addresses instead.

// Two workers of a batch (here in one process; usually each in its own)
// start together and finish together.
func ExampleDoubleBarrier() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sess, err := session.Connect(ctx, zktest.SharedServers(), session.WithNamespace("/examples/barrier"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer sess.Close()

	var wg sync.WaitGroup
	results := make([]error, 2)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = func() error {
				d, err := barrier.NewDouble(sess, "/batches/nightly", 2)
				if err != nil {
					return err
				}
				defer d.Close()
				if err := d.Enter(ctx); err != nil { // both members are in
					return err
				}
				// ... this worker's part of the batch ...
				return d.Leave(ctx) // both members are done
			}()
		}()
	}
	wg.Wait()
	fmt.Println(results[0], results[1])
	// Output:
	// <nil> <nil>
}

// A gate that one process closes while it prepares, and others wait on.
func ExampleBarrier() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sess, err := session.Connect(ctx, zktest.SharedServers(), session.WithNamespace("/examples/barrier"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer sess.Close()
	gate, err := barrier.New(sess, "/gates/migration")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer gate.Close()

	if err := gate.Set(ctx); err != nil {
		fmt.Println(err)
		return
	}
	opened := make(chan error, 1)
	go func() { opened <- gate.Wait(ctx) }() // another process, usually
	// ... the migration ...
	if err := gate.Remove(ctx); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("gate opened:", <-opened)
	// Output:
	// gate opened: <nil>
}
