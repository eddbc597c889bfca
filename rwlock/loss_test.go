package rwlock_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/internal/testkit/sessiontest"
	"github.com/zkrecipes/zkrecipes/recipes"
	"github.com/zkrecipes/zkrecipes/rwlock"
	"github.com/zkrecipes/zkrecipes/session"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// sidePairs are the (holder, waiter) sides that conflict.
var sidePairs = []struct{ holder, waiter Side }{
	{Write, Read},
	{Read, Write},
	{Write, Write},
}

func pairName(k kind, h, w Side) string {
	return fmt.Sprintf("%s/%v-holder/%v-waiter", k.name, h, w)
}

// doneAsync stamps the end of a lease.
func doneAsync(l *rwlock.Lease, clock *atomic.Int64) <-chan int64 {
	ch := make(chan int64, 1)
	go func() {
		<-l.Done()
		ch <- clock.Add(1)
	}()
	return ch
}

// TestHolderSessionExpired: standard policy; the holder's session is
// expired on the server. Its lease must end before the waiter's acquire
// returns.
func TestHolderSessionExpired(t *testing.T) {
	for _, k := range kinds {
		for _, p := range sidePairs {
			t.Run(pairName(k, p.holder, p.waiter), func(t *testing.T) {
				ns := zktest.NewNamespace(t)
				hs, tap := sessiontest.ConnectTap(t, ns)
				holder := k.make(t, hs)
				waiter := k.make(t, connect(t, ns))
				ctx := ctxT(t)
				hl, err := acquire(ctx, holder, p.holder, false)
				if err != nil {
					t.Fatal(err)
				}
				var clock atomic.Int64
				// The order is read on the waiter's goroutine as its acquire
				// returns: had the holder's lease ended by then?
				got := lockAsyncThen(t, ctx, waiter, p.waiter, &clock, func() bool { return hl.Err() != nil })
				waitNodes(t, ns.Conn(t), ns, 2)
				killed := time.Now()
				sessiontest.Expire(t, hs, tap)
				r := got.held(t)
				t.Logf("expiry → waiter acquired %v after the expiry; holder's lease ended before: %v (%v)", time.Since(killed), r.then, hl.Err())
				if !r.then {
					t.Fatalf("waiter acquired before the holder's lease ended")
				}
				if !errors.Is(hl.Err(), session.ErrSuspended) && !errors.Is(hl.Err(), session.ErrLost) {
					t.Fatalf("holder cause = %v", hl.Err())
				}
				if err := hl.Release(ctx); err != nil {
					t.Fatalf("Unlock of a lost lease: %v", err)
				}
			})
		}
	}
}

// TestHolderPartitioned: standard policy; the holder is partitioned past its
// session timeout. Its lease ends (Suspended) before the server expires the
// session and the waiter acquires.
func TestHolderPartitioned(t *testing.T) {
	for _, k := range kinds {
		for _, p := range sidePairs[:2] {
			t.Run(pairName(k, p.holder, p.waiter), func(t *testing.T) {
				ns := zktest.NewNamespace(t)
				hs, proxy := sessiontest.ConnectProxy(t, ns)
				holder := k.make(t, hs)
				waiter := k.make(t, connect(t, ns))
				ctx := ctxT(t)
				hl, err := acquire(ctx, holder, p.holder, false)
				if err != nil {
					t.Fatal(err)
				}
				var clock atomic.Int64
				ended := doneAsync(hl, &clock)
				got := lockAsync(t, ctx, waiter, p.waiter, &clock)
				waitNodes(t, ns.Conn(t), ns, 2)
				start := time.Now()
				proxy.Partition()
				defer proxy.Heal()
				endN := sessiontest.Recv(t, ended, wait, "holder lease end")
				endAt := time.Since(start)
				r := got.held(t)
				t.Logf("partition → holder end %v (%v), waiter acquired %v after the partition", endAt, hl.Err(), time.Since(start))
				if endN > r.n {
					t.Fatal("waiter acquired before the holder's lease ended")
				}
				if !errors.Is(hl.Err(), session.ErrSuspended) {
					t.Fatalf("holder cause = %v, want session.ErrSuspended", hl.Err())
				}
			})
		}
	}
}

// TestShortDisconnect: a connection drop shorter than the session timeout.
// Standard policy: a held lease ends at Suspended and its node is deleted
// once the connection is back, while a waiter keeps its place across the
// cut. Session-only policy: the lease and its node survive.
func TestShortDisconnect(t *testing.T) {
	for _, k := range kinds {
		for _, side := range []Side{Read, Write} {
			t.Run(fmt.Sprintf("%s/%v/standard", k.name, side), func(t *testing.T) {
				ns := zktest.NewNamespace(t)
				raw := ns.Conn(t)
				hs, p := sessiontest.ConnectProxy(t, ns)
				rec := sessiontest.Record(t, hs)
				holder := k.make(t, hs)
				other := k.make(t, connect(t, ns))
				ctx := ctxT(t)
				hl, err := acquire(ctx, holder, side, false)
				if err != nil {
					t.Fatal(err)
				}
				p.Cut()
				if err := sessiontest.WaitDone(t, hl, wait); !errors.Is(err, session.ErrSuspended) {
					t.Fatalf("cause = %v, want session.ErrSuspended", err)
				}
				rec.Wait(t, wait, session.Reconnected)
				if hs.SessionID() != rwlock.NodeSessionID(hl) {
					t.Fatal("a short cut changed the session")
				}
				waitEmpty(t, raw, ns)
				ol, err := acquire(ctx, other, Write, true)
				if err != nil {
					t.Fatalf("TryLock after the lost lease: %v", err)
				}
				if err := hl.Release(ctx); err != nil {
					t.Fatal(err)
				}
				// The cut session now waits behind other's write; a cut keeps
				// its place.
				var clock atomic.Int64
				got := lockAsync(t, ctx, holder, side, &clock)
				waitNodes(t, raw, ns, 2)
				p.Cut()
				rec.Wait(t, wait, session.Reconnected)
				u := clock.Add(1)
				if err := ol.Release(ctx); err != nil {
					t.Fatal(err)
				}
				r := got.held(t)
				if r.n < u {
					t.Fatal("waiter acquired before the holder unlocked")
				}
				got.unlock(t)
				waitEmpty(t, raw, ns)
			})
			t.Run(fmt.Sprintf("%s/%v/session-only", k.name, side), func(t *testing.T) {
				ns := zktest.NewNamespace(t)
				raw := ns.Conn(t)
				hs, p := sessiontest.ConnectProxy(t, ns, session.WithLossPolicy(session.SessionOnly))
				rec := sessiontest.Record(t, hs)
				holder := k.make(t, hs)
				other := k.make(t, connect(t, ns))
				ctx := ctxT(t)
				hl, err := acquire(ctx, holder, side, false)
				if err != nil {
					t.Fatal(err)
				}
				p.Cut()
				rec.Wait(t, wait, session.Suspended)
				rec.Wait(t, wait, session.Reconnected)
				if err := hl.Err(); err != nil {
					t.Fatalf("session-only lease ended at a short cut: %v", err)
				}
				if ks := nodes(t, raw, ns); len(ks) != 1 || ks[0] != hl.Node() {
					t.Fatalf("nodes %q, want the lease's %s", ks, hl.Node())
				}
				if _, err := other.TryLock(ctx); !errors.Is(err, recipes.ErrBusy) {
					t.Fatalf("TryLock beside a held lease: %v, want ErrBusy", err)
				}
				if err := hl.Release(ctx); err != nil {
					t.Fatal(err)
				}
				waitEmpty(t, raw, ns)
			})
		}
	}
}

// TestPartitionShortCtx: an acquire whose connection is partitioned returns
// within its ctx (plus the engine's brief cleanup grace), whether it was
// queued before the partition or began during it; once the partition heals,
// nothing of it is left.
func TestPartitionShortCtx(t *testing.T) {
	const bound = 400 * time.Millisecond
	for _, k := range kinds {
		for _, side := range []Side{Read, Write} {
			t.Run(fmt.Sprintf("%s/%v", k.name, side), func(t *testing.T) {
				ns := zktest.NewNamespace(t)
				raw := ns.Conn(t)
				ctx := ctxT(t)
				holder := k.make(t, connect(t, ns))
				hl, err := holder.Lock(ctx)
				if err != nil {
					t.Fatal(err)
				}
				ws, p, rd := connectReads(t, ns, session.WithSessionTimeout(10*time.Second))
				rec := sessiontest.Record(t, ws)
				waiter := k.make(t, ws)

				// Queued before the partition.
				qctx, cancel := context.WithCancel(ctx)
				defer cancel()
				res := make(chan error, 1)
				go func() {
					l, err := acquire(qctx, waiter, side, false)
					if err == nil {
						l.Release(ctx)
						err = errors.New("acquired")
					}
					res <- err
				}()
				rd.waitRead(t, hl.Node())
				p.Partition()
				short, cancelShort := context.WithTimeout(ctx, bound)
				defer cancelShort()
				stop := context.AfterFunc(short, cancel)
				defer stop()
				start := time.Now()
				err = sessiontest.Recv(t, res, wait, "queued acquire")
				queued := time.Since(start)
				if !errors.Is(err, context.Canceled) {
					t.Fatalf("queued acquire: %v, want context.Canceled", err)
				}

				// Begun during the partition.
				start = time.Now()
				bctx, cancelB := context.WithTimeout(ctx, bound)
				defer cancelB()
				_, err = acquire(bctx, waiter, side, false)
				begun := time.Since(start)
				if !errors.Is(err, context.DeadlineExceeded) {
					t.Fatalf("acquire during the partition: %v, want DeadlineExceeded", err)
				}
				t.Logf("ctx %v: queued acquire returned %v after the partition began, an acquire begun during it after %v", bound, queued, begun)
				// A generous tolerance for a loaded machine; the engine's own
				// overshoot is its 10 ms cleanup grace.
				if limit := bound + time.Second; queued > limit || begun > limit {
					t.Fatalf("acquires took %v and %v with a ctx of %v", queued, begun, bound)
				}
				p.Heal()
				rec.Wait(t, wait, session.Reconnected)
				zktest.Eventually(t, wait, func() bool {
					ks := nodes(t, raw, ns)
					return len(ks) == 1 && ks[0] == hl.Node()
				}, "the waiter's node is left behind")
				if err := hl.Release(ctx); err != nil {
					t.Fatal(err)
				}
			})
		}
	}
}

// TestThirdPartyDelete: someone deletes our node. A holder's lease ends with
// ErrNodeDeleted (and the waiter gets the lock); a waiter's acquire returns
// ErrNodeDeleted.
func TestThirdPartyDelete(t *testing.T) {
	for _, k := range kinds {
		for _, p := range sidePairs {
			t.Run(pairName(k, p.holder, p.waiter), func(t *testing.T) {
				ns := zktest.NewNamespace(t)
				raw := ns.Conn(t)
				ctx := ctxT(t)
				holder := k.make(t, connect(t, ns))
				ws, _, rd := connectReads(t, ns)
				waiter := k.make(t, ws)
				third := k.make(t, connect(t, ns))
				hl, err := acquire(ctx, holder, p.holder, false)
				if err != nil {
					t.Fatal(err)
				}
				// The waiter's node is deleted while it waits.
				var clock atomic.Int64
				wa := lockAsync(t, ctx, waiter, p.waiter, &clock)
				rd.waitRead(t, hl.Node())
				ks := waitNodes(t, raw, ns, 2)
				if err := raw.Delete(ns.Path(lockPath)+"/"+ks[1], -1); err != nil {
					t.Fatal(err)
				}
				if r := wa.result(t); !errors.Is(r.err, recipes.ErrNodeDeleted) {
					t.Fatalf("waiter whose node was deleted: %v, want ErrNodeDeleted", r.err)
				}
				// The holder's node is deleted: its lease ends, and a waiter
				// gets the lock.
				ta := lockAsync(t, ctx, third, p.waiter, &clock)
				waitNodes(t, raw, ns, 2)
				if err := raw.Delete(rwlock.NodePath(hl), -1); err != nil {
					t.Fatal(err)
				}
				if err := sessiontest.WaitDone(t, hl, wait); !errors.Is(err, recipes.ErrNodeDeleted) {
					t.Fatalf("holder's lease: %v, want ErrNodeDeleted", err)
				}
				ta.held(t)
				if err := hl.Release(ctx); err != nil {
					t.Fatalf("Unlock of a lost lease: %v", err)
				}
				ta.unlock(t)
				waitEmpty(t, raw, ns)
			})
		}
	}
}

// TestCancelWhileQueued: an acquire canceled (or timed out) while it waits
// returns the ctx error and leaves nothing behind: the directory holds only
// the holder's node, untouched.
func TestCancelWhileQueued(t *testing.T) {
	for _, k := range kinds {
		for _, p := range sidePairs {
			for _, want := range []error{context.Canceled, context.DeadlineExceeded} {
				t.Run(pairName(k, p.holder, p.waiter)+"/"+strings.ReplaceAll(want.Error(), " ", "-"), func(t *testing.T) {
					ns := zktest.NewNamespace(t)
					raw := ns.Conn(t)
					ctx := ctxT(t)
					holder := k.make(t, connect(t, ns))
					ws, _, rd := connectReads(t, ns)
					waiter := k.make(t, ws)
					hl, err := acquire(ctx, holder, p.holder, false)
					if err != nil {
						t.Fatal(err)
					}
					var wctx context.Context
					var cancel context.CancelFunc
					if want == context.DeadlineExceeded {
						wctx, cancel = context.WithTimeout(ctx, 500*time.Millisecond)
					} else {
						wctx, cancel = context.WithCancel(ctx)
					}
					defer cancel()
					res := make(chan error, 1)
					go func() {
						l, err := acquire(wctx, waiter, p.waiter, false)
						if err == nil {
							l.Release(ctx)
							err = errors.New("acquired")
						}
						res <- err
					}()
					if want == context.Canceled {
						rd.waitRead(t, hl.Node())
						cancel()
					}
					if err := sessiontest.Recv(t, res, wait, "acquire result"); !errors.Is(err, want) {
						t.Fatalf("acquire = %v, want %v", err, want)
					}
					// The canceled acquire's node goes through the session's
					// guaranteed-delete queue: the call waits for it only
					// within its ctx + 10 ms. Wait for it.
					var ks []string
					zktest.Eventually(t, wait, func() bool {
						ks = nodes(t, raw, ns)
						return len(ks) == 1 && ks[0] == hl.Node()
					}, "nodes %q, want only the holder's %s", &ks, hl.Node())
					_, st, err := raw.Get(rwlock.NodePath(hl))
					if err != nil || st.EphemeralOwner != rwlock.NodeSessionID(hl) || st.Czxid != hl.Token() || hl.Err() != nil {
						t.Fatalf("holder's node: stat %+v, %v; lease %v", st, err, hl.Err())
					}
					if err := hl.Release(ctx); err != nil {
						t.Fatal(err)
					}
				})
			}
		}
	}
}
