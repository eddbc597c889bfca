package mutex_test

import (
	"context"
	"errors"
	"testing"

	"github.com/zkrecipes/zkrecipes/mutex"
	"github.com/zkrecipes/zkrecipes/session"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// Tests of issue 13 (performance): where the fair mutex watches its own node
// while it waits, and when a handoff needs no second children read.

type perfLockResult struct {
	l   *mutex.Lease
	err error
}

// perfLockAsync calls m.Lock on a goroutine and returns its result channel.
func perfLockAsync(ctx context.Context, m *mutex.Mutex) <-chan perfLockResult {
	ch := make(chan perfLockResult, 1)
	go func() {
		l, err := m.Lock(ctx)
		ch <- perfLockResult{l, err}
	}()
	return ch
}

// watched reports whether tap's client holds a watch on the server path p.
func perfWatched(tap *zktest.Tap, p string) bool { return tap.Watches()[p] > 0 }

// TestPerfNextInLineHoldsWithoutListing: a waiter second in line (its
// predecessor is the holder on the listing it read) watches its own node
// while it waits, and when the holder unlocks it holds on the deletion
// notice alone: no second children read.
func TestPerfNextInLineHoldsWithoutListing(t *testing.T) {
	ns := zktest.NewNamespace(t)
	raw := ns.Conn(t)
	ctx := ctxT(t)
	hm, err := mutex.New(connect(t, ns), lockPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { hm.Close() })
	tap := zktest.NewTap()
	wm, err := mutex.New(connect(t, ns, session.WithDialer(tap.Dialer())), lockPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { wm.Close() })

	hl, err := hm.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := perfLockAsync(ctx, wm)
	var names []string
	zktest.Eventually(t, wait, func() bool {
		names = lockKids(t, raw, ns)
		return len(names) == 2 && perfWatched(tap, ns.Path(lockPath)+"/"+names[0])
	}, "the waiter watches the holder's node")
	if !perfWatched(tap, ns.Path(lockPath)+"/"+names[1]) {
		t.Fatalf("the next-in-line waiter does not watch its own node (watches %v)", tap.Watches())
	}
	before := tap.Requests()[zktest.OpGetChildren2]
	if err := hl.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	r := <-got
	if r.err != nil {
		t.Fatalf("waiter: %v", r.err)
	}
	if n := tap.Requests()[zktest.OpGetChildren2] - before; n != 0 {
		t.Errorf("the handoff read the children %d times, want 0", n)
	}
	if r.l.Node() != names[1] {
		t.Errorf("lease node %q, want %q", r.l.Node(), names[1])
	}
	if err := r.l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestPerfDeepWaiterNoOwnWatch: a waiter third in line does not watch its own
// node while it waits (the next decision reads the children anyway), still
// gets the lock in order once both before it are gone, and a third party's
// delete of its node while it waits still ends its Lock with ErrLockLost.
func TestPerfDeepWaiterNoOwnWatch(t *testing.T) {
	ns := zktest.NewNamespace(t)
	raw := ns.Conn(t)
	ctx := ctxT(t)
	newM := func(opts ...session.Option) *mutex.Mutex {
		m, err := mutex.New(connect(t, ns, opts...), lockPath)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { m.Close() })
		return m
	}
	hm, am := newM(), newM()
	tap := zktest.NewTap()
	bm := newM(session.WithDialer(tap.Dialer()))
	dir := ns.Path(lockPath) + "/"

	hl, err := hm.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	aGot := perfLockAsync(ctx, am)
	zktest.Eventually(t, wait, func() bool { return len(lockKids(t, raw, ns)) == 2 }, "A queued")
	bGot := perfLockAsync(ctx, bm)
	var names []string
	zktest.Eventually(t, wait, func() bool {
		names = lockKids(t, raw, ns)
		return len(names) == 3 && perfWatched(tap, dir+names[1])
	}, "B watches A's node")
	// B decided before it set that watch (see attempt.wait).
	if perfWatched(tap, dir+names[2]) {
		t.Fatalf("the third waiter watches its own node (watches %v)", tap.Watches())
	}

	// Handoffs in order: H -> A -> B.
	if err := hl.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	a := <-aGot
	if a.err != nil {
		t.Fatalf("A: %v", a.err)
	}
	select {
	case b := <-bGot:
		t.Fatalf("B got the lock while A holds it: %+v", b)
	default:
	}
	if err := a.l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	b := <-bGot
	if b.err != nil {
		t.Fatalf("B: %v", b.err)
	}
	if b.l.Node() != names[2] {
		t.Errorf("B's lease node %q, want %q", b.l.Node(), names[2])
	}
	if err := b.l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}

	// A third party deletes a deep waiter's node: its Lock fails with
	// ErrLockLost once the waiter before it goes (the read finds it gone).
	hl, err = hm.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	aGot = perfLockAsync(ctx, am)
	zktest.Eventually(t, wait, func() bool { return len(lockKids(t, raw, ns)) == 2 }, "A queued again")
	bGot = perfLockAsync(ctx, bm)
	zktest.Eventually(t, wait, func() bool {
		names = lockKids(t, raw, ns)
		return len(names) == 3 && perfWatched(tap, dir+names[1])
	}, "B queued again")
	if err := raw.Delete(dir+names[2], -1); err != nil {
		t.Fatal(err)
	}
	if err := hl.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	a = <-aGot
	if a.err != nil {
		t.Fatalf("A: %v", a.err)
	}
	if err := a.l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	b = <-bGot
	if !errors.Is(b.err, mutex.ErrLockLost) {
		t.Fatalf("B after a third-party delete of its node: %v, want ErrLockLost", b.err)
	}
}
