package engine_test

import (
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/zkrecipes/zkrecipes/internal/testkit/sessiontest"
	"github.com/zkrecipes/zkrecipes/recipes"
	"github.com/zkrecipes/zkrecipes/session"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// TestMonitorRearmsAfterRetryGivesUp: the lease monitor's first GetW on its
// own node fails with a connection error and the session's retry policy gives
// up at once. Under SessionOnly the lease survives the blip; the monitor must
// arm its watch again once the connection is back, so that a later
// third-party delete still ends the lease with ErrNodeDeleted.
func TestMonitorRearmsAfterRetryGivesUp(t *testing.T) {
	ns := zktest.NewNamespace(t)
	raw := ns.Conn(t)
	ctx := ctxT(t)
	s, p := sessiontest.ConnectProxy(t, ns,
		session.WithLossPolicy(session.SessionOnly),
		session.WithRetry(func() backoff.BackOff { return backoff.WithMaxRetries(&backoff.ZeroBackOff{}, 0) }))
	rec := sessiontest.Record(t, s)
	in := newInternals(t, s)
	prefix := ns.Path(dir) + "/"
	var gets atomic.Int32
	p.OnRequest(func(r zktest.Request) zktest.Action {
		// The only data reads of our directory are the monitor's GetW on its
		// own node: the acquire learns the token from its multi-create.
		if r.Op == zktest.OpGetData && strings.HasPrefix(r.Path, prefix) && gets.Add(1) == 1 {
			return zktest.SwallowReply
		}
		return zktest.Forward
	})
	l, err := in.Acquire(ctx, lockDriver, []byte("x"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(ctx)
	rec.Wait(t, wait, session.Suspended)
	rec.Wait(t, wait, session.Reconnected)
	if l.Err() != nil {
		t.Fatalf("session-only lease ended by a short cut: %v", l.Err())
	}
	// The monitor arms again after the reconnection: a second GetW. (Before
	// the fix it gave up and waited on a nil channel: no second request.)
	zktest.Eventually(t, wait, func() bool { return gets.Load() >= 2 }, "the monitor did not re-arm its node watch")
	// Whether the delete overtakes the GetW (NoNode) or follows it (the watch
	// fires), the lease must end with ErrNodeDeleted.
	if err := raw.Delete(l.Path(), -1); err != nil {
		t.Fatal(err)
	}
	select {
	case <-l.Done():
		if !errors.Is(l.Err(), recipes.ErrNodeDeleted) {
			t.Fatalf("lease ended with %v, want ErrNodeDeleted", l.Err())
		}
	case <-time.After(wait):
		t.Fatal("our node was deleted by a third party, the lease is still live")
	}
}
