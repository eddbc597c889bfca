package leader_test

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/internal/sessiontest"
	"github.com/zkrecipes/zkrecipes/leader"
	"github.com/zkrecipes/zkrecipes/session"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// Bounds of the ctx-bound tests (issue 9, item 2).
const (
	// cbCtx is the ctx given to each call under test.
	cbCtx = 200 * time.Millisecond
	// cbTolerance is how late a call may return after its ctx ended: what a
	// loaded 2-core machine under -race meets, far below go-zookeeper's own
	// request timeout (⅔ of cbSession = 4 s).
	cbTolerance = 300 * time.Millisecond
	// cbSession is the session timeout: long enough that the session is not
	// even suspended while a call runs, so only the call's own handling of
	// ctx can bound it.
	cbSession = 6 * time.Second
	// cbCap is how long a call may stay blocked before the test lifts the
	// fault to get it back (code that ignores ctx then still finishes).
	cbCap = 15 * time.Second
)

// cbIsDeadline accepts an error matching context.DeadlineExceeded.
func cbIsDeadline(err error) bool { return errors.Is(err, context.DeadlineExceeded) }

// cbMeasure runs call on a goroutine with a ctx of cbCtx, while the
// network is broken, and checks that it returns an error ok accepts within
// cbCtx+cbTolerance. It logs "overshoot <name> <duration>" (the time past
// the ctx's end) for the table of the issue. A call still blocked cbCap after
// it began is an overshoot of its own: heal lifts the fault and the call is
// awaited, so that the test ends on code that ignores ctx.
func cbMeasure(t *testing.T, name string, heal func(), call func(ctx context.Context) error, ok func(error) bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), cbCtx)
	defer cancel()
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- call(ctx) }()
	capped := time.NewTimer(cbCap)
	defer capped.Stop()
	var err error
	note := ""
	select {
	case err = <-done:
	case <-capped.C:
		note = " (still blocked at the cap: fault lifted)"
		t.Logf("%s still blocked after %v; the library's goroutines:\n%s", name, cbCap, cbStacks())
		heal()
		select {
		case err = <-done:
		case <-time.After(2 * time.Minute):
			t.Fatalf("%s still blocked 2 minutes after the fault was lifted", name)
		}
	}
	took := time.Since(start)
	t.Logf("overshoot %s %v%s", name, (took - cbCtx).Round(time.Millisecond), note)
	if !ok(err) {
		t.Errorf("%s = %v", name, err)
	}
	if took > cbCtx+cbTolerance {
		t.Errorf("%s returned %v after it began, with a ctx of %v: want at most %v", name, took.Round(time.Millisecond), cbCtx, cbCtx+cbTolerance)
	}
}

// TestCtxBoundsLeader (issue 9, item 2): every blocking call of the leader
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
		s, p := sessiontest.ConnectProxy(t, ns, session.WithSessionTimeout(cbSession))
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
		cbMeasure(t, "leader.Run", r.p.Heal, func(ctx context.Context) error {
			return leader.Run(ctx, r.s, electionPath, func(ctx context.Context) error {
				<-ctx.Done()
				return nil
			})
		}, cbIsDeadline)
		heal(t, r)
		zktest.Eventually(t, wait, func() bool { return len(children(t, r.raw, r.ns)) == 0 },
			"Run left a node behind: %q", children(t, r.raw, r.ns))
	})
	t.Run("Observe", func(t *testing.T) {
		r := newRig(t)
		r.p.Partition()
		cbMeasure(t, "leader.Observe", r.p.Heal, func(ctx context.Context) error {
			ch, err := leader.Observe(ctx, r.s, electionPath)
			if err != nil {
				return err
			}
			for range ch { // until the channel closes
			}
			return ctx.Err() // nil if it closed before ctx ended
		}, cbIsDeadline)
		r.p.Heal()
	})
	t.Run("Participants", func(t *testing.T) {
		r := newRig(t)
		r.p.Partition()
		cbMeasure(t, "leader.Participants", r.p.Heal, func(ctx context.Context) error {
			_, err := leader.Participants(ctx, r.s, electionPath)
			return err
		}, cbIsDeadline)
		r.p.Heal()
	})
	t.Run("Leader", func(t *testing.T) {
		r := newRig(t)
		r.p.Partition()
		cbMeasure(t, "leader.Leader", r.p.Heal, func(ctx context.Context) error {
			_, _, err := leader.Leader(ctx, r.s, electionPath)
			return err
		}, cbIsDeadline)
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
		cbMeasure(t, "Latch.Await", r.p.Heal, func(ctx context.Context) error {
			_, err := l.Await(ctx)
			return err
		}, cbIsDeadline)
		r.p.Heal()
	})
	t.Run("Latch.Participants", func(t *testing.T) {
		r := newRig(t)
		l := latch(t, r)
		r.p.Partition()
		cbMeasure(t, "Latch.Participants", r.p.Heal, func(ctx context.Context) error {
			_, err := l.Participants(ctx)
			return err
		}, cbIsDeadline)
		r.p.Heal()
	})
	t.Run("Latch.Leader", func(t *testing.T) {
		r := newRig(t)
		l := latch(t, r)
		r.p.Partition()
		cbMeasure(t, "Latch.Leader", r.p.Heal, func(ctx context.Context) error {
			_, _, err := l.Leader(ctx)
			return err
		}, cbIsDeadline)
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
		cbRecv(t, leading, wait, "the selector's callback")
		return sel
	}
	t.Run("Selector.Participants", func(t *testing.T) {
		r := newRig(t)
		sel := selector(t, r)
		r.p.Partition()
		cbMeasure(t, "Selector.Participants", r.p.Heal, func(ctx context.Context) error {
			_, err := sel.Participants(ctx)
			return err
		}, cbIsDeadline)
		r.p.Heal()
	})
	t.Run("Selector.Leader", func(t *testing.T) {
		r := newRig(t)
		sel := selector(t, r)
		r.p.Partition()
		cbMeasure(t, "Selector.Leader", r.p.Heal, func(ctx context.Context) error {
			_, _, err := sel.Leader(ctx)
			return err
		}, cbIsDeadline)
		r.p.Heal()
	})
}

// cbConnect connects a session to ns's server without a proxy.
func cbConnect(t *testing.T, ns *zktest.Namespace) *session.Session {
	t.Helper()
	return sessiontest.Connect(t, ns, session.WithSessionTimeout(cbSession))
}

// cbRecv waits for a value on ch.
func cbRecv[T any](t testing.TB, ch <-chan T, d time.Duration, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(d):
		t.Fatalf("no %s within %v", what, d)
		var zero T
		return zero
	}
}

// cbStacks returns the stacks of the goroutines that run the library's code
// (to show where a call that ignores its ctx is blocked).
func cbStacks() string {
	buf := make([]byte, 4<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "zkrecipes/recipes.") || strings.Contains(g, "zkrecipes/session.") ||
			strings.Contains(g, "zkrecipes/mutex.") || strings.Contains(g, "zkrecipes/leader.") {
			out = append(out, g)
		}
	}
	return strings.Join(out, "\n\n")
}
