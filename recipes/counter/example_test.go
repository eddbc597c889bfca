package counter_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/zkrecipes/zkrecipes/recipes/counter"
	"github.com/zkrecipes/zkrecipes/session"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// The example runs against the package's shared ZooKeeper server, which
// TestMain starts (zktest.Main); in a program, pass your ensemble's
// addresses instead.

// A job number shared by every process (Go, or Java on Curator's
// DistributedAtomicLong) that uses the path: each increment is applied
// once, also when its answer is lost on the way.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sess, err := session.Connect(ctx, zktest.SharedServers(), session.WithNamespace("/examples/counter"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer sess.Close()
	jobs, err := counter.New(sess, "/jobs/next")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer jobs.Close()

	before, err := jobs.Get(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	v, err := jobs.Increment(ctx)
	for errors.Is(err, counter.ErrUnknownOutcome) {
		// Perhaps applied: write again only if nothing was written since.
		var ok bool
		if v, ok, err = jobs.TrySet(ctx, v, v.Value+1); err == nil && !ok {
			fmt.Println("someone wrote since: perhaps this increment; not applied again")
		}
	}
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("the next number:", v.Value == before.Value+1)
	// Output:
	// the next number: true
}
