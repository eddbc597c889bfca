package zksession_test

import (
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/internal/testkit/sessiontest"
	"github.com/zkrecipes/zkrecipes/internal/zksession"
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
	ep := sessiontest.Core(s).Epoch()
	node := ns.Path("after-expiry")
	var creds zktest.SessionCreds
	for _, c := range tap.Sessions() {
		if c.ID == ep.SessionID() {
			creds = c
		}
	}
	if creds.ID == 0 {
		t.Fatalf("the tap did not see session 0x%x", ep.SessionID())
	}
	// op runs on a goroutine of the Session (which goes on with it if ctx
	// ends first): it must not fail the test itself. A setup failure is sent
	// on setup and returned as a permanent error.
	var calls atomic.Int32
	setup := make(chan error, 1)
	failed := func(err error) error {
		select {
		case setup <- err:
		default: // the first failure is enough
		}
		return err
	}
	err := sessiontest.Core(s).Retry(ctx, ep, func(c *zk.Conn) error {
		calls.Add(1)
		// The server ends the session; the cut makes go-zookeeper reconnect,
		// learn it, and open a new session; the op then writes on that one.
		if err := zktest.ExpireSession(ctx, sessiontest.Core(s).Servers(), creds); err != nil {
			return failed(err)
		}
		p.Cut()
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for c.State() != zk.StateHasSession || c.SessionID() == ep.SessionID() {
			select {
			case <-tick.C:
			case <-ctx.Done():
				return failed(fmt.Errorf("no new session: %w", ctx.Err()))
			}
		}
		_, err := c.Create(node, nil, 0, zk.WorldACL(zk.PermAll))
		return err
	})
	select {
	case err := <-setup:
		t.Fatal(err)
	default:
	}
	if n := calls.Load(); !errors.Is(err, zksession.ErrSessionChanged) || !errors.Is(err, session.ErrLost) || n != 1 {
		t.Fatalf("Retry = %v after %d calls, want ErrSessionChanged and ErrLost", err, n)
	}
	t.Logf("%v", err)
	// The op did run (on the new session): the error says so, it does not
	// undo it.
	if ok, _, err := raw.Exists(node); err != nil || !ok {
		t.Fatalf("the op's node: %v %v", ok, err)
	}
	// A later Retry on the old epoch does not run at all.
	var ran atomic.Bool
	if err := sessiontest.Core(s).Retry(ctx, ep, func(*zk.Conn) error { ran.Store(true); return nil }); !errors.Is(err, session.ErrLost) {
		t.Fatalf("Retry on the lost epoch = %v", err)
	}
	if ran.Load() {
		t.Fatal("op ran on a lost epoch")
	}
}

// TestRetryBackoffMadeAtFirstFailure: WithRetry's factory is called by Retry
// once per operation, at its first retryable failure: an operation that
// succeeds, or fails for good, at once makes no backoff; one that fails
// twice and then succeeds makes one.
func TestRetryBackoffMadeAtFirstFailure(t *testing.T) {
	ns := zktest.NewNamespace(t)
	var made atomic.Int32
	s := sessiontest.Connect(t, ns, session.WithRetry(func() backoff.BackOff {
		made.Add(1)
		return backoff.NewConstantBackOff(5 * time.Millisecond)
	}))
	ctx := ctxT(t, 10*time.Second)
	made.Store(0) // Connect calls the factory once to check it
	for i := 0; i < 5; i++ {
		if err := sessiontest.Core(s).Retry(ctx, sessiontest.Core(s).Epoch(), func(c *zk.Conn) error {
			_, _, err := c.Exists("/")
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	if err := sessiontest.Core(s).Retry(ctx, sessiontest.Core(s).Epoch(), func(*zk.Conn) error { return zk.ErrNoNode }); !errors.Is(err, zk.ErrNoNode) {
		t.Fatalf("permanent error: %v", err)
	}
	if n := made.Load(); n != 0 {
		t.Fatalf("%d backoffs made for operations that did not retry, want 0", n)
	}
	calls := 0
	if err := sessiontest.Core(s).Retry(ctx, sessiontest.Core(s).Epoch(), func(*zk.Conn) error {
		if calls++; calls < 3 {
			return zk.ErrConnectionClosed
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if n := made.Load(); n != 1 {
		t.Fatalf("%d backoffs made for one operation retried twice, want 1", n)
	}
}
