package mutex_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/mutex"
	"github.com/zkrecipes/zkrecipes/recipes"
	"github.com/zkrecipes/zkrecipes/session"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// The examples run against the package's shared ZooKeeper server, which
// TestMain starts (zktest.Main): zktest.SharedServers() returns its
// addresses. In a program, pass your ensemble's addresses instead, such as
// []string{"zk1:2181", "zk2:2181", "zk3:2181"}. Each example works in its
// own namespace.

// Lock, do the guarded work under the lease's context, and unlock. The work
// stops as soon as the lock is lost (session suspended or lost, node deleted).
func Example() {
	ctx := context.Background()
	sess, err := session.Connect(ctx, zktest.SharedServers(), session.WithNamespace("/examples/basic"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer sess.Close()

	m, err := mutex.New(sess, "/locks/billing", mutex.WithID("worker-1"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer m.Close()

	lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	lease, err := m.Lock(lctx)
	if err != nil {
		fmt.Println("lock:", err)
		return
	}
	defer lease.Release(context.WithoutCancel(ctx))
	h, _, err := m.Holder(lctx)
	if err != nil {
		fmt.Println("holder:", err)
		return
	}
	fmt.Println("held by", h.ID, "token > 0:", lease.Token() > 0)

	// Guarded work: run it under lease.Context(), or select on lease.Done().
	work := func(ctx context.Context) error {
		select {
		case <-ctx.Done(): // lock lost: stop touching the resource
			return context.Cause(ctx)
		default:
			return nil // pass lease.Token() to the resource as a fencing token
		}
	}
	if err := work(lease.Context()); err != nil {
		fmt.Println("lost the lock:", err)
		return
	}
	fmt.Println("work done")
	// Output:
	// held by worker-1 token > 0: true
	// work done
}

// What a holder sees when it loses the lock: here an operator deletes the
// lock node. Under the default loss policy a suspended connection ends the
// lease the same way, with session.ErrSuspended as the cause.
func Example_lost() {
	ctx := context.Background()
	sess, err := session.Connect(ctx, zktest.SharedServers(), session.WithNamespace("/examples/lost"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer sess.Close()
	m, err := mutex.New(sess, "/locks/report")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer m.Close()

	lease, err := m.Lock(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer lease.Release(ctx)

	// A third party removes our node (Conn takes full paths).
	dir, err := sess.Path(m.Path())
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := sess.Conn().Delete(dir+"/"+lease.Node(), -1); err != nil && !errors.Is(err, zk.ErrNoNode) {
		fmt.Println(err)
		return
	}

	select {
	case <-lease.Done():
		fmt.Println("lease ended; lock lost:", errors.Is(lease.Err(), recipes.ErrNodeDeleted))
	case <-time.After(10 * time.Second):
		fmt.Println("still held?")
	}
	// Output:
	// lease ended; lock lost: true
}

// TryLock does not wait: it fails with recipes.ErrBusy while someone holds the lock.
func ExampleMutex_TryLock() {
	ctx := context.Background()
	servers := zktest.SharedServers()
	a, err := session.Connect(ctx, servers, session.WithNamespace("/examples/trylock"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer a.Close()
	b, err := session.Connect(ctx, servers, session.WithNamespace("/examples/trylock"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer b.Close()

	ma, _ := mutex.New(a, "/locks/job", mutex.WithID("a"))
	defer ma.Close()
	mb, _ := mutex.New(b, "/locks/job", mutex.WithID("b"))
	defer mb.Close()

	la, err := ma.Lock(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	_, err = mb.TryLock(ctx)
	fmt.Println("b while a holds:", errors.Is(err, recipes.ErrBusy))
	h, _, _ := mb.Holder(ctx)
	fmt.Println("holder:", h.ID)

	la.Release(ctx)
	lb, err := mb.TryLock(ctx)
	fmt.Println("b after a unlocked:", err)
	lb.Release(ctx)
	// Output:
	// b while a holds: true
	// holder: a
	// b after a unlocked: <nil>
}

// A Mutex lease is not tied to a goroutine: here a worker goroutine finishes
// the job and releases it, while the goroutine that locked only waits for the
// lease to end, and tells a normal release (recipes.ErrReleased) from a loss.
func ExampleLease_Release() {
	ctx := context.Background()
	sess, err := session.Connect(ctx, zktest.SharedServers(), session.WithNamespace("/examples/nonreentrant"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer sess.Close()
	m, err := mutex.New(sess, "/locks/import")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer m.Close()

	lease, err := m.Lock(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	unlocked := make(chan error, 1)
	go func() { // the worker owns the lease from here on
		// ... the guarded work, under lease.Context() ...
		unlocked <- lease.Release(context.WithoutCancel(ctx))
	}()

	select {
	case <-lease.Done():
		if errors.Is(lease.Err(), recipes.ErrReleased) {
			fmt.Println("released by the worker")
		} else {
			fmt.Println("lock lost:", lease.Err())
		}
	case <-time.After(10 * time.Second):
		fmt.Println("still held?")
	}
	fmt.Println("worker's Release:", <-unlocked)
	// Output:
	// released by the worker
	// worker's Release: <nil>
}

// A NonFair lock is one ephemeral node; Holder names its owner. The guarded
// work watches Done so it stops when the lock is lost.
func ExampleNonFair() {
	ctx := context.Background()
	servers := zktest.SharedServers()
	a, err := session.Connect(ctx, servers, session.WithNamespace("/examples/nonfair"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer a.Close()
	b, err := session.Connect(ctx, servers, session.WithNamespace("/examples/nonfair"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer b.Close()
	ma, _ := mutex.NewNonFair(a, "/locks/cron", mutex.WithID("scheduler-a"))
	defer ma.Close()
	mb, _ := mutex.NewNonFair(b, "/locks/cron", mutex.WithID("scheduler-b"))
	defer mb.Close()

	lease, err := ma.Lock(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	h, _, _ := mb.Holder(ctx)
	fmt.Println("holder:", h.ID)
	_, err = mb.TryLock(ctx)
	fmt.Println("b while a holds:", errors.Is(err, recipes.ErrBusy))

	for job := 1; job <= 2; job++ {
		select {
		case <-lease.Done(): // lost: stop before the next job
			fmt.Println("lock lost:", lease.Err())
			return
		default:
			fmt.Println("job", job, "done")
		}
	}
	if err := lease.Release(ctx); err != nil {
		fmt.Println(err)
		return
	}
	<-lease.Done() // closed by Release
	fmt.Println("released:", errors.Is(lease.Err(), recipes.ErrReleased))
	// Output:
	// holder: scheduler-a
	// b while a holds: true
	// job 1 done
	// job 2 done
	// released: true
}

// A Multi takes several locks all or nothing. Its lease ends as soon as any
// of them is lost (here an operator deletes one node); Release then releases
// the others.
func ExampleMulti() {
	ctx := context.Background()
	sess, err := session.Connect(ctx, zktest.SharedServers(), session.WithNamespace("/examples/multi"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer sess.Close()
	from, _ := mutex.New(sess, "/accounts/alice")
	defer from.Close()
	to, _ := mutex.New(sess, "/accounts/bob")
	defer to.Close()
	both, err := mutex.NewMulti(from, to) // the same order in every process
	if err != nil {
		fmt.Println(err)
		return
	}

	ml, err := both.Lock(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer ml.Release(ctx) // by this goroutine: the set holds reentrant Mutexes
	fmt.Println("holding", len(ml.Leases()), "locks")

	// An operator removes the second lock's node (Conn takes full paths).
	dir, err := sess.Path(to.Path())
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := sess.Conn().Delete(dir+"/"+ml.Leases()[1].Node(), -1); err != nil {
		fmt.Println(err)
		return
	}
	select {
	case <-ml.Done():
		fmt.Println("set lost:", errors.Is(ml.Err(), recipes.ErrNodeDeleted))
	case <-time.After(10 * time.Second):
		fmt.Println("still held?")
	}
	// Output:
	// holding 2 locks
	// set lost: true
}
