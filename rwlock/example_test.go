package rwlock_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/zkrecipes/zkrecipes/recipes"
	"github.com/zkrecipes/zkrecipes/rwlock"
	"github.com/zkrecipes/zkrecipes/session"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// The examples run against the package's shared ZooKeeper server, which
// TestMain starts (zktest.Main); in a program, pass your ensemble's
// addresses instead of zktest.SharedServers(). Each example works in its
// own namespace.

// Readers share the lock, a writer holds it alone. Guarded work runs under
// the lease's context, which ends as soon as the lock is lost.
func Example() {
	ctx := context.Background()
	sess, err := session.Connect(ctx, zktest.SharedServers(), session.WithNamespace("/examples/rwlock"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer sess.Close()

	m, err := rwlock.New(sess, "/locks/catalog", rwlock.WithID("service-1"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer m.Close()

	lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	r1, err := m.RLock(lctx)
	if err != nil {
		fmt.Println("read lock:", err)
		return
	}
	r2, err := m.RLock(lctx) // readers share: no waiting
	if err != nil {
		fmt.Println("read lock:", err)
		return
	}
	_, err = m.TryLock(lctx) // a writer would wait for both readers
	fmt.Println("TryLock while reading:", errors.Is(err, recipes.ErrBusy))
	r1.Release(ctx)
	r2.Release(ctx)

	w, err := m.Lock(lctx)
	if err != nil {
		fmt.Println("write lock:", err)
		return
	}
	defer w.Release(context.WithoutCancel(ctx))
	work := func(ctx context.Context) error {
		select {
		case <-ctx.Done(): // lock lost: stop writing
			return context.Cause(ctx)
		default:
			return nil // pass w.Token() to the resource as a fencing token
		}
	}
	if err := work(w.Context()); err != nil {
		fmt.Println("lost the write lock:", err)
		return
	}
	ps, err := m.Participants(lctx) // the lock's queue, as read from ZooKeeper
	if err != nil {
		fmt.Println("participants:", err)
		return
	}
	for _, p := range ps {
		if p.Node == w.Node() {
			fmt.Println("wrote under", p.Kind, "lease held by", p.ID)
		}
	}
	// Output:
	// TryLock while reading: true
	// wrote under write lease held by service-1
}

// Downgrade keeps reading what was just written: no writer queued meanwhile
// can take the lock in between.
func ExampleWriteLease_Downgrade() {
	ctx := context.Background()
	sess, err := session.Connect(ctx, zktest.SharedServers(), session.WithNamespace("/examples/rwlock-downgrade"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer sess.Close()
	m, err := rwlock.New(sess, "/locks/catalog")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer m.Close()

	w, err := m.Lock(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	// ... write ...
	r, err := w.Downgrade(ctx)
	if err != nil {
		fmt.Println("downgrade:", err)
		return
	}
	defer r.Release(context.WithoutCancel(ctx))
	// ... read what was written ...
	ps, err := m.Participants(ctx)
	if err != nil || len(ps) != 1 || ps[0].Node != r.Node() {
		fmt.Println("participants:", ps, err)
		return
	}
	fmt.Println("write lease:", errors.Is(w.Err(), recipes.ErrReleased), "read lease:", ps[0].Kind, r.Err() == nil)
	// Output:
	// write lease: true read lease: read true
}

// The reentrant kind: a goroutine may take a side it holds again, may take
// the read lock while it writes (Curator's downgrade), and gets an error,
// not a deadlock, when it asks to write while it only reads.
func ExampleReentrant() {
	ctx := context.Background()
	sess, err := session.Connect(ctx, zktest.SharedServers(), session.WithNamespace("/examples/rwlock-reentrant"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer sess.Close()
	m, err := rwlock.NewReentrant(sess, "/locks/catalog")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer m.Close()

	w, err := m.Lock(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	r, err := m.RLock(ctx) // held at once, beside the write lock
	if err != nil {
		fmt.Println(err)
		return
	}
	w.Release(ctx) // downgraded: this goroutine still reads
	ps, err := m.Participants(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	reads, writes := 0, 0
	for _, p := range ps {
		switch {
		case p.Holds && p.Kind == "read":
			reads++
		case p.Holds && p.Kind == "write":
			writes++
		}
	}
	fmt.Println("holds:", reads, "read,", writes, "write")
	_, err = m.Lock(ctx)
	fmt.Println("upgrade refused:", errors.Is(err, rwlock.ErrUpgrade))
	r.Release(ctx)
	// Output:
	// holds: 1 read, 0 write
	// upgrade refused: true
}
