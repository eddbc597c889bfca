package session_test

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"

	"github.com/zkrecipes/zkrecipes/internal/sessiontest"
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
	cbMeasureWithin(t, name, cbTolerance, heal, call, ok)
}

// cbMeasureWithin is cbMeasure with another tolerance.
func cbMeasureWithin(t *testing.T, name string, tolerance time.Duration, heal func(), call func(ctx context.Context) error, ok func(error) bool) {
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
	if took > cbCtx+tolerance {
		t.Errorf("%s returned %v after it began, with a ctx of %v: want at most %v", name, took.Round(time.Millisecond), cbCtx, cbCtx+tolerance)
	}
}

// TestCtxBoundsSession (issue 9, item 2): every blocking call of the session
// returns within its ctx plus a few milliseconds, whatever the network does.
// The proxy is partitioned (traffic silently dropped) or, for the calls that
// wait for the connection, refused; the session timeout is 6 s, so
// go-zookeeper's own request timeout (4 s) is not what ends the call.
func TestCtxBoundsSession(t *testing.T) {
	t.Run("Connect", func(t *testing.T) {
		// The handshake never completes: new connections are accepted and
		// never relayed.
		ns := zktest.NewNamespace(t)
		p := ns.Proxy(t)
		p.Partition()
		lg := zaptest.NewLogger(t, zaptest.Level(zapcore.InfoLevel))
		// The documented exception: an aborted Connect may wait up to one
		// more second inside zk.Conn.Close (see Connect's doc).
		cbMeasureWithin(t, "session.Connect", cbTolerance+time.Second, p.Heal, func(ctx context.Context) error {
			s, err := session.Connect(ctx, p.Servers(), session.WithNamespace(ns.Root),
				session.WithSessionTimeout(cbSession), session.WithLogger(lg))
			if err == nil {
				s.Close()
				return errors.New("connected through a partition")
			}
			return err
		}, cbIsDeadline)
	})

	// down returns a session through a proxy whose connection is down (cut
	// and refused) and the function that lets it back.
	down := func(t *testing.T) (*session.Session, func()) {
		ns := zktest.NewNamespace(t)
		s, p := sessiontest.ConnectProxy(t, ns, session.WithSessionTimeout(cbSession))
		rec := sessiontest.Record(t, s)
		p.Refuse(true)
		p.Cut()
		rec.Wait(t, wait, session.Suspended)
		return s, func() { p.Refuse(false) }
	}
	t.Run("WaitConnected", func(t *testing.T) {
		s, heal := down(t)
		cbMeasure(t, "session.WaitConnected", heal, func(ctx context.Context) error {
			_, err := s.WaitConnected(ctx)
			return err
		}, cbIsDeadline)
	})
	t.Run("WaitLease", func(t *testing.T) {
		s, heal := down(t)
		cbMeasure(t, "session.WaitLease", heal, func(ctx context.Context) error {
			_, _, err := s.Toolkit().WaitLease(ctx)
			return err
		}, cbIsDeadline)
	})

	// partitioned returns a connected session through a proxy, then
	// partitions the proxy.
	partitioned := func(t *testing.T) (*zktest.Namespace, *session.Session, *zktest.Proxy) {
		ns := zktest.NewNamespace(t)
		s, p := sessiontest.ConnectProxy(t, ns, session.WithSessionTimeout(cbSession))
		p.Partition()
		return ns, s, p
	}
	t.Run("Retry", func(t *testing.T) {
		ns, s, p := partitioned(t)
		cbMeasure(t, "session.Toolkit().Retry(Get)", p.Heal, func(ctx context.Context) error {
			return s.Toolkit().Retry(ctx, s.Epoch(), func(c *zk.Conn) error {
				_, _, err := c.Get(ns.Root)
				return err
			})
		}, cbIsDeadline)
	})
	t.Run("EnsureContainers", func(t *testing.T) {
		_, s, p := partitioned(t)
		dir, err := s.Path("/a/b/c")
		if err != nil {
			t.Fatal(err)
		}
		cbMeasure(t, "session.EnsureContainers", p.Heal, func(ctx context.Context) error {
			return s.Toolkit().EnsureContainers(ctx, dir)
		}, cbIsDeadline)
	})
	t.Run("CreateEphemeral", func(t *testing.T) {
		ns := zktest.NewNamespace(t)
		raw := ns.Conn(t)
		s, p := sessiontest.ConnectProxy(t, ns, session.WithSessionTimeout(cbSession))
		rec := sessiontest.Record(t, s)
		p.Partition()
		node := ns.Path("eph")
		cbMeasure(t, "session.CreateEphemeral", p.Heal, func(ctx context.Context) error {
			_, _, err := s.Toolkit().CreateEphemeral(ctx, s.Epoch(), node, []byte("x"), 0)
			return err
		}, cbIsDeadline)
		// Whatever a late reply created is cleaned up once the connection
		// is back (Heal closes the silenced connection).
		p.Heal()
		rec.Wait(t, wait, session.Reconnected)
		zktest.Eventually(t, wait, func() bool {
			ok, _, err := raw.Exists(node)
			return err == nil && !ok
		}, "%s is left behind", node)
	})
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
