package semaphore_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/internal/testkit/sessiontest"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// TestAcquireCtxEndsDuringTransaction: an acquire whose ctx ends while its
// lease transaction (the multi that creates the lease node) is in flight
// returns ctx's error and leaves no node (the call fails without results,
// which the engine must not index).
func TestAcquireCtxEndsDuringTransaction(t *testing.T) {
	ns := zktest.NewNamespace(t)
	s, proxy := sessiontest.ConnectProxy(t, ns)
	sem := newSem(t, s, 3)
	l, err := sem.Acquire(ctxT(t)) // the directories exist from now on
	if err != nil {
		t.Fatalf("first acquire: %v", err)
	}
	if err := l.Release(ctxT(t)); err != nil {
		t.Fatalf("release: %v", err)
	}

	// The reply to the transaction comes 300 ms after the request; the ctx
	// ends as the request passes the proxy.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	proxy.SetLatency(300 * time.Millisecond)
	proxy.OnRequest(func(r zktest.Request) zktest.Action {
		if r.Op == zktest.OpMulti && strings.Contains(r.Path, "/leases/") {
			cancel()
		}
		return zktest.Forward
	})
	_, err = sem.Acquire(ctx)
	proxy.OnRequest(nil)
	proxy.SetLatency(0)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("acquire canceled during its transaction: %v, want an error matching context.Canceled", err)
	}
	raw := ns.Conn(t)
	zktest.Eventually(t, wait, func() bool {
		kids, _, err := raw.Children(ns.Path(semPath + "/leases"))
		if errors.Is(err, zk.ErrNoNode) { // the empty container was reaped
			return true
		}
		return err == nil && len(kids) == 0
	}, "the canceled acquire's lease node is deleted")
}
