package session_test

import (
	"errors"
	"testing"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/internal/sessiontest"
	"github.com/zkrecipes/zkrecipes/session"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// TestRetrySessionChangedUnderOp: an op that succeeds on a NEW session (what
// go-zookeeper does with a request it re-sends after the old session expired)
// is not reported as a success: Retry returns an error matching
// ErrSessionChanged and ErrLost.
func TestRetrySessionChangedUnderOp(t *testing.T) {
	ns := zktest.NewNamespace(t)
	s, p, tap := sessiontest.ConnectProxyTap(t, ns)
	raw := ns.Conn(t)
	ctx := ctxT(t, wait)
	ep := s.Epoch()
	node := ns.Path("after-expiry")
	calls := 0
	err := s.Toolkit().Retry(ctx, ep, func(c *zk.Conn) error {
		calls++
		// The server ends the session; the cut makes go-zookeeper reconnect,
		// learn it, and open a new session; the op then writes on that one.
		sessiontest.Expire(t, s, tap)
		p.Cut()
		zktest.Eventually(t, wait, func() bool {
			return c.State() == zk.StateHasSession && c.SessionID() != ep.SessionID()
		}, "no new session")
		_, err := c.Create(node, nil, 0, zk.WorldACL(zk.PermAll))
		return err
	})
	if !errors.Is(err, session.ErrSessionChanged) || !errors.Is(err, session.ErrLost) || calls != 1 {
		t.Fatalf("Retry = %v after %d calls, want ErrSessionChanged and ErrLost", err, calls)
	}
	t.Logf("%v", err)
	// The op did run (on the new session): the error says so, it does not
	// undo it.
	if ok, _, err := raw.Exists(node); err != nil || !ok {
		t.Fatalf("the op's node: %v %v", ok, err)
	}
	// A later Retry on the old epoch does not run at all.
	if err := s.Toolkit().Retry(ctx, ep, func(*zk.Conn) error { t.Fatal("op ran on a lost epoch"); return nil }); !errors.Is(err, session.ErrLost) {
		t.Fatalf("Retry on the lost epoch = %v", err)
	}
}
