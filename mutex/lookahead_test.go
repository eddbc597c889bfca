package mutex_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/internal/testkit/sessiontest"
	"github.com/zkrecipes/zkrecipes/mutex"
	"github.com/zkrecipes/zkrecipes/session"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// Tests of the fair mutex's look-ahead (WithLookAhead): a waiter with
// two or more nodes before its own watches the node two places ahead, reads
// the children when that node goes, then watches its predecessor, and takes
// over on that predecessor's deletion notice with no read.

// lookAheadQueue is a lock held by H, with waiters queued behind it in the
// order given, one session each; the last waiter looks ahead, and its
// session is tapped and goes through a fault proxy.
type lookAheadQueue struct {
	ns    *zktest.Namespace
	tap   *zktest.Tap
	proxy *zktest.Proxy
	sess  *session.Session // the last waiter's
	dir   string
	hl    *mutex.Lease
	lctx  []context.CancelFunc    // cancels each waiter's Lock
	got   []<-chan perfLockResult // each waiter's Lock result
	names []string                // H's node, then each waiter's
}

func newLookAheadQueue(t *testing.T, waiters int) *lookAheadQueue {
	t.Helper()
	return newLookAheadQueueCtx(t, waiters, ctxT(t))
}

// newLookAheadQueueCtx is newLookAheadQueue with lastCtx for the last
// waiter's Lock.
func newLookAheadQueueCtx(t *testing.T, waiters int, lastCtx context.Context) *lookAheadQueue {
	t.Helper()
	ns := zktest.NewNamespace(t)
	q := &lookAheadQueue{ns: ns, dir: ns.Path(lockPath) + "/"}
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
			// A session timeout well past the partition test's ctx.
			q.sess, q.proxy, q.tap = sessiontest.ConnectProxyTap(t, ns, session.WithSessionTimeout(10*time.Second))
			if m, err = mutex.New(q.sess, lockPath, mutex.WithLookAhead(true)); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { m.Close() })
		} else {
			m = newM()
		}
		parent := ctx
		if i == waiters-1 {
			parent = lastCtx
		}
		wctx, cancel := context.WithCancel(parent)
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
	if err := r.l.Release(ctxT(t)); err != nil {
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
	if err := q.hl.Release(ctx); err != nil {
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
	if err := a.l.Release(ctx); err != nil {
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
	if err := q.hl.Release(ctx); err != nil {
		t.Fatal(err)
	}
	c := <-q.got[1]
	if c.err != nil {
		t.Fatalf("C: %v", c.err)
	}
	q.awaitWatch(t, 2, 2, "B watches C's node")
	q.notYet(t, 2, "while C holds")
	if err := c.l.Release(ctx); err != nil {
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
	if err := q.hl.Release(ctx); err != nil {
		t.Fatal(err)
	}
	q.holds(t, 1, "B")
}

// TestLookAheadShortDisconnect: the waiter two places back loses its
// connection while it looks ahead and reconnects to the same session: it
// keeps its place, never holds while H or A does, and holds on its own node
// after both.
func TestLookAheadShortDisconnect(t *testing.T) {
	ctx := ctxT(t)
	q := newLookAheadQueue(t, 2) // A, B
	zktest.Eventually(t, wait, func() bool { return q.watches(0) }, "B watches H's node")
	dials := q.tap.Dials()
	q.proxy.Cut()
	zktest.Eventually(t, wait, func() bool {
		return q.tap.Dials() > dials && q.sess.State() == session.Reconnected
	}, "B's session did not reconnect")
	if id := q.sess.SessionID(); sessiontest.Core(q.sess).Epoch().Err() != nil {
		t.Fatalf("B's session 0x%x ended at a short disconnect", id)
	}
	q.notYet(t, 1, "while H holds, after the disconnect")
	if err := q.hl.Release(ctx); err != nil {
		t.Fatal(err)
	}
	a := <-q.got[0]
	if a.err != nil {
		t.Fatalf("A: %v", a.err)
	}
	q.awaitWatch(t, 1, 1, "B watches A's node")
	q.notYet(t, 1, "while A holds")
	if err := a.l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	q.holds(t, 1, "B")
}

// TestLookAheadPartitionShortCtx: partitioned while it looks ahead, the
// waiter two places back returns within its short ctx (with ctx's error),
// and once the partition heals its node is gone.
func TestLookAheadPartitionShortCtx(t *testing.T) {
	ctx := ctxT(t)
	short, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	q := newLookAheadQueueCtx(t, 2, short) // A, B (B's Lock within short)
	zktest.Eventually(t, wait, func() bool { return q.watches(0) }, "B watches H's node")
	q.proxy.Partition()
	deadline, _ := short.Deadline()
	r := <-q.got[1]
	if !errors.Is(r.err, context.DeadlineExceeded) {
		t.Fatalf("Lock while partitioned = %v (at %v, deadline %v), want context.DeadlineExceeded", r.err, r.at, deadline)
	}
	if late := r.at.Sub(deadline); late > 100*time.Millisecond {
		t.Errorf("Lock returned %v after its ctx ended, want within 100 ms", late)
	}
	q.proxy.Heal()
	waitKids(t, q.ns.Conn(t), q.ns, 2) // H's and A's: B's went once healed
	if err := q.hl.Release(ctx); err != nil {
		t.Fatal(err)
	}
	q.holds(t, 0, "A")
}

// TestLookAheadSessionExpires: the session of the waiter two places back
// expires while it looks ahead: its Lock returns session.ErrLost, its node
// goes with the session, and A behind H still gets the lock in order.
func TestLookAheadSessionExpires(t *testing.T) {
	ctx := ctxT(t)
	q := newLookAheadQueue(t, 2) // A, B
	zktest.Eventually(t, wait, func() bool { return q.watches(0) }, "B watches H's node")
	sessiontest.Expire(t, q.sess, q.tap)
	r := <-q.got[1]
	if !errors.Is(r.err, session.ErrLost) {
		t.Fatalf("B's Lock after its session expired = %+v, want session.ErrLost", r)
	}
	waitKids(t, q.ns.Conn(t), q.ns, 2) // H's and A's
	if err := q.hl.Release(ctx); err != nil {
		t.Fatal(err)
	}
	q.holds(t, 0, "A")
}
