package session_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/zkrecipes/zkrecipes/session"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// deadAddr returns a loopback address where nothing listens: connecting to it
// is refused at once.
func deadAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}

// A Connect without any bound (ctx without deadline, WithConnectTimeout(0))
// against a dead address does not wait in silence: it logs a warning naming
// the servers, the time waited, the last dial error and the missing deadline.
// The test cancels ctx at the first warning, so Connect must also return then,
// with an error naming the address.
func TestConnectWarnsWhileNoSession(t *testing.T) {
	addr := deadAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	core, logs := observer.New(zapcore.WarnLevel)
	warned := make(chan struct{})
	hooked := zapcore.RegisterHooks(core, func(e zapcore.Entry) error {
		if e.Level == zapcore.WarnLevel && strings.HasPrefix(e.Message, "no ZooKeeper session yet") {
			select {
			case <-warned:
			default:
				close(warned)
				cancel()
			}
		}
		return nil
	})
	// A safety net only: the warning is due after a few seconds.
	safety := time.AfterFunc(wait, cancel)
	defer safety.Stop()

	start := time.Now()
	s, err := session.Connect(ctx, []string{addr}, session.WithLogger(zap.New(hooked)), session.WithConnectTimeout(0))
	if err == nil {
		s.Close()
		t.Fatalf("Connect to dead %s succeeded", addr)
	}
	select {
	case <-warned:
	default:
		t.Fatalf("no warning within %v; Connect returned %v", wait, err)
	}
	t.Logf("first warning after %v; Connect returned: %v", time.Since(start).Round(time.Millisecond), err)
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), addr) {
		t.Errorf("Connect error %q: want one naming %s and matching context.Canceled", err, addr)
	}
	entries := logs.FilterMessageSnippet("no ZooKeeper session yet").All()
	if len(entries) == 0 {
		t.Fatalf("warning not recorded")
	}
	fields := entries[0].ContextMap()
	if srv, _ := fields["servers"].([]interface{}); len(srv) != 1 || srv[0] != addr {
		t.Errorf("servers field = %#v, want [%s]", fields["servers"], addr)
	}
	if d, _ := fields["waited"].(time.Duration); d <= 0 {
		t.Errorf("waited field = %#v, want a positive duration", fields["waited"])
	}
	if de, _ := fields["last_dial_error"].(string); !strings.Contains(de, "refused") {
		t.Errorf("last_dial_error field = %#v, want the refused dial", fields["last_dial_error"])
	}
	if h, _ := fields["hint"].(string); !strings.Contains(h, "deadline") {
		t.Errorf("hint field = %#v, want a note about the missing deadline", fields["hint"])
	}
}

// The "session established" line gives the negotiated session timeout, the
// same value SessionTimeout returns.
func TestSessionEstablishedLogsTimeout(t *testing.T) {
	ns := zktest.NewNamespace(t)
	core, logs := observer.New(zapcore.InfoLevel)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	s, err := session.Connect(ctx, ns.Servers(),
		session.WithSessionTimeout(3*time.Second), session.WithLogger(zap.New(core)))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	entries := logs.FilterMessage("session established").All()
	if len(entries) != 1 {
		t.Fatalf("%d \"session established\" lines, want 1", len(entries))
	}
	got, ok := entries[0].ContextMap()["session_timeout"].(time.Duration)
	if !ok || got <= 0 || got != s.SessionTimeout() {
		t.Fatalf("session_timeout field = %#v, want the negotiated %v", entries[0].ContextMap()["session_timeout"], s.SessionTimeout())
	}
	t.Logf("asked 3s, negotiated %v", got)
}
