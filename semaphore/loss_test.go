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

// bystander is the session timeout of a session whose own timeout a test
// does not exercise (a waiter's; the holder's in a kill, which is instant):
// long enough that a loaded machine that stalls the test process for the
// default 2 s does not suspend or lose it.
var bystander = session.WithSessionTimeout(10 * time.Second)

// killRace bounds how long after the waiter acquired a holder whose session
// was killed through its own member may still learn of it: the bound the
// chaos run's checker gives the same race (servingKillRace).
const killRace = time.Second

// toldOutcome is a waiter's acquire, with whether the holder had been told
// when it returned: read on the waiter's goroutine as its Acquire returns
// (stamps taken on two goroutines would measure their scheduling too).
type toldOutcome struct {
	l         *semaphore.Lease
	err       error
	at        time.Time
	toldFirst bool
}

// acquireAfter runs sem.Acquire in a goroutine and reports whether hl had
// ended when it returned.
func acquireAfter(ctx context.Context, sem *semaphore.Semaphore, hl *semaphore.Lease) <-chan toldOutcome {
	got := make(chan toldOutcome, 1)
	go func() {
		l, err := sem.Acquire(ctx)
		told := hl.Err() != nil
		got <- toldOutcome{l, err, time.Now(), told}
	}()
	return got
}

// The holder's session really expires while a waiter waits: its connection
// is partitioned past the session timeout, so the server expires the
// session, a full timeout after it last heard from the holder, and deletes
// the holder's lease node; the holder suspends after ⅔ of the timeout. The
// freed lease goes to the waiter only after the holder was told: the order
// is read exactly, on the waiter's goroutine as its Acquire returns, and any
// other order fails. Once healed, the holder learns that its session is
// gone.
func TestHolderSessionExpired(t *testing.T) {
	ns := zktest.NewNamespace(t)
	raw := ns.Conn(t)
	hs, proxy := sessiontest.ConnectProxy(t, ns)
	rec := sessiontest.Record(t, hs)
	holder := newSem(t, hs, 1)
	ws := connect(t, ns, bystander)
	waiter := newSem(t, ws, 1)
	ctx := ctxT(t)
	hl, err := holder.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sid := hs.SessionID()
	got := acquireAfter(ctx, waiter, hl)
	waitNodes(t, raw, ns, semaphore.LocksDir, 1) // the waiter holds the mutex
	start := time.Now()
	proxy.Partition()
	defer proxy.Heal()
	r := sessiontest.Recv(t, got, wait, "waiter's acquire")
	if r.err != nil {
		t.Fatalf("waiter: %v", r.err)
	}
	defer r.l.Release(ctx)
	t.Logf("partition → waiter acquired %v after it; holder told before: %v (%v)", r.at.Sub(start), r.toldFirst, hl.Err())
	if !r.toldFirst {
		t.Fatalf("the waiter acquired %v after the partition, before the holder was told", r.at.Sub(start))
	}
	if err := hl.Err(); !errors.Is(err, session.ErrSuspended) {
		t.Fatalf("holder's cause = %v, want session.ErrSuspended", err)
	}
	// The holder is cut off: only the server's expiry of its session can
	// have deleted its node.
	if ok, _, err := raw.Exists(semaphore.NodePath(hl)); err != nil || ok {
		t.Fatalf("holder's node after the waiter acquired: exists %v, %v", ok, err)
	}
	proxy.Heal()
	rec.Wait(t, wait, session.Lost)
	if err := hl.Err(); !errors.Is(err, session.ErrLost) || !errors.Is(err, session.ErrSuspended) {
		t.Fatalf("holder's cause once its session is known lost = %v, want session.ErrSuspended and session.ErrLost", err)
	}
	rec.Wait(t, wait, session.Reconnected)
	if hs.SessionID() == sid {
		t.Fatalf("the holder reconnected to its expired session 0x%x", sid)
	}
	if err := hl.Release(ctx); err != nil {
		t.Fatalf("Release of a lost lease: %v", err)
	}
	if k := leases(t, raw, ns); len(k) != 1 || k[0] != r.l.Node() {
		t.Fatalf("lease nodes %v after the lost lease's Release, want only the waiter's %s", k, r.l.Node())
	}
	if err := r.l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	waitNodes(t, raw, ns, semaphore.LocksDir, 0)
	waitNodes(t, raw, ns, semaphore.LeasesDir, 0)
}

// End-at-disconnect policy (under Standard the holder hears of a kill only
// when it reconnects: docs/design.md). The holder's session is ended on the
// server at once while a waiter waits (zktest.ExpireSession through the member that serves it: an operator's
// kill, not an expiry). The server closes the holder's connection, so the
// holder's lease ends with session.ErrSuspended, then matches
// session.ErrLost; the waiter acquires; the lost lease's Release is
// harmless. That the holder is told first is not promised: the connection
// closes only about a round trip before the server deletes the holder's node
// (see leader.Term.Done and docs/design.md), a lead that a starved machine
// can overtake. So the order is logged, and a lost race must be a close one:
// the holder hears of the kill within killRace of the waiter's acquire.
// TestHolderSessionExpired checks the strict order, which a real expiry does
// promise.
func TestHolderSessionKilled(t *testing.T) {
	ns := zktest.NewNamespace(t)
	raw := ns.Conn(t)
	hs, tap := sessiontest.ConnectTap(t, ns, bystander, session.WithLossPolicy(session.EndAtDisconnect))
	rec := sessiontest.Record(t, hs)
	holder := newSem(t, hs, 1)
	waiter := newSem(t, connect(t, ns, bystander), 1)
	ctx := ctxT(t)
	hl, err := holder.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ended := make(chan time.Time, 1)
	go func() {
		<-hl.Done()
		ended <- time.Now()
	}()
	got := acquireAfter(ctx, waiter, hl)
	waitNodes(t, raw, ns, semaphore.LocksDir, 1) // the waiter holds the mutex
	killed := time.Now()
	sessiontest.Expire(t, hs, tap)
	r := sessiontest.Recv(t, got, wait, "waiter's acquire")
	if r.err != nil {
		t.Fatalf("waiter: %v", r.err)
	}
	defer r.l.Release(ctx)
	endAt := sessiontest.Recv(t, ended, wait, "end of the holder's lease")
	t.Logf("kill → holder's lease ended %v after it (%v), waiter acquired %v after it; holder told first: %v",
		endAt.Sub(killed), hl.Err(), r.at.Sub(killed), r.toldFirst)
	if late := endAt.Sub(r.at); !r.toldFirst && late > killRace {
		t.Fatalf("holder's lease ended %v after the waiter acquired, more than the race allows (%v)", late, killRace)
	}
	// The lease ends when the server closes the connection, not only once
	// the client has reconnected and heard "expired".
	if cause := context.Cause(hl.Context()); !errors.Is(cause, session.ErrSuspended) {
		t.Fatalf("holder's lease ended with %v, want session.ErrSuspended", cause)
	}
	rec.Wait(t, wait, session.Lost)
	if err := hl.Err(); !errors.Is(err, session.ErrLost) {
		t.Fatalf("holder's cause once its session is known lost = %v, want session.ErrLost", err)
	}
	if err := hl.Release(ctx); err != nil {
		t.Fatalf("Release of a lost lease: %v", err)
	}
	if k := leases(t, raw, ns); len(k) != 1 || k[0] != r.l.Node() {
		t.Fatalf("lease nodes %v after the lost lease's Release, want only the waiter's %s", k, r.l.Node())
	}
	if err := r.l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	waitNodes(t, raw, ns, semaphore.LocksDir, 0)
	waitNodes(t, raw, ns, semaphore.LeasesDir, 0)
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

// Under the standard policy a connection reset whose reconnection comes
// before the lease deadline keeps the lease and its node: the semaphore
// stays full.
func TestResetKeepsLease(t *testing.T) {
	ns := zktest.NewNamespace(t)
	raw := ns.Conn(t)
	s, p := sessiontest.ConnectProxy(t, ns, session.WithSessionTimeout(sessiontest.LeaseTimeout))
	sem := newSem(t, s, 1)
	other := newSem(t, connect(t, ns), 1)
	ctx := ctxT(t)
	l, err := sem.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sessiontest.Reset(t, s, p)
	if err := l.Err(); err != nil {
		t.Fatalf("lease ended by a reset mended before its deadline: %v", err)
	}
	if ok, _, err := raw.Exists(semaphore.NodePath(l)); err != nil || !ok {
		t.Fatalf("lease node gone after the reset: %v %v", ok, err)
	}
	if _, err := other.TryAcquire(ctx); !errors.Is(err, recipes.ErrBusy) {
		t.Fatalf("other TryAcquire = %v, want ErrBusy", err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	waitNodes(t, raw, ns, semaphore.LeasesDir, 0)
}

// Under the standard policy a connection reset followed by silence ends the
// lease at its deadline, while the server still has the session (the
// lease's node is there, owned by it); once the client is back, the node
// goes and another acquires.
func TestResetThenSilenceEndsLease(t *testing.T) {
	ns := zktest.NewNamespace(t)
	raw := ns.Conn(t)
	s, p := sessiontest.ConnectProxy(t, ns, session.WithSessionTimeout(sessiontest.LeaseTimeout))
	sem := newSem(t, s, 1)
	other := newSem(t, connect(t, ns), 1)
	ctx := ctxT(t)
	l, err := sem.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sid := s.SessionID()
	sl := sessiontest.ResetThenSilence(t, s, p)
	if err := l.Err(); err != nil {
		t.Fatalf("lease ended at the reset, before its deadline: %v", err)
	}
	sl.WaitEnded(t, l.Done(), "the lease")
	_, st, err := raw.Exists(semaphore.NodePath(l))
	if err != nil || st == nil || st.EphemeralOwner != sid {
		t.Fatalf("the session's node when its lease ended: %v %v: the server expired the session first", st, err)
	}
	if !errors.Is(l.Err(), session.ErrSuspended) {
		t.Fatalf("cause = %v, want session.ErrSuspended", l.Err())
	}
	sl.End(t)
	waitNodes(t, raw, ns, semaphore.LeasesDir, 0)
	ol, err := other.TryAcquire(ctx)
	if err != nil {
		t.Fatalf("TryAcquire after the ended lease: %v", err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := ol.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// A short cut under the end-at-disconnect policy ends a held lease at
// Suspended and its node is deleted once the connection is back; an acquire
// waiting for room across the cut still gets a lease (it queues again).
func TestShortCutEndAtDisconnect(t *testing.T) {
	ns := zktest.NewNamespace(t)
	raw := ns.Conn(t)
	s, p := sessiontest.ConnectProxy(t, ns, session.WithLossPolicy(session.EndAtDisconnect))
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
