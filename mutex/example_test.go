package mutex_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/mutex"
	"github.com/zkrecipes/zkrecipes/session"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// Lock, do the guarded work under the lease's context, and unlock. The work
// stops as soon as the lock is lost (session suspended or lost, node deleted).
func Example() {
	srv, err := zktest.StartServer() // or your ensemble's addresses
	if err != nil {
		fmt.Println(err)
		return
	}
	defer srv.Stop()

	ctx := context.Background()
	sess, err := session.Connect(ctx, srv.Servers(), session.WithNamespace("/myapp"))
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
	defer lease.Unlock(context.WithoutCancel(ctx))
	fmt.Println("held by", lease.ID(), "token > 0:", lease.Token() > 0)

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
	srv, err := zktest.StartServer()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer srv.Stop()

	ctx := context.Background()
	sess, err := session.Connect(ctx, srv.Servers())
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
	defer lease.Unlock(ctx)

	// A third party removes our node.
	if err := sess.Conn().Delete(lease.Path(), -1); err != nil && !errors.Is(err, zk.ErrNoNode) {
		fmt.Println(err)
		return
	}

	select {
	case <-lease.Done():
		fmt.Println("lease ended; lock lost:", errors.Is(lease.Err(), mutex.ErrLockLost))
	case <-time.After(10 * time.Second):
		fmt.Println("still held?")
	}
	// Output:
	// lease ended; lock lost: true
}

// TryLock does not wait: it fails with ErrLocked while someone holds the lock.
func ExampleMutex_TryLock() {
	srv, err := zktest.StartServer()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer srv.Stop()

	ctx := context.Background()
	a, err := session.Connect(ctx, srv.Servers())
	if err != nil {
		fmt.Println(err)
		return
	}
	defer a.Close()
	b, err := session.Connect(ctx, srv.Servers())
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
	fmt.Println("b while a holds:", errors.Is(err, mutex.ErrLocked))
	h, _ := mb.Holder(ctx)
	fmt.Println("holder:", h.ID)

	la.Unlock(ctx)
	lb, err := mb.TryLock(ctx)
	fmt.Println("b after a unlocked:", err)
	lb.Unlock(ctx)
	// Output:
	// b while a holds: true
	// holder: a
	// b after a unlocked: <nil>
}
