package engine_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/internal/engine"
	"github.com/zkrecipes/zkrecipes/internal/testkit/sessiontest"
	"github.com/zkrecipes/zkrecipes/recipes"
	"github.com/zkrecipes/zkrecipes/session"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// checkLostCause checks a lease that ended at a suspension after its session
// was reported Lost: Err matches session.ErrLost and still
// session.ErrSuspended, while the context's cause stays the suspension.
func checkLostCause(t *testing.T, l *engine.Lease) {
	t.Helper()
	cause := context.Cause(l.Context())
	if !errors.Is(cause, session.ErrSuspended) {
		// Not the case under test: the lease did not end at a suspension.
		t.Fatalf("the lease ended with %v, want a suspension first", cause)
	}
	err := l.Err()
	if !errors.Is(err, session.ErrLost) {
		t.Errorf("after Lost, Err() = %v: does not match session.ErrLost", err)
	}
	if !errors.Is(err, session.ErrSuspended) {
		t.Errorf("after Lost, Err() = %v: no longer matches session.ErrSuspended", err)
	}
	if err2 := l.Err(); err2 != err {
		t.Errorf("Err changed between calls: %v, then %v", err, err2)
	}
	if context.Cause(l.Context()) != cause {
		t.Errorf("the context's cause changed: %v", context.Cause(l.Context()))
	}
}

// ended fails the test unless l has ended.
func ended(t *testing.T, l *engine.Lease) {
	t.Helper()
	select {
	case <-l.Done():
	default:
		t.Fatal("the lease has not ended")
	}
}

// endedWithNodeGone checks that l's Err matches want and waits until the
// recipe directory is empty.
func endedWithNodeGone(t *testing.T, l *engine.Lease, want error, raw *zk.Conn, ns *zktest.Namespace) {
	t.Helper()
	if !errors.Is(l.Err(), want) {
		t.Fatalf("Err = %v, want %v", l.Err(), want)
	}
	waitChildren(t, raw, ns, 0)
}

// TestLossCauseInstantExpiry: end-at-disconnect policy; the holder's session
// is expired on the server at once. The lease ends at the suspension; once
// the session reports Lost, Err matches session.ErrLost. (Under Standard the
// lease may end at Lost itself, if the client learns of the expiry before
// its lease deadline: TestLossCauseInstantExpiryStandard.)
func TestLossCauseInstantExpiry(t *testing.T) {
	ns := zktest.NewNamespace(t)
	s, tap := sessiontest.ConnectTap(t, ns, session.WithLossPolicy(session.EndAtDisconnect))
	in := newInternals(t, s)
	l, err := in.Acquire(ctxT(t), lockDriver, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(context.Background())
	rec := sessiontest.Record(t, s)
	sessiontest.Expire(t, s, tap)
	rec.Wait(t, wait, session.Lost)
	ended(t, l) // by then: Suspended came first
	checkLostCause(t, l)
	t.Logf("Err after an instant expiry: %v", l.Err())
}

// TestLossCauseInstantExpiryStandard: standard policy; the holder's session
// is expired on the server at once. The lease has ended by the time the
// session reports Lost (at Lost, or at its deadline before that), and Err
// matches session.ErrLost.
func TestLossCauseInstantExpiryStandard(t *testing.T) {
	ns := zktest.NewNamespace(t)
	s, tap := sessiontest.ConnectTap(t, ns)
	in := newInternals(t, s)
	l, err := in.Acquire(ctxT(t), lockDriver, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(context.Background())
	rec := sessiontest.Record(t, s)
	sessiontest.Expire(t, s, tap)
	rec.Wait(t, wait, session.Lost)
	ended(t, l)
	if err := l.Err(); !errors.Is(err, session.ErrLost) {
		t.Fatalf("after Lost, Err() = %v: does not match session.ErrLost", err)
	}
}

// TestLossCausePartition: standard policy; the holder is partitioned past
// its session timeout: Suspended ends the lease, then the local timer
// declares the session Lost, and Err matches session.ErrLost.
func TestLossCausePartition(t *testing.T) {
	ns := zktest.NewNamespace(t)
	s, p := sessiontest.ConnectProxy(t, ns)
	in := newInternals(t, s)
	l, err := in.Acquire(ctxT(t), lockDriver, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(context.Background())
	rec := sessiontest.Record(t, s)
	p.Partition()
	defer p.Heal()
	rec.Wait(t, wait, session.Suspended)
	ended(t, l)
	// While the session may still be alive, Err does not say it is lost.
	if err := l.Err(); errors.Is(err, session.ErrLost) && l.Epoch().Err() == nil {
		t.Errorf("suspended, not lost: Err() = %v matches session.ErrLost", err)
	}
	rec.Wait(t, wait, session.Lost)
	checkLostCause(t, l)
	t.Logf("Err after a partition past the timeout: %v", l.Err())
}

// TestShortHoldEnds: a lease whose monitor has not started yet (it starts
// only when there is something to do: the node-watch delay, the end of the
// lease context or Close) is still ended and cleaned up by each of them, with
// the node watch on and off (off, no delay ever starts it). A suspension
// (EndAtDisconnect) right after the acquire ends it and, once reconnected, its node is
// deleted, also when the holder releases the lease as soon as it is told;
// Close right after the acquire ends it with ErrClosed and deletes the
// node; released leases leave nothing running (goleak, see TestMain).
func TestShortHoldEnds(t *testing.T) {
	for _, watch := range []bool{true, false} {
		opt := engine.WithNodeWatch(watch)
		acquired := func(t *testing.T, s *session.Session) (*engine.Engine, *engine.Lease) {
			t.Helper()
			in := newInternals(t, s, opt)
			l, err := in.Acquire(ctxT(t), lockDriver, nil)
			if err != nil {
				t.Fatal(err)
			}
			return in, l
		}
		t.Run(fmt.Sprintf("suspension/watch=%v", watch), func(t *testing.T) {
			ns := zktest.NewNamespace(t)
			raw := ns.Conn(t)
			s, p := sessiontest.ConnectProxy(t, ns, session.WithLossPolicy(session.EndAtDisconnect))
			_, l := acquired(t, s)
			p.Cut()
			select {
			case <-l.Done():
			case <-time.After(wait):
				t.Fatal("the lease did not end at the suspension")
			}
			// A holder told its lease ended releases it at once: the node
			// must still go (Release leaves it to the engine).
			if err := l.Release(ctxT(t)); err != nil {
				t.Fatal(err)
			}
			endedWithNodeGone(t, l, session.ErrSuspended, raw, ns)
		})
		t.Run(fmt.Sprintf("close/watch=%v", watch), func(t *testing.T) {
			ns := zktest.NewNamespace(t)
			raw := ns.Conn(t)
			in, l := acquired(t, sessiontest.Connect(t, ns))
			closed := make(chan error, 1)
			go func() { closed <- in.Close() }()
			select {
			case err := <-closed:
				if err != nil {
					t.Fatal(err)
				}
			case <-time.After(wait):
				t.Fatal("Close did not return")
			}
			ended(t, l)
			endedWithNodeGone(t, l, session.ErrClosed, raw, ns)
		})
		t.Run(fmt.Sprintf("release/watch=%v", watch), func(t *testing.T) {
			ns := zktest.NewNamespace(t)
			raw := ns.Conn(t)
			in := newInternals(t, sessiontest.Connect(t, ns), opt)
			for i := 0; i < 20; i++ {
				l, err := in.Acquire(ctxT(t), lockDriver, nil)
				if err != nil {
					t.Fatal(err)
				}
				if err := l.Release(ctxT(t)); err != nil {
					t.Fatal(err)
				}
				if !errors.Is(l.Err(), recipes.ErrReleased) {
					t.Fatalf("Err = %v, want ErrReleased", l.Err())
				}
			}
			waitChildren(t, raw, ns, 0)
			if err := in.Close(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestHeldLeaseStartsNoGoroutine: a held sequential lease starts its monitor
// goroutine only when it has something to do. With the node watch off (no
// 100 ms delay), 50 held leases add no goroutine of the engine while they are
// held; ending them (a suspension, under EndAtDisconnect) starts the
// monitors, which delete the nodes. (With the node watch on, the same holds for the first 100 ms; that
// is timing, so this test takes the deterministic case.)
func TestHeldLeaseStartsNoGoroutine(t *testing.T) {
	const leases = 50
	ns := zktest.NewNamespace(t)
	raw := ns.Conn(t)
	s, p := sessiontest.ConnectProxy(t, ns, session.WithLossPolicy(session.EndAtDisconnect))
	in := newInternals(t, s, engine.WithNodeWatch(false))
	sem := engine.Standard("lease-", leases)
	// One acquire first, so that workers and the directory exist before
	// the count.
	l0, err := in.Acquire(ctxT(t), sem, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := l0.Release(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	before := runtime.NumGoroutine()
	var ls []*engine.Lease
	for i := 0; i < leases; i++ {
		l, err := in.Acquire(ctxT(t), sem, nil)
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
	}
	// The session's idle workers (a few) may remain; a goroutine per lease
	// would add 50.
	if grown := runtime.NumGoroutine() - before; grown >= leases/5 {
		t.Fatalf("%d held leases added %d goroutines, want none of their own", leases, grown)
	}
	p.Cut()
	for _, l := range ls {
		select {
		case <-l.Done():
		case <-time.After(wait):
			t.Fatal("a lease did not end at the suspension")
		}
	}
	waitChildren(t, raw, ns, 0)
}
