package mutex_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/internal/testkit/sessiontest"
	"github.com/zkrecipes/zkrecipes/mutex"
	"github.com/zkrecipes/zkrecipes/recipes"
	"github.com/zkrecipes/zkrecipes/session"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// lockResult is a Lock outcome stamped with a global event number.
type lockResult struct {
	l   *mutex.Lease
	err error
	n   int64
	at  time.Time // when Lock returned
	// before reports whether the lease given to lockAsyncAfter had already
	// ended when Lock returned (read on the locking goroutine, right after
	// Lock: no other goroutine's scheduling can reorder the two).
	before bool
}

// async is a Lock running in its own goroutine, which also does the Release
// (a reentrant Mutex must be unlocked by the goroutine that locked it).
type async struct {
	res       chan lockResult
	unlockReq chan struct{}
	unlockErr chan error
	stop      chan struct{}
}

// lockAsync runs lk.Lock(ctx) in a goroutine and stamps its return.
func lockAsync(t testing.TB, ctx context.Context, lk mutex.Locker, clock *atomic.Int64) *async {
	return lockAsyncAfter(t, ctx, lk, clock, nil)
}

// lockAsyncAfter is lockAsync that also records, in lockResult.before,
// whether other had ended when Lock returned.
func lockAsyncAfter(t testing.TB, ctx context.Context, lk mutex.Locker, clock *atomic.Int64, other *mutex.Lease) *async {
	a := &async{res: make(chan lockResult, 1), unlockReq: make(chan struct{}), unlockErr: make(chan error, 1), stop: make(chan struct{})}
	go func() {
		l, err := lk.Lock(ctx)
		before := false
		if other != nil {
			select {
			case <-other.Done():
				before = true
			default:
			}
		}
		a.res <- lockResult{l, err, clock.Add(1), time.Now(), before}
		if err != nil {
			return
		}
		select {
		case <-a.unlockReq:
		case <-a.stop:
		}
		a.unlockErr <- l.Release(context.Background())
	}()
	t.Cleanup(func() { close(a.stop) })
	return a
}

// result waits for the Lock's outcome.
func (a *async) result(t testing.TB) lockResult {
	t.Helper()
	return sessiontest.Recv(t, a.res, wait, "Lock result")
}

// unlock makes the locking goroutine unlock.
func (a *async) unlock(t testing.TB) error {
	t.Helper()
	close(a.unlockReq)
	return sessiontest.Recv(t, a.unlockErr, wait, "Release result")
}

// lockKind builds one lock kind of the package on a session.
type lockKind struct {
	name string
	make func(t testing.TB, s *session.Session, opts ...mutex.Option) mutex.Locker
	fair bool
}

// kinds builds each lock kind of the package on a session.
var kinds = []lockKind{
	{"mutex", func(t testing.TB, s *session.Session, opts ...mutex.Option) mutex.Locker {
		return newMutex(t, s, opts...)
	}, true},
	{"nonreentrant", func(t testing.TB, s *session.Session, opts ...mutex.Option) mutex.Locker {
		m, err := mutex.New(s, lockPath, opts...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { m.Close() })
		return m
	}, true},
	{"nonfair", func(t testing.TB, s *session.Session, opts ...mutex.Option) mutex.Locker {
		m, err := mutex.NewNonFair(s, lockPath, opts...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { m.Close() })
		return m
	}, false},
}

// kindNamed returns the entry of kinds named name.
func kindNamed(t testing.TB, name string) lockKind {
	t.Helper()
	for _, k := range kinds {
		if k.name == name {
			return k
		}
	}
	t.Fatalf("no lock kind %q", name)
	return lockKind{}
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

// checkOnlyNode fails the test unless the lock directory holds exactly l's
// node, owned by session sid. (A NonFair lock has one node name for every
// holder: the owner tells whose it is.)
func checkOnlyNode(t testing.TB, raw *zk.Conn, ns *zktest.Namespace, l *mutex.Lease, sid int64) {
	t.Helper()
	if ks := kids(t, raw, ns); len(ks) != 1 || ks[0] != l.Node() {
		t.Fatalf("nodes %q, want only %s", ks, l.Node())
	}
	if _, st, err := raw.Get(mutex.NodePath(l)); err != nil || st.EphemeralOwner != sid {
		t.Fatalf("node %s: stat %+v, %v; want it owned by session 0x%x", l.Node(), st, err, sid)
	}
}

// waitNoKids waits until the lock directory holds no node (or is gone: the
// server may reap the emptied container).
func waitNoKids(t testing.TB, raw *zk.Conn, ns *zktest.Namespace) {
	t.Helper()
	var ks []string
	zktest.Eventually(t, wait, func() bool {
		ks = kids(t, raw, ns)
		return len(ks) == 0
	}, "nodes %q left under %s", &ks, ns.Path(lockPath))
}

// TestHolderSessionExpired: standard policy; the holder's session really
// expires. Its connection is partitioned past the session timeout, so the
// server expires the session, a full timeout after it last heard from the
// holder, and deletes the holder's node; the holder suspends after ⅔ of the
// timeout. Its lease must have ended before the waiter's Lock returns: the
// order is read exactly, on the waiter's goroutine as Lock returns, and any
// other order fails. Once healed, the holder learns that its session is
// gone.
func TestHolderSessionExpired(t *testing.T) {
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			ns := zktest.NewNamespace(t)
			raw := ns.Conn(t)
			hs, proxy := sessiontest.ConnectProxy(t, ns)
			rec := sessiontest.Record(t, hs)
			holder := k.make(t, hs)
			ws := connect(t, ns, bystander)
			waiter := k.make(t, ws)
			ctx := ctxT(t)
			hl, err := holder.Lock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			sid := hs.SessionID()
			got := lockAsyncAfter(t, ctx, waiter, new(atomic.Int64), hl)
			waitQueued(t, ns, k, ws)
			start := time.Now()
			proxy.Partition()
			defer proxy.Heal()
			r := got.result(t)
			if r.err != nil {
				t.Fatalf("waiter Lock: %v", r.err)
			}
			t.Logf("partition → waiter acquired %v after it; holder's lease ended before: %v (%v)", r.at.Sub(start), r.before, hl.Err())
			if !r.before {
				t.Fatalf("waiter acquired %v after the partition, before the holder's lease ended", r.at.Sub(start))
			}
			if !errors.Is(hl.Err(), session.ErrSuspended) {
				t.Fatalf("holder cause = %v, want session.ErrSuspended", hl.Err())
			}
			// The holder is cut off: only the server's expiry of its session
			// can have deleted its node (for NonFair the node of that name
			// is the waiter's now).
			checkOnlyNode(t, raw, ns, r.l, ws.SessionID())
			proxy.Heal()
			rec.Wait(t, wait, session.Lost)
			if err := hl.Err(); !errors.Is(err, session.ErrLost) || !errors.Is(err, session.ErrSuspended) {
				t.Fatalf("holder cause once its session is known lost = %v, want session.ErrSuspended and session.ErrLost", err)
			}
			rec.Wait(t, wait, session.Reconnected)
			if hs.SessionID() == sid {
				t.Fatalf("the holder reconnected to its expired session 0x%x", sid)
			}
			if err := hl.Release(ctx); err != nil {
				t.Fatalf("Release of a lost lease: %v", err)
			}
			checkOnlyNode(t, raw, ns, r.l, ws.SessionID())
			if err := got.unlock(t); err != nil {
				t.Fatal(err)
			}
			waitNoKids(t, raw, ns)
		})
	}
}

// TestHolderSessionKilled: end-at-disconnect policy (under Standard the
// holder hears of a kill only when it reconnects: docs/design.md); the
// holder's session is ended on the server at once (zktest.ExpireSession through the member that serves
// it: an operator's kill, not an expiry). The server closes the holder's
// connection, so the holder's lease ends with session.ErrSuspended, then
// matches session.ErrLost; the waiter acquires; the lost lease's Release is
// harmless (it must not touch the waiter's node, which for NonFair has the
// same name). That the holder is told first is not promised: the connection
// closes only about a round trip before the server deletes the holder's
// node (see leader.Term.Done and docs/design.md), a lead that a starved
// machine can overtake. So the order is logged, and a lost race must be a
// close one: the holder hears of the kill within killRace of the waiter's
// acquire. TestHolderSessionExpired checks the strict order, which a real
// expiry does promise.
func TestHolderSessionKilled(t *testing.T) {
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			ns := zktest.NewNamespace(t)
			raw := ns.Conn(t)
			hs, tap := sessiontest.ConnectTap(t, ns, bystander, session.WithLossPolicy(session.EndAtDisconnect))
			rec := sessiontest.Record(t, hs)
			holder := k.make(t, hs)
			ws := connect(t, ns, bystander)
			waiter := k.make(t, ws)
			ctx := ctxT(t)
			hl, err := holder.Lock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			ended := make(chan time.Time, 1)
			go func() {
				<-hl.Done()
				ended <- time.Now()
			}()
			got := lockAsyncAfter(t, ctx, waiter, new(atomic.Int64), hl)
			waitQueued(t, ns, k, ws)
			killed := time.Now()
			sessiontest.Expire(t, hs, tap)
			r := got.result(t)
			if r.err != nil {
				t.Fatalf("waiter Lock: %v", r.err)
			}
			endAt := sessiontest.Recv(t, ended, wait, "end of the holder's lease")
			t.Logf("kill → holder's lease ended %v after it (%v), waiter acquired %v after it; holder told first: %v",
				endAt.Sub(killed), hl.Err(), r.at.Sub(killed), r.before)
			if late := endAt.Sub(r.at); !r.before && late > killRace {
				t.Fatalf("holder's lease ended %v after the waiter acquired, more than the race allows (%v)", late, killRace)
			}
			// The lease ends when the server closes the connection, not only
			// once the client has reconnected and heard "expired".
			if cause := context.Cause(hl.Context()); !errors.Is(cause, session.ErrSuspended) {
				t.Fatalf("holder's lease ended with %v, want session.ErrSuspended", cause)
			}
			rec.Wait(t, wait, session.Lost)
			if err := hl.Err(); !errors.Is(err, session.ErrLost) {
				t.Fatalf("holder cause once its session is known lost = %v, want session.ErrLost", err)
			}
			if err := hl.Release(ctx); err != nil {
				t.Fatalf("Release of a lost lease: %v", err)
			}
			checkOnlyNode(t, raw, ns, r.l, ws.SessionID())
			if err := got.unlock(t); err != nil {
				t.Fatal(err)
			}
			waitNoKids(t, raw, ns)
		})
	}
}

// TestHolderPartitioned: standard policy; the holder is partitioned past its
// session timeout. Its lease ends (Suspended) before the server expires the
// session and the waiter acquires.
func TestHolderPartitioned(t *testing.T) {
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			ns := zktest.NewNamespace(t)
			hs, p := sessiontest.ConnectProxy(t, ns)
			holder := k.make(t, hs)
			ws := connect(t, ns)
			waiter := k.make(t, ws)
			ctx := ctxT(t)
			hl, err := holder.Lock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			got := lockAsyncAfter(t, ctx, waiter, new(atomic.Int64), hl)
			waitQueued(t, ns, k, ws)
			start := time.Now()
			p.Partition()
			defer p.Heal()
			sessiontest.WaitDone(t, hl, wait)
			endAt := time.Since(start)
			r := got.result(t)
			if r.err != nil {
				t.Fatalf("waiter Lock: %v", r.err)
			}
			defer got.unlock(t)
			t.Logf("partition→holder end %v (%v), waiter acquired %v after the partition", endAt, hl.Err(), time.Since(start))
			if !r.before {
				t.Fatalf("waiter acquired before the holder's lease ended")
			}
			if !errors.Is(hl.Err(), session.ErrSuspended) {
				t.Fatalf("holder cause = %v, want session.ErrSuspended", hl.Err())
			}
		})
	}
}

// TestResetKeepsLease: under the standard policy a connection reset whose
// reconnection (to the same session) comes before the lease deadline keeps
// the lease and its node, with nothing for the holder to do: others still
// find the lock held.
func TestResetKeepsLease(t *testing.T) {
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			ns := zktest.NewNamespace(t)
			raw := ns.Conn(t)
			hs, p := sessiontest.ConnectProxy(t, ns, session.WithSessionTimeout(sessiontest.LeaseTimeout))
			holder := k.make(t, hs)
			other := k.make(t, connect(t, ns))
			ctx := ctxT(t)
			hl, err := holder.Lock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			sessiontest.Reset(t, hs, p)
			if err := hl.Err(); err != nil {
				t.Fatalf("lease ended by a reset mended before its deadline: %v", err)
			}
			if ok, _, err := raw.Exists(mutex.NodePath(hl)); err != nil || !ok {
				t.Fatalf("node gone after the reset: %v %v", ok, err)
			}
			if _, err := other.TryLock(ctx); !errors.Is(err, recipes.ErrBusy) {
				t.Fatalf("other TryLock = %v, want ErrBusy", err)
			}
			if err := hl.Release(ctx); err != nil {
				t.Fatal(err)
			}
			ol, err := other.TryLock(ctx)
			if err != nil {
				t.Fatalf("TryLock after Release: %v", err)
			}
			if err := ol.Release(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestResetThenSilenceEndsLease: under the standard policy a connection
// reset followed by silence ends the lease at its deadline (two thirds of
// the session timeout after the last answered request), while the server
// still has the session: the lease's node is there, owned by it. Once the
// client is back, the node goes and another can lock.
func TestResetThenSilenceEndsLease(t *testing.T) {
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			ns := zktest.NewNamespace(t)
			raw := ns.Conn(t)
			hs, p := sessiontest.ConnectProxy(t, ns, session.WithSessionTimeout(sessiontest.LeaseTimeout))
			holder := k.make(t, hs)
			other := k.make(t, connect(t, ns))
			ctx := ctxT(t)
			hl, err := holder.Lock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			sid := hs.SessionID()
			sl := sessiontest.ResetThenSilence(t, hs, p)
			if err := hl.Err(); err != nil {
				t.Fatalf("lease ended at the reset, before its deadline: %v", err)
			}
			sl.WaitEnded(t, hl.Done(), "the lease")
			_, st, err := raw.Exists(mutex.NodePath(hl))
			if err != nil || st == nil || st.EphemeralOwner != sid {
				t.Fatalf("the session's node when its lease ended: %v %v: the server expired the session first", st, err)
			}
			if !errors.Is(hl.Err(), session.ErrSuspended) {
				t.Fatalf("cause = %v, want session.ErrSuspended", hl.Err())
			}
			sl.End(t)
			zktest.Eventually(t, wait, func() bool {
				ok, _, err := raw.Exists(mutex.NodePath(hl))
				return err == nil && !ok
			}, "node of the ended lease not deleted")
			ol, err := other.TryLock(ctx)
			if err != nil {
				t.Fatalf("TryLock after the ended lease: %v", err)
			}
			if err := hl.Release(ctx); err != nil {
				t.Fatal(err)
			}
			if err := ol.Release(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestShortCutEndAtDisconnect: a short cut ends an end-at-disconnect lease
// at Suspended; its node is deleted once the connection is back, and someone
// else can take the lock. A waiter, however, keeps its place across a cut.
func TestShortCutEndAtDisconnect(t *testing.T) {
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			ns := zktest.NewNamespace(t)
			raw := ns.Conn(t)
			hs, p := sessiontest.ConnectProxy(t, ns, session.WithLossPolicy(session.EndAtDisconnect))
			rec := sessiontest.Record(t, hs)
			holder := k.make(t, hs)
			other := k.make(t, connect(t, ns))
			ctx := ctxT(t)
			hl, err := holder.Lock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			p.Cut()
			if err := sessiontest.WaitDone(t, hl, wait); !errors.Is(err, session.ErrSuspended) {
				t.Fatalf("cause = %v, want session.ErrSuspended", err)
			}
			rec.Wait(t, wait, session.Reconnected)
			if hs.SessionID() != mutex.NodeSessionID(hl) {
				t.Fatalf("short cut changed the session")
			}
			zktest.Eventually(t, wait, func() bool {
				ok, _, err := raw.Exists(mutex.NodePath(hl))
				return err == nil && !ok
			}, "node of the ended lease not deleted")
			ol, err := other.TryLock(ctx)
			if err != nil {
				t.Fatalf("TryLock after the lost lease: %v", err)
			}
			if err := hl.Release(ctx); err != nil {
				t.Fatal(err)
			}

			// The cut session now waits behind other; a cut keeps its place.
			got := lockAsync(t, ctx, holder, new(atomic.Int64))
			waitQueued(t, ns, k, hs)
			p.Cut()
			rec.Wait(t, wait, session.Reconnected)
			if err := ol.Release(ctx); err != nil {
				t.Fatal(err)
			}
			r := got.result(t)
			if r.err != nil {
				t.Fatalf("waiter across a cut: %v", r.err)
			}
			if err := got.unlock(t); err != nil {
				t.Fatal(err)
			}
			if k.fair {
				waitKids(t, raw, ns, 0)
			}
		})
	}
}

// TestShortCutSessionOnly: under the session-only policy a short cut keeps
// the lease and the node; others still see the lock held.
func TestShortCutSessionOnly(t *testing.T) {
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			ns := zktest.NewNamespace(t)
			raw := ns.Conn(t)
			hs, p := sessiontest.ConnectProxy(t, ns, session.WithLossPolicy(session.SessionOnly))
			rec := sessiontest.Record(t, hs)
			holder := k.make(t, hs)
			other := k.make(t, connect(t, ns))
			ctx := ctxT(t)
			hl, err := holder.Lock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			p.Cut()
			rec.Wait(t, wait, session.Suspended)
			if err := hl.Err(); err != nil {
				t.Fatalf("lease ended at Suspended under SessionOnly: %v", err)
			}
			rec.Wait(t, wait, session.Reconnected)
			if err := hl.Err(); err != nil {
				t.Fatalf("lease ended across a short cut: %v", err)
			}
			if ok, _, err := raw.Exists(mutex.NodePath(hl)); err != nil || !ok {
				t.Fatalf("node gone after a short cut: %v %v", ok, err)
			}
			if _, err := other.TryLock(ctx); !errors.Is(err, recipes.ErrBusy) {
				t.Fatalf("other TryLock = %v, want ErrBusy", err)
			}
			if err := hl.Release(ctx); err != nil {
				t.Fatal(err)
			}
			if ok, _, _ := raw.Exists(mutex.NodePath(hl)); ok {
				t.Fatalf("node left after Release")
			}
		})
	}
}

// TestThirdPartyDelete: someone deletes the holder's node. With the node
// watch the holder's lease ends with ErrNodeDeleted; in any case the next waiter
// acquires.
func TestThirdPartyDelete(t *testing.T) {
	for _, watch := range []bool{true, false} {
		for _, k := range kinds {
			name := k.name + map[bool]string{true: "/nodewatch", false: "/nowatch"}[watch]
			t.Run(name, func(t *testing.T) {
				ns := zktest.NewNamespace(t)
				raw := ns.Conn(t)
				holder := k.make(t, connect(t, ns), mutex.WithNodeWatch(watch))
				waiter := k.make(t, connect(t, ns), mutex.WithNodeWatch(watch))
				ctx := ctxT(t)
				hl, err := holder.Lock(ctx)
				if err != nil {
					t.Fatal(err)
				}
				got := lockAsync(t, ctx, waiter, new(atomic.Int64))
				if k.fair {
					waitKids(t, raw, ns, 2)
				}
				if err := raw.Delete(mutex.NodePath(hl), -1); err != nil {
					t.Fatal(err)
				}
				r := got.result(t)
				if r.err != nil {
					t.Fatal(r.err)
				}
				if watch {
					if err := sessiontest.WaitDone(t, hl, wait); !errors.Is(err, recipes.ErrNodeDeleted) {
						t.Fatalf("holder cause = %v, want ErrNodeDeleted", err)
					}
				} else if hl.Err() != nil {
					t.Logf("holder noticed without the node watch: %v", hl.Err())
				}
				// The old holder's Release must not touch the new holder's node.
				if err := hl.Release(ctx); err != nil {
					t.Fatal(err)
				}
				if ok, _, _ := raw.Exists(mutex.NodePath(r.l)); !ok {
					t.Fatalf("new holder's node deleted by the old holder's Release")
				}
				if err := got.unlock(t); err != nil {
					t.Fatal(err)
				}
			})
		}
	}
}

// TestGhostNode: the create's reply is lost (the proxy forwards the create,
// swallows the reply and cuts the connection). The lock is acquired once,
// with one node, which is gone after Release. Under both loss policies: the
// cut suspends the session while the Lock is still in progress, which must
// not make the standard policy give up the ghost.
func TestGhostNode(t *testing.T) {
	for _, pol := range []struct {
		name string
		p    session.LossPolicy
	}{{"standard", session.Standard}, {"sessiononly", session.SessionOnly}} {
		for _, k := range kinds {
			t.Run(k.name+"/"+pol.name, func(t *testing.T) {
				ns := zktest.NewNamespace(t)
				raw := ns.Conn(t)
				s, p := sessiontest.ConnectProxy(t, ns, session.WithLossPolicy(pol.p))
				rec := sessiontest.Record(t, s)
				lk := k.make(t, s)
				ensureLockDir(t, s, ns)
				dir := ns.Path(lockPath) + "/"
				var swallowed atomic.Int32
				p.OnRequest(func(r zktest.Request) zktest.Action {
					if (r.Op == zktest.OpCreate || r.Op == zktest.OpCreate2 || r.Op == zktest.OpMulti) && strings.HasPrefix(r.Path, dir) && swallowed.Add(1) == 1 {
						return zktest.SwallowReply
					}
					return zktest.Forward
				})
				ctx := ctxT(t)
				l, err := lk.Lock(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if swallowed.Load() != 1 {
					t.Fatalf("creates seen: %d, want 1 (the ghost adopted, not created again)", swallowed.Load())
				}
				rec.Wait(t, wait, session.Suspended) // the reply really was lost
				if err := l.Err(); err != nil {
					t.Fatalf("lease ended: %v", err)
				}
				ks := kids(t, raw, ns)
				if len(ks) != 1 || ks[0] != l.Node() {
					t.Fatalf("nodes %q, lease %q", ks, l.Node())
				}
				_, st, err := raw.Get(mutex.NodePath(l))
				if err != nil || st.EphemeralOwner != s.SessionID() || st.Czxid != l.Token() {
					t.Fatalf("node stat %+v, %v", st, err)
				}
				if err := l.Release(ctx); err != nil {
					t.Fatal(err)
				}
				if ks := kids(t, raw, ns); len(ks) != 0 {
					t.Fatalf("nodes left: %q", ks)
				}
			})
		}
	}
}

// TestSameSessionBackAfterLocalLoss: the session's local timer declares Lost
// while the server is down, and the same session id comes back when it
// restarts (a standalone server keeps its sessions, see HAZARDS). Nodes of
// the lost epoch (a session-only holder's, a waiter's) are still there,
// owned by the live session: the engine must delete them, or they block the
// lock forever.
//
// The restarted server expires a restored session one session timeout after
// it starts serving, unless the client is back by then; go-zookeeper retries
// once a second, so the sessions ask for 5 s (not the helpers' 2 s) to come
// back in time even on a loaded machine. A different session id after the
// restart therefore means the setup failed, and the test fails: a skip would
// count an unchecked safety case as passed.
func TestSameSessionBackAfterLocalLoss(t *testing.T) {
	const timeout = 5 * time.Second
	srv := zktest.StartServerT(t)
	ns := zktest.NewNamespaceOn(t, srv)
	ctx := ctxT(t)
	// The sessions reach the server through a proxy that refuses them while
	// the server restarts: a standalone server accepts connections before it
	// has loaded its data and then neither answers nor closes them (its close
	// path throws a NullPointerException), and go-zookeeper waits 10 × ⅔ of
	// the session timeout in such a handshake, far past the 5 s in which the
	// restored sessions must come back.
	px := ns.Proxy(t)
	hs := sessiontest.ConnectTo(t, px.Servers(), ns.Root, session.WithLossPolicy(session.SessionOnly), session.WithSessionTimeout(timeout))
	ws := sessiontest.ConnectTo(t, px.Servers(), ns.Root, session.WithSessionTimeout(timeout))
	hrec, wrec := sessiontest.Record(t, hs), sessiontest.Record(t, ws)
	holder := newMutex(t, hs)
	waiter := newMutex(t, ws)
	hl, err := holder.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := lockAsync(t, ctx, waiter, new(atomic.Int64))
	raw := zktest.Conn(t, px.Servers(), 0) // through the proxy too: it lives across the restart
	waitKids(t, raw, ns, 2)
	hid, wid := hs.SessionID(), ws.SessionID()

	if err := srv.Kill(); err != nil {
		t.Fatal(err)
	}
	hrec.Wait(t, 2*timeout+wait, session.Lost)
	wrec.Wait(t, 2*timeout+wait, session.Lost)
	if err := sessiontest.WaitDone(t, hl, wait); !errors.Is(err, session.ErrLost) {
		t.Fatalf("session-only holder: %v, want session.ErrLost", err)
	}
	if r := got.result(t); !errors.Is(r.err, session.ErrLost) {
		t.Fatalf("waiter: %v, want session.ErrLost", r.err)
	}
	restarted := time.Now()
	px.Refuse(true)
	if err := srv.Restart(); err != nil { // returns once the server serves
		t.Fatal(err)
	}
	px.Refuse(false)
	hrec.Wait(t, wait, session.Reconnected)
	wrec.Wait(t, wait, session.Reconnected)
	t.Logf("both sessions back %v after the restart began", time.Since(restarted))
	if hs.SessionID() != hid || ws.SessionID() != wid {
		t.Fatalf("the server did not keep the sessions (ids %x %x -> %x %x): the case under test did not happen",
			hid, wid, hs.SessionID(), ws.SessionID())
	}
	raw2 := ns.Conn(t)
	zktest.Eventually(t, wait, func() bool {
		k, _, err := raw2.Children(ns.Path(lockPath))
		// The server may reap the emptied lock directory (a container).
		return errors.Is(err, zk.ErrNoNode) || (err == nil && len(k) == 0)
	}, "nodes of the lost epoch left behind")
	l, err := waiter.TryLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestLockWhileDisconnected: a Lock called while the connection is down
// waits for it (within ctx), then acquires with one node. The session
// timeout is long (10 s) so that the connection can stay down for a while
// without the session being declared lost.
func TestLockWhileDisconnected(t *testing.T) {
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			ns := zktest.NewNamespace(t)
			raw := ns.Conn(t)
			w := zktest.NewTap() // counts the client's connection attempts
			s, p := sessiontest.ConnectProxy(t, ns, session.WithSessionTimeout(10*time.Second), session.WithDialer(w.Dialer()))
			rec := sessiontest.Record(t, s)
			sid := s.SessionID()
			lk := k.make(t, s)
			ctx := ctxT(t)
			p.Refuse(true)
			p.Cut()
			rec.Wait(t, wait, session.Suspended)
			got := lockAsync(t, ctx, lk, new(atomic.Int64))

			// The Lock must not return while the connection is down: watch
			// its result over a window that ends only when the client has
			// had two more connection attempts refused after the Lock
			// started. go-zookeeper retries once a second, so the Lock
			// runs at least a second with the connection down; one that
			// failed fast (ErrConnectionClosed, ErrNoServer) would return
			// within it.
			d0 := w.Dials()
			deadline := time.After(wait)
			tick := time.NewTicker(10 * time.Millisecond)
			defer tick.Stop()
			for w.Dials() < d0+2 {
				select {
				case r := <-got.res:
					t.Fatalf("Lock returned while disconnected (after %d refused connection attempts): %v", w.Dials()-d0, r.err)
				case <-deadline:
					t.Fatalf("the client did not retry the connection within %v", wait)
				case <-tick.C:
				}
			}
			for _, st := range rec.States() {
				if st == session.Lost {
					t.Fatalf("session declared lost during the window: %v", rec.States())
				}
			}
			t.Logf("no Lock return over %d refused connection attempts", w.Dials()-d0)

			p.Refuse(false)
			rec.Wait(t, wait, session.Reconnected)
			r := got.result(t)
			if r.err != nil {
				t.Fatal(r.err)
			}
			if r.l.Err() != nil {
				t.Fatalf("lease: %v", r.l.Err())
			}
			if mutex.NodeSessionID(r.l) != sid {
				t.Fatalf("lease on session %x, want the original %x", mutex.NodeSessionID(r.l), sid)
			}
			// Exactly our node: nothing created twice across the outage.
			if ks := kids(t, raw, ns); len(ks) != 1 || ks[0] != r.l.Node() {
				t.Fatalf("nodes %q, want only the lease's %q", ks, r.l.Node())
			}
			if err := got.unlock(t); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestCancelDuringLostCreate: the create's reply is lost and the connection
// cannot come back; canceling the Lock returns at once (ctx is the only
// bound), and the ghost node is deleted in the background once the
// connection is back.
func TestCancelDuringLostCreate(t *testing.T) {
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			ns := zktest.NewNamespace(t)
			raw := ns.Conn(t)
			s, p := sessiontest.ConnectProxy(t, ns, session.WithLossPolicy(session.SessionOnly))
			rec := sessiontest.Record(t, s)
			lk := k.make(t, s)
			ensureLockDir(t, s, ns)
			dir := ns.Path(lockPath) + "/"
			var swallowed atomic.Int32
			p.OnRequest(func(r zktest.Request) zktest.Action {
				if (r.Op == zktest.OpCreate || r.Op == zktest.OpMulti) && strings.HasPrefix(r.Path, dir) && swallowed.Add(1) == 1 {
					p.Refuse(true)
					return zktest.SwallowReply
				}
				return zktest.Forward
			})
			ctx, cancel := context.WithCancel(ctxT(t))
			got := lockAsync(t, ctx, lk, new(atomic.Int64))
			rec.Wait(t, wait, session.Suspended)
			zktest.Eventually(t, wait, func() bool { return len(kids(t, raw, ns)) == 1 }, "ghost not created")
			cancel()
			start := time.Now()
			r := got.result(t)
			if !errors.Is(r.err, context.Canceled) {
				t.Fatalf("Lock = %v, want context.Canceled", r.err)
			}
			t.Logf("Lock returned %v after the cancel (connection still down)", time.Since(start))
			p.Refuse(false)
			rec.Wait(t, wait, session.Reconnected)
			zktest.Eventually(t, wait, func() bool { return len(kids(t, raw, ns)) == 0 }, "ghost node not deleted")
		})
	}
}
