package mutex_test

import (
	"context"
	"errors"
	"testing"

	"github.com/zkrecipes/zkrecipes/mutex"
	"github.com/zkrecipes/zkrecipes/session"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// Tests of the fair mutex's look-ahead (recipes.LooksAhead): a waiter with
// two or more nodes before its own watches the node two places ahead, reads
// the children when that node goes, then watches its predecessor, and takes
// over on that predecessor's deletion notice with no read.

// lookAheadQueue is a lock held by H, with waiters queued behind it in the
// order given, one session each; the last waiter's session is tapped.
type lookAheadQueue struct {
	ns    *zktest.Namespace
	tap   *zktest.Tap
	dir   string
	hl    *mutex.Lease
	lctx  []context.CancelFunc    // cancels each waiter's Lock
	got   []<-chan perfLockResult // each waiter's Lock result
	names []string                // H's node, then each waiter's
}

func newLookAheadQueue(t *testing.T, waiters int) *lookAheadQueue {
	t.Helper()
	ns := zktest.NewNamespace(t)
	q := &lookAheadQueue{ns: ns, tap: zktest.NewTap(), dir: ns.Path(lockPath) + "/"}
	raw := ns.Conn(t)
	ctx := ctxT(t)
	newM := func(opts ...session.Option) *mutex.Mutex { return mutexOnOwnSession(t, ns, opts...) }
	var err error
	if q.hl, err = newM().Lock(ctx); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < waiters; i++ {
		var m *mutex.Mutex
		if i == waiters-1 {
			m = newM(session.WithDialer(q.tap.Dialer()))
		} else {
			m = newM()
		}
		wctx, cancel := context.WithCancel(ctx)
		q.lctx = append(q.lctx, cancel)
		q.got = append(q.got, perfLockAsync(wctx, m))
		q.names = waitKids(t, raw, ns, i+2)
	}
	return q
}

// last is the tapped waiter's index in q.names.
func (q *lookAheadQueue) last() int { return len(q.names) - 1 }

// watches reports whether the tapped waiter watches node names[i].
func (q *lookAheadQueue) watches(i int) bool { return perfWatched(q.tap, q.dir+q.names[i]) }

// awaitWatch waits until the tapped waiter watches node names[i], failing at
// once if waiter w (index into q.got) returns from Lock meanwhile.
func (q *lookAheadQueue) awaitWatch(t *testing.T, i, w int, why string) {
	t.Helper()
	zktest.Eventually(t, wait, func() bool {
		q.notYet(t, w, "before "+why)
		return q.watches(i)
	}, why)
}

// holds receives waiter w's Lock result, checks that it holds on its own
// node, names[w+1], and unlocks (which reads no children).
func (q *lookAheadQueue) holds(t *testing.T, w int, who string) {
	t.Helper()
	r := <-q.got[w]
	if r.err != nil {
		t.Fatalf("%s: %v", who, r.err)
	}
	if r.l.Node() != q.names[w+1] {
		t.Errorf("%s's lease node %q, want %q", who, r.l.Node(), q.names[w+1])
	}
	if err := r.l.Unlock(ctxT(t)); err != nil {
		t.Fatal(err)
	}
}

// notYet fails if waiter w (index into q.got) has returned from Lock.
func (q *lookAheadQueue) notYet(t *testing.T, w int, why string) {
	t.Helper()
	select {
	case r := <-q.got[w]:
		t.Fatalf("waiter %d returned from Lock %s: %+v", w, why, r)
	default:
	}
}

// TestLookAheadHandoffNeedsNoRead: with H holding and A and B queued, B
// watches H, not A. When H unlocks, A holds, and B reads the children once
// and watches A; when A unlocks, B holds with no read at all.
func TestLookAheadHandoffNeedsNoRead(t *testing.T) {
	ctx := ctxT(t)
	q := newLookAheadQueue(t, 2)
	zktest.Eventually(t, wait, func() bool { return q.watches(0) }, "B watches H's node")
	if q.watches(1) {
		t.Fatalf("B watches A's node while H holds (watches %v)", q.tap.Watches())
	}
	kids := q.tap.Requests()[zktest.OpGetChildren2]
	if err := q.hl.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	a := <-q.got[0]
	if a.err != nil {
		t.Fatalf("A: %v", a.err)
	}
	zktest.Eventually(t, wait, func() bool {
		return q.watches(1) && q.tap.Requests()[zktest.OpGetChildren2]-kids == 1
	}, "B read the children once and watches A's node")
	q.notYet(t, 1, "while A holds")
	kids = q.tap.Requests()[zktest.OpGetChildren2]
	if err := a.l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	q.holds(t, 1, "B")
	if n := q.tap.Requests()[zktest.OpGetChildren2] - kids; n != 0 {
		t.Errorf("B's handoff read the children %d times, want 0", n)
	}
}

// TestLookAheadWatchedNodeGivesUp: with H holding and A, C and B queued, B
// watches A. A gives up (its ctx ends): B reads the children, finds H and C
// before it, and watches H; it holds only after H and then C have unlocked.
func TestLookAheadWatchedNodeGivesUp(t *testing.T) {
	ctx := ctxT(t)
	q := newLookAheadQueue(t, 3) // A, C, B
	zktest.Eventually(t, wait, func() bool { return q.watches(1) }, "B watches A's node")
	q.lctx[0]()
	if r := <-q.got[0]; !errors.Is(r.err, context.Canceled) {
		t.Fatalf("A after its ctx ended: %+v, want context.Canceled", r)
	}
	q.awaitWatch(t, 0, 2, "B watches H's node")
	q.notYet(t, 2, "while H holds, after A gave up")
	if err := q.hl.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	c := <-q.got[1]
	if c.err != nil {
		t.Fatalf("C: %v", c.err)
	}
	q.awaitWatch(t, 2, 2, "B watches C's node")
	q.notYet(t, 2, "while C holds")
	if err := c.l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	q.holds(t, 2, "B")
}

// TestLookAheadPredecessorGivesUp: with H holding and A and B queued, B
// watches H; A gives up, which B is not told of. B holds only once H
// unlocks, and then without waiting for anything else.
func TestLookAheadPredecessorGivesUp(t *testing.T) {
	ctx := ctxT(t)
	q := newLookAheadQueue(t, 2) // A, B
	zktest.Eventually(t, wait, func() bool { return q.watches(0) }, "B watches H's node")
	q.lctx[0]()
	if r := <-q.got[0]; !errors.Is(r.err, context.Canceled) {
		t.Fatalf("A after its ctx ended: %+v, want context.Canceled", r)
	}
	raw := q.ns.Conn(t)
	waitKids(t, raw, q.ns, 2) // A's node is gone
	q.notYet(t, 1, "while H holds, after A gave up")
	if err := q.hl.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	q.holds(t, 1, "B")
}
