package leader_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/internal/testkit/sessiontest"
	"github.com/zkrecipes/zkrecipes/leader"
	"github.com/zkrecipes/zkrecipes/session"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// TestCtxBoundsLeader: every blocking call of the leader
// package returns within its ctx plus a few milliseconds while the proxy is
// partitioned (traffic silently dropped; the 6 s session is not even
// suspended meanwhile), and Run leaves no node of ours behind once the
// partition heals. Observe's channel must close within its ctx.
func TestCtxBoundsLeader(t *testing.T) {
	const selectorPath = "/selector"
	// rig: a session through a proxy, the election paths created (so that
	// the calls do not depend on container reaping), a raw connection.
	type rig struct {
		ns  *zktest.Namespace
		raw *zk.Conn
		s   *session.Session
		p   *zktest.Proxy
		rec *sessiontest.Recorder
	}
	newRig := func(t *testing.T) *rig {
		ns := zktest.NewNamespace(t)
		raw := ns.Conn(t)
		for _, p := range []string{electionPath, selectorPath} {
			if _, err := raw.Create(ns.Path(p), nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
				t.Fatal(err)
			}
		}
		s, p := sessiontest.ConnectProxy(t, ns, session.WithSessionTimeout(sessiontest.BoundSession))
		return &rig{ns: ns, raw: raw, s: s, p: p, rec: sessiontest.Record(t, s)}
	}
	heal := func(t *testing.T, r *rig) {
		t.Helper()
		r.p.Heal()
		r.rec.Wait(t, wait, session.Reconnected)
	}

	t.Run("Run", func(t *testing.T) {
		r := newRig(t)
		r.p.Partition()
		sessiontest.MeasureBound(t, "leader.Run", r.p.Heal, func(ctx context.Context) error {
			return leader.Run(ctx, r.s, electionPath, func(ctx context.Context) error {
				<-ctx.Done()
				return nil
			})
		}, sessiontest.IsDeadline)
		heal(t, r)
		zktest.Eventually(t, wait, func() bool { return len(children(t, r.raw, r.ns)) == 0 },
			"Run left a node behind: %q", children(t, r.raw, r.ns))
	})
	// On a slow network (not a partition: every request is answered, 0.8 s
	// late) Run's ctx ends while it campaigns behind another participant; it
	// returns within its ctx all the same, leaving the delete of its node to
	// the session's queue, which finishes it.
	t.Run("Run on a slow network", func(t *testing.T) {
		r := newRig(t)
		// Another participant leads: a node that sorts before ours.
		if _, err := r.raw.Create(r.ns.Path(electionPath)+"/_c_00000000-0000-0000-0000-000000000000-latch-", nil,
			zk.FlagEphemeralSequential, zk.WorldACL(zk.PermAll)); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		done := make(chan error, 1)
		go func() {
			done <- leader.Run(ctx, r.s, electionPath, func(ctx context.Context) error {
				<-ctx.Done()
				return nil
			})
		}()
		zktest.Eventually(t, wait, func() bool { return len(children(t, r.raw, r.ns)) == 2 }, "Run's node queued")
		r.p.SetLatency(400 * time.Millisecond)
		cancel()
		canceled := time.Now()
		err := sessiontest.Recv(t, done, wait, "Run's return")
		took := time.Since(canceled)
		t.Logf("overshoot leader.Run (slow network) %v", took.Round(time.Millisecond))
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Run = %v, want context.Canceled", err)
		}
		if took > sessiontest.BoundTolerance {
			t.Errorf("Run returned %v after its ctx ended, want at most %v", took.Round(time.Millisecond), sessiontest.BoundTolerance)
		}
		r.p.SetLatency(0)
		zktest.Eventually(t, wait, func() bool { return len(children(t, r.raw, r.ns)) == 1 },
			"Run left its node behind: %q", children(t, r.raw, r.ns))
	})
	t.Run("Observe", func(t *testing.T) {
		r := newRig(t)
		r.p.Partition()
		sessiontest.MeasureBound(t, "leader.Observe", r.p.Heal, func(ctx context.Context) error {
			ch, err := leader.Observe(ctx, r.s, electionPath)
			if err != nil {
				return err
			}
			for range ch { // until the channel closes
			}
			return ctx.Err() // nil if it closed before ctx ended
		}, sessiontest.IsDeadline)
		r.p.Heal()
	})
	t.Run("Participants", func(t *testing.T) {
		r := newRig(t)
		r.p.Partition()
		sessiontest.MeasureBound(t, "leader.Participants", r.p.Heal, func(ctx context.Context) error {
			_, err := leader.Participants(ctx, r.s, electionPath)
			return err
		}, sessiontest.IsDeadline)
		r.p.Heal()
	})
	t.Run("Leader", func(t *testing.T) {
		r := newRig(t)
		r.p.Partition()
		sessiontest.MeasureBound(t, "leader.Leader", r.p.Heal, func(ctx context.Context) error {
			_, _, err := leader.Leader(ctx, r.s, electionPath)
			return err
		}, sessiontest.IsDeadline)
		r.p.Heal()
	})

	// latch: our latch (through the proxy) in the election behind another
	// session's latch, which leads.
	latch := func(t *testing.T, r *rig) *leader.Latch {
		first := startLatch(t, cbConnect(t, r.ns), "first")
		await(t, first)
		ours := startLatch(t, r.s, "ours")
		zktest.Eventually(t, wait, func() bool { return len(children(t, r.raw, r.ns)) == 2 }, "our latch did not enter the election")
		return ours
	}
	t.Run("Latch.Await", func(t *testing.T) {
		r := newRig(t)
		l := latch(t, r)
		r.p.Partition()
		sessiontest.MeasureBound(t, "Latch.Await", r.p.Heal, func(ctx context.Context) error {
			_, err := l.Await(ctx)
			return err
		}, sessiontest.IsDeadline)
		r.p.Heal()
	})
	// Participants and Leader on the session of a latch in the election.
	t.Run("Latch.Participants", func(t *testing.T) {
		r := newRig(t)
		latch(t, r)
		r.p.Partition()
		sessiontest.MeasureBound(t, "leader.Participants (latch)", r.p.Heal, func(ctx context.Context) error {
			_, err := leader.Participants(ctx, r.s, electionPath)
			return err
		}, sessiontest.IsDeadline)
		r.p.Heal()
	})
	t.Run("Latch.Leader", func(t *testing.T) {
		r := newRig(t)
		latch(t, r)
		r.p.Partition()
		sessiontest.MeasureBound(t, "leader.Leader (latch)", r.p.Heal, func(ctx context.Context) error {
			_, _, err := leader.Leader(ctx, r.s, electionPath)
			return err
		}, sessiontest.IsDeadline)
		r.p.Heal()
	})

	// selector: our selector (through the proxy), started and leading.
	selector := func(t *testing.T, r *rig) *leader.Selector {
		leading := make(chan struct{}, 1)
		sel, err := leader.NewSelector(r.s, selectorPath, func(ctx context.Context) error {
			select {
			case leading <- struct{}{}:
			default:
			}
			<-ctx.Done()
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { sel.Close() })
		if err := sel.Start(); err != nil {
			t.Fatal(err)
		}
		sessiontest.Recv(t, leading, wait, "the selector's callback")
		return sel
	}
	// Participants and Leader on the session of a leading selector.
	t.Run("Selector.Participants", func(t *testing.T) {
		r := newRig(t)
		selector(t, r)
		r.p.Partition()
		sessiontest.MeasureBound(t, "leader.Participants (selector)", r.p.Heal, func(ctx context.Context) error {
			_, err := leader.Participants(ctx, r.s, selectorPath)
			return err
		}, sessiontest.IsDeadline)
		r.p.Heal()
	})
	t.Run("Selector.Leader", func(t *testing.T) {
		r := newRig(t)
		selector(t, r)
		r.p.Partition()
		sessiontest.MeasureBound(t, "leader.Leader (selector)", r.p.Heal, func(ctx context.Context) error {
			_, _, err := leader.Leader(ctx, r.s, selectorPath)
			return err
		}, sessiontest.IsDeadline)
		r.p.Heal()
	})
}

// cbConnect connects a session to ns's server without a proxy.
func cbConnect(t *testing.T, ns *zktest.Namespace) *session.Session {
	t.Helper()
	return sessiontest.Connect(t, ns, session.WithSessionTimeout(sessiontest.BoundSession))
}
