package mutex_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/mutex"
	"github.com/zkrecipes/zkrecipes/recipes"
	"github.com/zkrecipes/zkrecipes/session"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// Tests of the mutex's costs: where the fair mutex watches its own node
// while it waits, and when a handoff needs no second children read.

type perfLockResult struct {
	l   *mutex.Lease
	err error
	at  time.Time // when Lock returned
}

// perfLockAsync calls m.Lock on a goroutine and returns its result channel.
func perfLockAsync(ctx context.Context, m *mutex.Mutex) <-chan perfLockResult {
	ch := make(chan perfLockResult, 1)
	go func() {
		l, err := m.Lock(ctx)
		ch <- perfLockResult{l, err, time.Now()}
	}()
	return ch
}

// watched reports whether tap's client holds a watch on the server path p.
func perfWatched(tap *zktest.Tap, p string) bool { return tap.Watches()[p] > 0 }

// nextInLine is a holder on one session and a waiter queued right behind it
// on another whose requests and watches tap counts.
type nextInLine struct {
	raw   *zk.Conn
	tap   *zktest.Tap
	hl    *mutex.Lease
	got   <-chan perfLockResult
	names []string // holder's and waiter's node names
	dir   string
	since time.Time // when the waiter called Lock: its wait began after this
}

func queueNextInLine(t *testing.T) *nextInLine {
	t.Helper()
	ns := zktest.NewNamespace(t)
	q := &nextInLine{raw: ns.Conn(t), tap: zktest.NewTap(), dir: ns.Path(lockPath) + "/"}
	ctx := ctxT(t)
	hm, err := mutex.New(connect(t, ns), lockPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { hm.Close() })
	wm, err := mutex.New(connect(t, ns, session.WithDialer(q.tap.Dialer())), lockPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { wm.Close() })
	if q.hl, err = hm.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	q.since = time.Now()
	q.got = perfLockAsync(ctx, wm)
	zktest.Eventually(t, wait, func() bool {
		q.names = lockKids(t, q.raw, ns)
		return len(q.names) == 2 && perfWatched(q.tap, q.dir+q.names[0])
	}, "the waiter watches the holder's node")
	return q
}

// TestPerfNextInLineHoldsWithoutListing: a waiter second in line (its
// predecessor is the holder on the listing it read) whose wait lasts less
// than 100 ms does not watch its own node, and when the holder unlocks it
// holds on the deletion notice alone: no second children read, no own-node
// read, and so no notification of its own delete at its release. Only a
// cycle whose unlock came well within the 100 ms, and whose Lock returned
// within them too, is judged (a stalled machine may stretch one; then
// another is tried).
func TestPerfNextInLineHoldsWithoutListing(t *testing.T) {
	judged := 0
	for try := 0; try < 10 && judged < 2; try++ {
		t.Run(fmt.Sprint("try", try), func(t *testing.T) {
			ctx := ctxT(t)
			q := queueNextInLine(t)
			own := perfWatched(q.tap, q.dir+q.names[1])
			kids := q.tap.Requests()[zktest.OpGetChildren2]
			reads := q.tap.Requests()[zktest.OpGetData]
			if err := q.hl.Release(ctx); err != nil {
				t.Fatal(err)
			}
			waited := time.Since(q.since)
			r := <-q.got
			if r.err != nil {
				t.Fatalf("waiter: %v", r.err)
			}
			defer r.l.Release(ctx)
			if held := r.at.Sub(q.since); waited > 50*time.Millisecond || held > 90*time.Millisecond {
				t.Logf("the holder unlocked %v and the waiter held %v after it called Lock: not judged", waited, held)
				return
			}
			judged++
			if own {
				t.Errorf("the waiter watched its own node %v after it called Lock (watches %v)", waited, q.tap.Watches())
			}
			if n := q.tap.Requests()[zktest.OpGetChildren2] - kids; n != 0 {
				t.Errorf("the handoff read the children %d times, want 0", n)
			}
			if n := q.tap.Requests()[zktest.OpGetData] - reads; n != 0 {
				t.Errorf("the handoff read %d nodes, want 0", n)
			}
			if r.l.Node() != q.names[1] {
				t.Errorf("lease node %q, want %q", r.l.Node(), q.names[1])
			}
		})
	}
	if judged == 0 {
		t.Fatal("no holder unlocked within 50 ms of the waiter queuing in 10 tries")
	}
}

// TestPerfNextInLineWatchesAfterDelay: a waiter second in line that waits
// longer than 100 ms watches its own node from 100 ms into its wait on, and
// still holds on the holder's deletion notice alone when the holder unlocks.
func TestPerfNextInLineWatchesAfterDelay(t *testing.T) {
	ctx := ctxT(t)
	q := queueNextInLine(t)
	own := q.dir + q.names[1]
	zktest.Eventually(t, wait, func() bool { return perfWatched(q.tap, own) }, "the waiter watches its own node")
	if d := time.Since(q.since); d < 100*time.Millisecond {
		t.Errorf("the waiter watched its own node %v after it called Lock, before the 100 ms delay", d)
	}
	kids := q.tap.Requests()[zktest.OpGetChildren2]
	if err := q.hl.Release(ctx); err != nil {
		t.Fatal(err)
	}
	r := <-q.got
	if r.err != nil {
		t.Fatalf("waiter: %v", r.err)
	}
	if n := q.tap.Requests()[zktest.OpGetChildren2] - kids; n != 0 {
		t.Errorf("the handoff read the children %d times, want 0", n)
	}
	if err := r.l.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestPerfNextInLineEarlyDelete: a third party deletes the node of a waiter
// second in line inside the 100 ms before it watches its own node, and the
// holder unlocks right after. Whether the waiter still takes the lease on
// the notice alone (then its lease ends with ErrNodeDeleted once it sets its
// watch) or learns of the delete first (its Lock fails with ErrNodeDeleted),
// the lease ends within the bound WithNodeWatch gives: 100 ms and a round
// trip after the acquire (1.4 s of slack for a loaded machine: a lease
// that set its watch seconds late would fail).
func TestPerfNextInLineEarlyDelete(t *testing.T) {
	ctx := ctxT(t)
	q := queueNextInLine(t)
	if err := q.raw.Delete(q.dir+q.names[1], -1); err != nil {
		t.Fatal(err)
	}
	if err := q.hl.Release(ctx); err != nil {
		t.Fatal(err)
	}
	r := <-q.got
	if r.err != nil {
		if !errors.Is(r.err, recipes.ErrNodeDeleted) {
			t.Fatalf("Lock: %v, want ErrNodeDeleted or a lease that ends with it", r.err)
		}
		t.Logf("Lock failed: %v", r.err)
		return
	}
	got := time.Now()
	select {
	case <-r.l.Done():
	case <-time.After(wait):
		t.Fatal("the lease on a deleted node did not end")
	}
	ended := time.Since(got)
	t.Logf("the lease on a deleted node ended %v after Lock returned", ended)
	if !errors.Is(r.l.Err(), recipes.ErrNodeDeleted) {
		t.Errorf("lease Err %v, want ErrNodeDeleted", r.l.Err())
	}
	if ended > 1500*time.Millisecond {
		t.Errorf("the lease ended %v after Lock returned, want 100 ms and a round trip", ended)
	}
	_ = r.l.Release(ctx)
}

// TestPerfDeepWaiterNoOwnWatch: a waiter third in line does not watch its own
// node while it waits (the next decision reads the children anyway); it
// watches its predecessor, still gets the lock in order once both before it
// are gone, and a third party's delete of its node while it waits still ends
// its Lock with ErrNodeDeleted.
func TestPerfDeepWaiterNoOwnWatch(t *testing.T) {
	ns := zktest.NewNamespace(t)
	raw := ns.Conn(t)
	ctx := ctxT(t)
	newM := func(opts ...session.Option) *mutex.Mutex { return mutexOnOwnSession(t, ns, opts...) }
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
	if err := hl.Release(ctx); err != nil {
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
	if err := a.l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	b := <-bGot
	if b.err != nil {
		t.Fatalf("B: %v", b.err)
	}
	if b.l.Node() != names[2] {
		t.Errorf("B's lease node %q, want %q", b.l.Node(), names[2])
	}
	if err := b.l.Release(ctx); err != nil {
		t.Fatal(err)
	}

	// A third party deletes a deep waiter's node: its Lock fails with
	// ErrNodeDeleted once the holder goes (the read finds it gone).
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
	if err := hl.Release(ctx); err != nil {
		t.Fatal(err)
	}
	a = <-aGot
	if a.err != nil {
		t.Fatalf("A: %v", a.err)
	}
	if err := a.l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	b = <-bGot
	if !errors.Is(b.err, recipes.ErrNodeDeleted) {
		t.Fatalf("B after a third-party delete of its node: %v, want ErrNodeDeleted", b.err)
	}
}
