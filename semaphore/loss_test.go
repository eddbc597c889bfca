package semaphore_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/internal/testkit/sessiontest"
	"github.com/zkrecipes/zkrecipes/recipes"
	"github.com/zkrecipes/zkrecipes/semaphore"
	"github.com/zkrecipes/zkrecipes/session"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// stamped is an acquire's outcome stamped with a global event number.
type stamped struct {
	acquired
	n int64
}

// acquireStamped runs sem.Acquire in a goroutine and stamps its return.
func acquireStamped(ctx context.Context, sem *semaphore.Semaphore, clock *atomic.Int64) <-chan stamped {
	ch := make(chan stamped, 1)
	go func() {
		l, err := sem.Acquire(ctx)
		ch <- stamped{acquired{[]*semaphore.Lease{l}, err}, clock.Add(1)}
	}()
	return ch
}

// doneStamped stamps the end of a lease.
func doneStamped(l *semaphore.Lease, clock *atomic.Int64) <-chan int64 {
	ch := make(chan int64, 1)
	go func() {
		<-l.Done()
		ch <- clock.Add(1)
	}()
	return ch
}

// The holder's session is expired on the server while a waiter waits: the
// freed lease goes to the waiter only after the holder was told.
func TestHolderSessionExpired(t *testing.T) {
	ns := zktest.NewNamespace(t)
	hs, tap := sessiontest.ConnectTap(t, ns)
	holder := newSem(t, hs, 1)
	waiter := newSem(t, connect(t, ns), 1)
	ctx := ctxT(t)
	hl, err := holder.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The order is read on the waiter's goroutine as its Acquire returns:
	// had the holder been told by then? (Stamps taken on two goroutines
	// would measure their scheduling too.)
	type outcome struct {
		l         *semaphore.Lease
		err       error
		toldFirst bool
	}
	got := make(chan outcome, 1)
	go func() {
		l, err := waiter.Acquire(ctx)
		got <- outcome{l, err, hl.Err() != nil}
	}()
	waitNodes(t, ns.Conn(t), ns, semaphore.LocksDir, 1) // the waiter holds the mutex
	killed := time.Now()
	sessiontest.Expire(t, hs, tap)
	r := sessiontest.Recv(t, got, wait, "waiter's acquire")
	if r.err != nil {
		t.Fatalf("waiter: %v", r.err)
	}
	defer r.l.Release(ctx)
	t.Logf("waiter acquired %v after the expiry; holder told before: %v (%v)", time.Since(killed), r.toldFirst, hl.Err())
	if !r.toldFirst {
		t.Fatal("the waiter acquired before the holder was told")
	}
	if err := hl.Err(); !errors.Is(err, session.ErrSuspended) && !errors.Is(err, session.ErrLost) {
		t.Fatalf("holder's cause = %v", err)
	}
	if err := hl.Release(ctx); err != nil {
		t.Fatalf("Release of a lost lease: %v", err)
	}
}

// The holder is partitioned past its session timeout: its lease ends
// (Suspended) before the server expires the session and the waiter
// acquires.
func TestHolderPartitioned(t *testing.T) {
	ns := zktest.NewNamespace(t)
	hs, p := sessiontest.ConnectProxy(t, ns)
	holder := newSem(t, hs, 1)
	waiter := newSem(t, connect(t, ns), 1)
	ctx := ctxT(t)
	hl, err := holder.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var clock atomic.Int64
	ended := doneStamped(hl, &clock)
	got := acquireStamped(ctx, waiter, &clock)
	waitNodes(t, ns.Conn(t), ns, semaphore.LocksDir, 1)
	start := time.Now()
	p.Partition()
	defer p.Heal()
	endN := sessiontest.Recv(t, ended, wait, "holder's lease end")
	endAt := time.Since(start)
	r := sessiontest.Recv(t, got, wait, "waiter's acquire")
	if r.err != nil {
		t.Fatalf("waiter: %v", r.err)
	}
	defer r.ls[0].Release(ctx)
	t.Logf("partition → holder told %v (%v), waiter acquired %v after it", endAt, hl.Err(), time.Since(start))
	if endN > r.n {
		t.Fatal("the waiter acquired before the holder was told")
	}
	if err := hl.Err(); !errors.Is(err, session.ErrSuspended) {
		t.Fatalf("holder's cause = %v, want session.ErrSuspended", err)
	}
}

// A short cut under the standard policy ends a held lease at Suspended and
// its node is deleted once the connection is back; an acquire waiting for
// room across the cut still gets a lease (it queues again).
func TestShortCutStandard(t *testing.T) {
	ns := zktest.NewNamespace(t)
	raw := ns.Conn(t)
	s, p := sessiontest.ConnectProxy(t, ns)
	rec := sessiontest.Record(t, s)
	sem := newSem(t, s, 1)
	other := newSem(t, connect(t, ns), 1)
	ctx := ctxT(t)
	l, err := sem.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	p.Cut()
	if err := sessiontest.WaitDone(t, l, wait); !errors.Is(err, session.ErrSuspended) {
		t.Fatalf("cause = %v, want session.ErrSuspended", err)
	}
	rec.Wait(t, wait, session.Reconnected)
	if s.SessionID() != semaphore.NodeSessionID(l) {
		t.Fatal("the short cut changed the session")
	}
	zktest.Eventually(t, wait, func() bool {
		ok, _, err := raw.Exists(semaphore.NodePath(l))
		return err == nil && !ok
	}, "node of the ended lease not deleted")
	ol, err := other.TryAcquire(ctx)
	if err != nil {
		t.Fatalf("TryAcquire after the lost lease: %v", err)
	}

	// Now the cut session waits (holding the mutex) across a second cut.
	got := acquireAsync(ctx, sem, 1)
	waitNodes(t, raw, ns, semaphore.LocksDir, 1)
	p.Cut()
	rec.Wait(t, wait, session.Suspended)
	rec.Wait(t, wait, session.Reconnected)
	if err := ol.Release(ctx); err != nil {
		t.Fatal(err)
	}
	r := sessiontest.Recv(t, got, wait, "acquire across a cut")
	if r.err != nil {
		t.Fatalf("acquire across a cut: %v", r.err)
	}
	if err := r.ls[0].Release(ctx); err != nil {
		t.Fatal(err)
	}
	waitNodes(t, raw, ns, semaphore.LeasesDir, 0)
	waitNodes(t, raw, ns, semaphore.LocksDir, 0)
}

// Under the session-only policy a short cut keeps the lease and its node.
func TestShortCutSessionOnly(t *testing.T) {
	ns := zktest.NewNamespace(t)
	raw := ns.Conn(t)
	s, p := sessiontest.ConnectProxy(t, ns, session.WithLossPolicy(session.SessionOnly))
	rec := sessiontest.Record(t, s)
	sem := newSem(t, s, 1)
	other := newSem(t, connect(t, ns), 1)
	ctx := ctxT(t)
	l, err := sem.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	p.Cut()
	rec.Wait(t, wait, session.Suspended)
	rec.Wait(t, wait, session.Reconnected)
	if err := l.Err(); err != nil {
		t.Fatalf("lease ended across a short cut: %v", err)
	}
	if ok, _, err := raw.Exists(semaphore.NodePath(l)); err != nil || !ok {
		t.Fatalf("lease node gone after a short cut: %v %v", ok, err)
	}
	if _, err := other.TryAcquire(ctx); !errors.Is(err, recipes.ErrBusy) {
		t.Fatalf("other TryAcquire = %v, want ErrBusy", err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	waitNodes(t, raw, ns, semaphore.LeasesDir, 0)
}

// An acquire on a partitioned session returns within its short ctx, whether
// the partition began before it or while it waited holding the mutex; once
// healed, nothing of it is left.
func TestPartitionShortCtx(t *testing.T) {
	for _, during := range []bool{false, true} {
		name := map[bool]string{false: "before", true: "while-waiting"}[during]
		t.Run(name, func(t *testing.T) {
			ns := zktest.NewNamespace(t)
			raw := ns.Conn(t)
			ctx := ctxT(t)
			h := newSem(t, connect(t, ns), 1)
			hl, err := h.Acquire(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer hl.Release(ctx)
			s, p := sessiontest.ConnectProxy(t, ns, session.WithSessionTimeout(4*time.Second))
			sem := newSem(t, s, 1)
			const d = 500 * time.Millisecond
			actx, cancel := context.WithCancel(ctx)
			defer cancel()
			var got <-chan acquired
			if during {
				got = acquireAsync(actx, sem, 1)
				waitNodes(t, raw, ns, semaphore.LocksDir, 1) // it holds the mutex, waiting
			}
			p.Partition()
			defer p.Heal()
			start := time.Now()
			stop := time.AfterFunc(d, cancel) // the acquire's ctx ends d after the partition
			defer stop.Stop()
			if !during {
				got = acquireAsync(actx, sem, 1)
			}
			r := sessiontest.Recv(t, got, wait, "acquire on a partitioned session")
			took := time.Since(start)
			t.Logf("returned %v after the partition (ctx ended at %v): %v", took, d, r.err)
			if !errors.Is(r.err, context.Canceled) {
				t.Fatalf("error = %v, want context.Canceled", r.err)
			}
			if took > d+time.Second {
				t.Fatalf("returned %v after the partition, its ctx ended at %v", took, d)
			}
			p.Heal()
			waitNodes(t, raw, ns, semaphore.LocksDir, 0)
			if k := leases(t, raw, ns); len(k) != 1 || k[0] != hl.Node() {
				t.Fatalf("lease nodes %v, want only the holder's", k)
			}
		})
	}
}

// Someone deletes a holder's lease node: with the node watch (default) the
// lease ends with ErrNodeDeleted; the waiter gets the freed lease.
func TestThirdPartyDeletesLease(t *testing.T) {
	ns := zktest.NewNamespace(t)
	raw := ns.Conn(t)
	ctx := ctxT(t)
	h := newSem(t, connect(t, ns), 1)
	w := newSem(t, connect(t, ns), 1)
	hl, err := h.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := acquireAsync(ctx, w, 1)
	waitNodes(t, raw, ns, semaphore.LocksDir, 1)
	if err := raw.Delete(semaphore.NodePath(hl), -1); err != nil {
		t.Fatal(err)
	}
	if err := sessiontest.WaitDone(t, hl, wait); !errors.Is(err, recipes.ErrNodeDeleted) {
		t.Fatalf("holder's cause = %v, want ErrNodeDeleted", err)
	}
	r := sessiontest.Recv(t, got, wait, "waiter's acquire")
	if r.err != nil {
		t.Fatal(r.err)
	}
	// The old holder's Release must not touch the new holder's node.
	if err := hl.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if ok, _, _ := raw.Exists(semaphore.NodePath(r.ls[0])); !ok {
		t.Fatal("the new holder's node was deleted by the old holder's Release")
	}
	r.ls[0].Release(ctx)
}

// Someone deletes the acquirer mutex node of the acquire that holds it
// (waiting for room): the one queued behind takes over, both wait, and when
// leases are given back each gets one, never more than the maximum at once.
func TestThirdPartyDeletesMutexNode(t *testing.T) {
	ns := zktest.NewNamespace(t)
	raw := ns.Conn(t)
	ctx := ctxT(t)
	stop := make(chan struct{})
	observed := watchLeases(t, ns.Conn(t), ns, stop)
	h := newSem(t, connect(t, ns), 2)
	hl, err := h.AcquireN(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	a, b := newSem(t, connect(t, ns), 2), newSem(t, connect(t, ns), 2)
	ga := acquireAsync(ctx, a, 1)
	first := waitNodes(t, raw, ns, semaphore.LocksDir, 1)
	gb := acquireAsync(ctx, b, 1)
	waitNodes(t, raw, ns, semaphore.LocksDir, 2)
	if err := raw.Delete(ns.Path(semPath+"/"+semaphore.LocksDir+"/"+first[0]), -1); err != nil {
		t.Fatal(err)
	}
	if err := hl[0].Release(ctx); err != nil {
		t.Fatal(err)
	}
	var rs []acquired
	select {
	case r := <-ga:
		rs = append(rs, r)
	case r := <-gb:
		rs = append(rs, r)
	case <-time.After(wait):
		t.Fatal("nobody got the lease given back")
	}
	if err := hl[1].Release(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-ga:
		rs = append(rs, r)
	case r := <-gb:
		rs = append(rs, r)
	case <-time.After(wait):
		t.Fatal("the second acquirer did not get the second lease")
	}
	for _, r := range rs {
		if r.err != nil {
			t.Fatal(r.err)
		}
	}
	waitNodes(t, raw, ns, semaphore.LocksDir, 0)
	releaseAll(ctx, append(rs[0].ls, rs[1].ls...))
	waitNodes(t, raw, ns, semaphore.LeasesDir, 0)
	close(stop)
	if most, _ := observed(); most > 2 {
		t.Fatalf("%d lease nodes at once, maximum 2", most)
	}
}

// The transaction's reply is lost (the proxy forwards it, swallows the reply
// and cuts the connection), or the request is dropped: either way the lease
// is held once, on one node, and the mutex node is gone. Under the standard
// policy the cut suspends the session during the acquire, which then starts
// over; under the session-only policy it adopts its node.
func TestCountedGhost(t *testing.T) {
	for _, tc := range []struct {
		act zktest.Action
		pol session.LossPolicy
	}{
		{zktest.SwallowReply, session.SessionOnly}, {zktest.DropRequest, session.SessionOnly},
		{zktest.SwallowReply, session.Standard}, {zktest.DropRequest, session.Standard},
	} {
		act := tc.act
		t.Run(act.String()+"/"+tc.pol.String(), func(t *testing.T) {
			ns := zktest.NewNamespace(t)
			raw := ns.Conn(t)
			s, p := sessiontest.ConnectProxy(t, ns, session.WithLossPolicy(tc.pol))
			sem := newSem(t, s, 2)
			dir := ns.Path(semPath+"/"+semaphore.LeasesDir) + "/"
			var hit atomic.Int32
			p.OnRequest(func(r zktest.Request) zktest.Action {
				if r.Op == zktest.OpMulti && strings.HasPrefix(r.Path, dir) && hit.Add(1) == 1 {
					return act
				}
				return zktest.Forward
			})
			ctx := ctxT(t)
			l, err := sem.Acquire(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if hit.Load() == 0 {
				t.Fatal("the transaction was never seen")
			}
			k := leases(t, raw, ns)
			if len(k) != 1 || k[0] != l.Node() {
				t.Fatalf("lease nodes %v, lease %s", k, l.Node())
			}
			_, st, err := raw.Get(semaphore.NodePath(l))
			if err != nil || st.EphemeralOwner != s.SessionID() || st.Czxid != l.Token() {
				t.Fatalf("lease node stat %+v, %v (token %d)", st, err, l.Token())
			}
			waitNodes(t, raw, ns, semaphore.LocksDir, 0)
			if err := l.Release(ctx); err != nil {
				t.Fatal(err)
			}
			waitNodes(t, raw, ns, semaphore.LeasesDir, 0)
		})
	}
}

// Close while a lease is held, an acquire waits holding the mutex and
// another is queued on it: the waits return ErrClosed, the lease ends with
// ErrClosed, no node is left, and later calls return ErrClosed.
func TestCloseWhileBusy(t *testing.T) {
	ns := zktest.NewNamespace(t)
	raw := ns.Conn(t)
	ctx := ctxT(t)
	s := connect(t, ns)
	sem, err := semaphore.New(s, semPath, 1)
	if err != nil {
		t.Fatal(err)
	}
	l, err := sem.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ga := acquireAsync(ctx, sem, 1)
	waitNodes(t, raw, ns, semaphore.LocksDir, 1)
	gb := acquireAsync(ctx, sem, 1)
	waitNodes(t, raw, ns, semaphore.LocksDir, 2)
	closed := make(chan error, 1)
	go func() { closed <- sem.Close() }()
	for _, g := range []<-chan acquired{ga, gb} {
		if r := sessiontest.Recv(t, g, wait, "acquire at Close"); !errors.Is(r.err, session.ErrClosed) {
			t.Fatalf("acquire at Close = %v, want ErrClosed", r.err)
		}
	}
	if err := sessiontest.Recv(t, closed, wait, "Close"); err != nil {
		t.Fatal(err)
	}
	if err := sessiontest.WaitDone(t, l, wait); !errors.Is(err, session.ErrClosed) {
		t.Fatalf("lease cause = %v, want ErrClosed", err)
	}
	waitNodes(t, raw, ns, semaphore.LocksDir, 0)
	waitNodes(t, raw, ns, semaphore.LeasesDir, 0)
	if _, err := sem.Acquire(ctx); !errors.Is(err, session.ErrClosed) {
		t.Fatalf("Acquire after Close = %v", err)
	}
	if _, err := sem.TryAcquire(ctx); !errors.Is(err, session.ErrClosed) {
		t.Fatalf("TryAcquire after Close = %v", err)
	}
	if err := sem.Close(); err != nil {
		t.Fatalf("second Close = %v", err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatalf("Release after Close = %v", err)
	}
}

// Closing the session ends the leases (session.ErrClosed) and the waits.
func TestSessionClosed(t *testing.T) {
	ns := zktest.NewNamespace(t)
	ctx := ctxT(t)
	s := connect(t, ns)
	sem := newSem(t, s, 1)
	l, err := sem.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := acquireAsync(ctx, sem, 1)
	waitNodes(t, ns.Conn(t), ns, semaphore.LocksDir, 1)
	s.Close()
	if err := sessiontest.WaitDone(t, l, wait); !errors.Is(err, session.ErrClosed) {
		t.Fatalf("lease cause = %v, want session.ErrClosed", err)
	}
	if r := sessiontest.Recv(t, got, wait, "acquire at session Close"); r.err == nil {
		t.Fatal("acquire succeeded on a closed session")
	}
	waitNodes(t, ns.Conn(t), ns, semaphore.LeasesDir, 0)
}
