package zksession

import (
	"context"
	"fmt"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/zkrecipes/zkrecipes/zktest"
)

// go-zookeeper v1.0.4 leaves a connection open after a handshake answered
// "expired" (session id 0) and dials again for a new session; the wire closes
// it when that next dial comes. Three expiries, each learned by reconnecting
// to the expired session, leave the client with one open connection, on its
// side (the wire's) and on the proxy's.
func TestWireClosesExpiredHandshakeConn(t *testing.T) {
	ns := zktest.NewNamespace(t)
	p := ns.Proxy(t)
	tap := zktest.NewTap()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// One server address: go-zookeeper pauses a second before each
	// reconnect, so the timeout leaves room for that (no local Lost while
	// it reconnects: the expiry must be learned from the server's answer).
	s, err := Connect(ctx, p.Servers(),
		WithDialer(tap.Dialer()),
		WithNamespace(ns.Root),
		WithSessionTimeout(4*time.Second),
		WithLogger(zaptest.NewLogger(t)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	sub := s.Subscribe()
	defer sub.Close()
	if st := sub.Initial().State; st != Connected {
		t.Fatalf("initial state %v, want Connected", st)
	}
	id := sub.Initial().SessionID

	const rounds = 3
	for round := 1; round <= rounds; round++ {
		creds := tap.Sessions()
		if len(creds) == 0 || creds[len(creds)-1].ID != id {
			t.Fatalf("round %d: the tap's latest session is not 0x%x: %v", round, id, creds)
		}
		// The real server's address: the proxy stays out of the killer's
		// way.
		if err := zktest.ExpireSession(ctx, ns.Servers(), creds[len(creds)-1]); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		p.Cut()
		lost := expiredWait(t, ctx, sub, Lost)
		if lost.SessionID != id {
			t.Fatalf("round %d: Lost for session 0x%x, want 0x%x", round, lost.SessionID, id)
		}
		rc := expiredWait(t, ctx, sub, Reconnected)
		if rc.SessionID == id || rc.SessionID == 0 {
			t.Fatalf("round %d: Reconnected with session 0x%x after 0x%x expired, want a new session", round, rc.SessionID, id)
		}
		t.Logf("round %d: session 0x%x expired, new session 0x%x", round, id, rc.SessionID)
		id = rc.SessionID
	}
	// Each round dials at least twice: the handshake answered "expired",
	// then the new session's.
	if n := tap.Dials(); n < 1+2*rounds {
		t.Fatalf("%d dials through the tap, want at least %d: the expiries were not learned from a handshake", n, 1+2*rounds)
	}

	open := func() int {
		s.wire.mu.Lock()
		defer s.wire.mu.Unlock()
		return len(s.wire.conns)
	}
	var wireConns, proxyConns int
	counts := wireCountText(func() string { return fmt.Sprintf("%d in the wire, %d through the proxy", wireConns, proxyConns) })
	zktest.Eventually(t, 10*time.Second, func() bool {
		wireConns, proxyConns = open(), p.Conns()
		return wireConns == 1 && proxyConns == 1
	}, "open connections: %v; want 1 and 1", counts)
	t.Logf("open connections: %v", counts)
	s.wire.mu.Lock()
	_, current := s.wire.conns[s.wire.current.Load()]
	s.wire.mu.Unlock()
	if !current {
		t.Fatal("the wire's one open connection is not its current one")
	}
	if st, got := s.State(), s.Epoch().SessionID(); st != Reconnected || got != id {
		t.Fatalf("session %v 0x%x, want Reconnected 0x%x", st, got, id)
	}
}

// expiredWait waits for the next transition to want on sub, skipping others.
func expiredWait(t *testing.T, ctx context.Context, sub *Subscription[Event], want State) Event {
	t.Helper()
	for {
		select {
		case ev, ok := <-sub.C():
			if !ok {
				t.Fatalf("subscription closed while waiting for %v", want)
			}
			if ev.State == want {
				return ev
			}
		case <-ctx.Done():
			t.Fatalf("no %v: %v", want, ctx.Err())
		}
	}
}

// wireCountText formats counts when a failure message is built.
type wireCountText func() string

func (f wireCountText) String() string { return f() }
