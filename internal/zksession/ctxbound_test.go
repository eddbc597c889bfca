package zksession_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"

	"github.com/zkrecipes/zkrecipes/internal/testkit/sessiontest"
	"github.com/zkrecipes/zkrecipes/session"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// TestCtxBoundsSession: every blocking call of the session
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
		sessiontest.MeasureBoundWithin(t, "session.Connect", sessiontest.BoundTolerance+time.Second, p.Heal, func(ctx context.Context) error {
			s, err := session.Connect(ctx, p.Servers(), session.WithNamespace(ns.Root),
				session.WithSessionTimeout(sessiontest.BoundSession), session.WithLogger(lg))
			if err == nil {
				s.Close()
				return errors.New("connected through a partition")
			}
			return err
		}, sessiontest.IsDeadline)
	})

	// down returns a session through a proxy whose connection is down (cut
	// and refused) and the function that lets it back.
	down := func(t *testing.T) (*session.Session, func()) {
		ns := zktest.NewNamespace(t)
		s, p := sessiontest.ConnectProxy(t, ns, session.WithSessionTimeout(sessiontest.BoundSession))
		rec := sessiontest.Record(t, s)
		p.Refuse(true)
		p.Cut()
		rec.Wait(t, wait, session.Suspended)
		return s, func() { p.Refuse(false) }
	}
	t.Run("WaitConnected", func(t *testing.T) {
		s, heal := down(t)
		sessiontest.MeasureBound(t, "session.WaitConnected", heal, func(ctx context.Context) error {
			_, err := sessiontest.Core(s).WaitConnected(ctx)
			return err
		}, sessiontest.IsDeadline)
	})
	t.Run("WaitLease", func(t *testing.T) {
		s, heal := down(t)
		sessiontest.MeasureBound(t, "session.WaitLease", heal, func(ctx context.Context) error {
			_, _, err := sessiontest.Core(s).WaitLease(ctx)
			return err
		}, sessiontest.IsDeadline)
	})

	// partitioned returns a connected session through a proxy, then
	// partitions the proxy.
	partitioned := func(t *testing.T) (*zktest.Namespace, *session.Session, *zktest.Proxy) {
		ns := zktest.NewNamespace(t)
		s, p := sessiontest.ConnectProxy(t, ns, session.WithSessionTimeout(sessiontest.BoundSession))
		p.Partition()
		return ns, s, p
	}
	t.Run("Retry", func(t *testing.T) {
		ns, s, p := partitioned(t)
		sessiontest.MeasureBound(t, "sessiontest.Core(session).Retry(Get)", p.Heal, func(ctx context.Context) error {
			return sessiontest.Core(s).Retry(ctx, sessiontest.Core(s).Epoch(), func(c *zk.Conn) error {
				_, _, err := c.Get(ns.Root)
				return err
			})
		}, sessiontest.IsDeadline)
	})
	t.Run("EnsureContainers", func(t *testing.T) {
		_, s, p := partitioned(t)
		dir, err := s.Path("/a/b/c")
		if err != nil {
			t.Fatal(err)
		}
		sessiontest.MeasureBound(t, "session.EnsureContainers", p.Heal, func(ctx context.Context) error {
			return sessiontest.Core(s).EnsureContainers(ctx, dir)
		}, sessiontest.IsDeadline)
	})
	t.Run("CreateEphemeral", func(t *testing.T) {
		ns := zktest.NewNamespace(t)
		raw := ns.Conn(t)
		s, p := sessiontest.ConnectProxy(t, ns, session.WithSessionTimeout(sessiontest.BoundSession))
		rec := sessiontest.Record(t, s)
		p.Partition()
		node := ns.Path("eph")
		sessiontest.MeasureBound(t, "session.CreateEphemeral", p.Heal, func(ctx context.Context) error {
			_, _, err := sessiontest.Core(s).CreateEphemeral(ctx, sessiontest.Core(s).Epoch(), node, []byte("x"), 0)
			return err
		}, sessiontest.IsDeadline)
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
