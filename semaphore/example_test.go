package semaphore_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/zkrecipes/zkrecipes/recipes"
	"github.com/zkrecipes/zkrecipes/semaphore"
	"github.com/zkrecipes/zkrecipes/session"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// The examples run against the package's shared ZooKeeper server, which
// TestMain starts (zktest.Main); in a program, pass your ensemble's
// addresses instead of exampleServers(). Each example works in its own
// namespace.

// exampleServers returns the addresses of the shared server.
func exampleServers() []string { return zktest.SharedServers() }

// At most 3 exports run at once across every process (Go, or Java on
// Curator's InterProcessSemaphoreV2) that uses the path: take a lease, run
// the export under the lease's context, give it back.
func Example() {
	ctx := context.Background()
	sess, err := session.Connect(ctx, exampleServers(), session.WithNamespace("/examples/semaphore"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer sess.Close()

	sem, err := semaphore.New(sess, "/limits/exports", 3, semaphore.WithID("exporter-1"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer sem.Close()

	actx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	lease, err := sem.Acquire(actx)
	if err != nil {
		fmt.Println("acquire:", err)
		return
	}
	defer lease.Release(context.WithoutCancel(ctx))
	ps, err := sem.Participants(actx) // the lease nodes, with the id each stores
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, p := range ps {
		if p.Node == lease.Node() {
			fmt.Println("lease held by", p.ID)
		}
	}

	export := func(ctx context.Context) error {
		select {
		case <-ctx.Done(): // lease lost (session suspended or lost, node deleted): stop
			return context.Cause(ctx)
		default:
			return nil
		}
	}
	if err := export(lease.Context()); err != nil {
		fmt.Println("lost the lease:", err)
		return
	}
	fmt.Println("export done")
	// Output:
	// lease held by exporter-1
	// export done
}

// A maximum shared through a SharedCount: raising it admits a waiter at
// once, in Go and in Curator processes alike.
func Example_sharedCount() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	sess, err := session.Connect(ctx, exampleServers(), session.WithNamespace("/examples/shared"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer sess.Close()

	limit, err := semaphore.NewSharedCount(sess, "/limits/partner-api", 1)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer limit.Close()
	sem, err := semaphore.NewShared(sess, "/leases/partner-api", limit)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer sem.Close()

	first, err := sem.Acquire(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer first.Release(ctx)
	if _, err := sem.TryAcquire(ctx); errors.Is(err, recipes.ErrBusy) {
		fmt.Println("second lease: none free")
	}

	v, err := limit.Get(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	if _, ok, err := limit.TrySet(ctx, v, v.Count+1); err != nil || !ok {
		fmt.Println("raise:", ok, err)
		return
	}
	second, err := sem.Acquire(ctx) // admitted once the new maximum is seen
	if err != nil {
		fmt.Println(err)
		return
	}
	defer second.Release(ctx)
	fmt.Println("leases held:", sem.Held())
	// Output:
	// second lease: none free
	// leases held: 2
}

// The InterProcessSemaphoreMutex twin: a semaphore of one lease that
// excludes Curator's InterProcessSemaphoreMutex on the same path (not
// package mutex's locks).
func ExampleNewMutex() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	sess, err := session.Connect(ctx, exampleServers(), session.WithNamespace("/examples/mutex"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer sess.Close()

	m, err := semaphore.NewMutex(sess, "/locks/report", semaphore.WithID("reporter"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer m.Close()
	lease, err := m.Acquire(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	ps, err := m.Participants(ctx) // the holder comes first
	var holder recipes.Participant
	if len(ps) > 0 {
		holder = ps[0]
	}
	fmt.Println("held:", m.Held() == 1, "holder:", holder.ID, len(ps) > 0, err)
	if err := lease.Release(ctx); err != nil {
		fmt.Println(err)
	}
	fmt.Println("held:", m.Held() == 1)
	// Output:
	// held: true holder: reporter true <nil>
	// held: false
}

// AcquireN takes several leases at once, all or none.
func ExampleSemaphore_AcquireN() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	sess, err := session.Connect(ctx, exampleServers(), session.WithNamespace("/examples/acquiren"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer sess.Close()

	sem, err := semaphore.New(sess, "/limits/gpu", 4)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer sem.Close()
	leases, err := sem.AcquireN(ctx, 3) // a job that needs 3 of the 4 slots
	if err != nil {
		fmt.Println(err)
		return
	}
	defer func() {
		for _, l := range leases {
			l.Release(context.WithoutCancel(ctx))
		}
	}()
	ps, err := sem.Participants(ctx)
	fmt.Println(len(leases), "leases,", len(ps), "lease nodes,", err)
	// Output:
	// 3 leases, 3 lease nodes, <nil>
}
