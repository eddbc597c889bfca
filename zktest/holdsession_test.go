package zktest_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// TestHoldSessionAndForceNewSessions: with ForceNewSessions on, a client
// that reconnects through the proxy gets a new session; HoldSession keeps its
// old session (and its ephemeral node) alive on the server past the session
// timeout, until release, after which the server expires it.
func TestHoldSessionAndForceNewSessions(t *testing.T) {
	ns := zktest.NewNamespace(t)
	px := ns.Proxy(t)
	c := zktest.Conn(t, px.Servers(), time.Second)
	observer := ns.Conn(t)
	old := c.SessionID()
	p := ns.Path("eph")
	if _, err := c.Create(p, nil, zk.FlagEphemeral, acl); err != nil {
		t.Fatal(err)
	}
	var creds zktest.SessionCreds
	for _, s := range px.Sessions() {
		if s.ID == old {
			creds = s
		}
	}
	px.ForceNewSessions(true)
	release := zktest.HoldSession(t, ns.Servers(), creds)
	// The server closed the client's connection; it reconnects on a new
	// session.
	zktest.Eventually(t, 15*time.Second, func() bool {
		id := c.SessionID()
		return id != 0 && id != old && c.State() == zk.StateHasSession
	}, "the client did not get a new session")
	// Three session timeouts later the held session's node is still there.
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		ok, st, err := observer.Exists(p)
		if err != nil || !ok || st.EphemeralOwner != old {
			t.Fatalf("held session's node: exists %v, %+v, %v", ok, st, err)
		}
		time.Sleep(100 * time.Millisecond) // sampling a steady state, not synchronisation
	}
	release()
	zktest.Eventually(t, 15*time.Second, func() bool {
		ok, _, err := observer.Exists(p)
		return err == nil && !ok
	}, "the released session did not expire")
	if _, err := zktest.HoldSessionCtx(context.Background(), ns.Servers(), creds); err == nil {
		t.Fatal("HoldSession attached to an expired session")
	}
	if _, err := zktest.HoldSessionCtx(nil, ns.Servers(), creds); !errors.Is(err, zktest.ErrBadArgument) { //nolint:staticcheck // nil on purpose
		t.Fatalf("nil ctx: %v", err)
	}
}
