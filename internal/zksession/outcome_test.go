package zksession_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/internal/testkit/sessiontest"
	"github.com/zkrecipes/zkrecipes/internal/zksession"
	"github.com/zkrecipes/zkrecipes/session"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// TestSendOnceStoppedWhileWaiting: a write made while the connection is
// down waits for it; when its stop channel closes first it returns
// ErrStopped, which does not match ErrUnknownOutcome, and the write is
// never sent, not even once the connection is back.
func TestSendOnceStoppedWhileWaiting(t *testing.T) {
	ns := zktest.NewNamespace(t)
	s, p := sessiontest.ConnectProxy(t, ns, session.WithSessionTimeout(10*time.Second))
	zs := sessiontest.Core(s)
	rec := sessiontest.Record(t, s)
	raw := ns.Conn(t)
	node := ns.Path("stopped")
	var creates atomic.Int32
	p.OnRequest(func(r zktest.Request) zktest.Action {
		if r.Op == zktest.OpCreate && r.Path == node {
			creates.Add(1)
		}
		return zktest.Forward
	})
	p.Refuse(true)
	p.Cut()
	defer p.Heal()
	rec.Wait(t, wait, session.Suspended)
	stop := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		_, err := zksession.SendOnce(ctxT(t, wait), zs, zs.Epoch(), func() <-chan struct{} { return stop },
			func(c *zk.Conn) (string, error) { return c.Create(node, nil, 0, zk.WorldACL(zk.PermAll)) })
		done <- err
	}()
	close(stop)
	err := sessiontest.Recv(t, done, wait, "SendOnce after its stop")
	if !errors.Is(err, zksession.ErrStopped) || errors.Is(err, zksession.ErrUnknownOutcome) {
		t.Fatalf("SendOnce stopped while waiting: %v, want ErrStopped and not ErrUnknownOutcome", err)
	}
	p.Heal()
	rec.Wait(t, wait, session.Reconnected)
	if _, _, err := zs.Conn().Exists("/"); err != nil { // behind anything still queued
		t.Fatal(err)
	}
	if ok, _, err := raw.Exists(node); err != nil || ok || creates.Load() != 0 {
		t.Fatalf("the stopped write: exists %v (%v), %d creates seen", ok, err, creates.Load())
	}
}

// TestSendOnceCtxEndsInFlight: a write whose answer has not come when ctx
// ends returns at once with ErrUnknownOutcome and ctx's error; it goes on,
// and is applied.
func TestSendOnceCtxEndsInFlight(t *testing.T) {
	ns := zktest.NewNamespace(t)
	s, p := sessiontest.ConnectProxy(t, ns, session.WithSessionTimeout(10*time.Second))
	zs := sessiontest.Core(s)
	raw := ns.Conn(t)
	node := ns.Path("late")
	p.SetLatency(time.Second)
	defer p.SetLatency(0)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := zksession.SendOnce(ctx, zs, zs.Epoch(), nil,
		func(c *zk.Conn) (string, error) { return c.Create(node, nil, 0, zk.WorldACL(zk.PermAll)) })
	if !errors.Is(err, zksession.ErrUnknownOutcome) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("SendOnce whose answer is late: %v, want ErrUnknownOutcome and context.DeadlineExceeded", err)
	}
	if d := time.Since(start); d > 200*time.Millisecond+sessiontest.OutcomeOvershot {
		t.Fatalf("SendOnce returned after %v with a ctx of 200ms", d)
	}
	zktest.Eventually(t, wait, func() bool {
		ok, _, err := raw.Exists(node)
		return err == nil && ok
	}, "the write in flight is applied")
}
