package engine_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/internal/testkit/sessiontest"
	"github.com/zkrecipes/zkrecipes/recipes"
	"github.com/zkrecipes/zkrecipes/session"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// TestHeldLeaseHearsDeleteAfterReconnect: a lease held across a reconnect to
// the same session still learns that a third party deleted its node, whether
// the delete comes after the reconnect (its watch is set again: by
// go-zookeeper under SessionOnly, by the session under Standard, whose watch
// go-zookeeper does not know of) or while the session was away (no watch
// then: the re-arm finds the node gone). Under Standard the variants are
// skipped while that policy still ends a lease at the first disconnect.
func TestHeldLeaseHearsDeleteAfterReconnect(t *testing.T) {
	for _, policy := range []session.LossPolicy{session.SessionOnly, session.Standard} {
		for _, away := range []bool{false, true} {
			name := policy.String() + "/after-reconnect"
			if away {
				name = policy.String() + "/while-away"
			}
			t.Run(name, func(t *testing.T) { heldLeaseAcrossReconnect(t, policy, away) })
		}
	}
}

func heldLeaseAcrossReconnect(t *testing.T, policy session.LossPolicy, away bool) {
	ns := zktest.NewNamespace(t)
	p := ns.Proxy(t)
	tap := zktest.NewTap()
	s := sessiontest.ConnectTo(t, []string{p.Addr(), p.Addr(), p.Addr()}, ns.Root, session.WithDialer(tap.Dialer()),
		session.WithSessionTimeout(10*time.Second), session.WithLossPolicy(policy))
	rec := sessiontest.Record(t, s)
	ep := sessiontest.Core(s).Epoch()
	in := newInternals(t, s)
	ctx := ctxT(t)
	l, err := in.Acquire(ctx, lockDriver, []byte("held"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		rctx, cancel := context.WithTimeout(ctx, wait)
		defer cancel()
		_ = l.Release(rctx)
	}()
	node := l.Path()
	zktest.Eventually(t, wait, func() bool { return tap.Watches()[node] > 0 }, "the lease's watch on %s", node)

	if away {
		p.Refuse(true)
	}
	p.Cut()
	rec.Wait(t, wait, session.Suspended)
	select {
	case <-l.Done():
		if policy == session.Standard && errors.Is(l.Err(), session.ErrSuspended) {
			p.Refuse(false)
			t.Skip("the standard policy ends a lease at the first disconnect: nothing is held across it")
		}
		t.Fatalf("the lease ended at the cut: %v", l.Err())
	default:
	}
	raw := ns.Conn(t)
	if away {
		if err := raw.Delete(node, -1); err != nil {
			t.Fatal(err)
		}
		p.Refuse(false)
	}
	if ev := rec.Wait(t, wait, session.Reconnected); ev.Epoch != ep {
		t.Fatalf("reconnected on %v, want the same session (%v)", ev.Epoch, ep)
	}
	if !away {
		zktest.Eventually(t, wait, func() bool { return sessiontest.Watches(t, ns.Server.Addr(), ep.SessionID())[node] },
			"the watch on %s set again after the reconnect", node)
		select {
		case <-l.Done():
			t.Fatalf("the lease ended across the reconnect: %v", l.Err())
		default:
		}
		if err := raw.Delete(node, -1); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-l.Done():
	case <-time.After(wait):
		t.Fatal("the lease did not end after its node was deleted")
	}
	if !errors.Is(l.Err(), recipes.ErrNodeDeleted) {
		t.Errorf("Err %v, want ErrNodeDeleted", l.Err())
	}
}
