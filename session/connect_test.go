package session_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/session"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// Connect with a ctx without deadline, against an address where no server
// answers, returns when the connect timeout ends: an error naming the address
// and the last dial error, matching context.DeadlineExceeded. The default is
// DefaultConnectTimeout; a shorter WithConnectTimeout keeps this test short,
// and the default is checked by value.
func TestConnectTimeoutBoundsDeadAddress(t *testing.T) {
	if session.DefaultConnectTimeout != 15*time.Second {
		t.Fatalf("DefaultConnectTimeout = %v, the documented 15s", session.DefaultConnectTimeout)
	}
	addr := deadAddr(t)
	const bound = 1500 * time.Millisecond
	start := time.Now()
	s, err := session.Connect(context.Background(), []string{addr}, session.WithConnectTimeout(bound))
	took := time.Since(start)
	if err == nil {
		s.Close()
		t.Fatalf("Connect to dead %s succeeded", addr)
	}
	t.Logf("Connect returned after %v: %v", took.Round(time.Millisecond), err)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("error %q does not match context.DeadlineExceeded", err)
	}
	for _, want := range []string{addr, "connection refused", "connect timeout"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	// The bound plus go-zookeeper's close (at most a second in a rare race)
	// and a margin for a busy machine.
	if took < bound || took > bound+2*time.Second {
		t.Errorf("Connect took %v, want about %v", took, bound)
	}
}

// The default connect timeout applies without any option: the test gives a
// ctx that would end later (a minute), so only the 15 s default can end the
// wait.
func TestConnectDefaultTimeout(t *testing.T) {
	if testing.Short() {
		t.Skip("takes the 15 s default connect timeout")
	}
	addr := deadAddr(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	start := time.Now()
	s, err := session.Connect(ctx, []string{addr})
	took := time.Since(start)
	if err == nil {
		s.Close()
		t.Fatalf("Connect to dead %s succeeded", addr)
	}
	if !errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil {
		t.Fatalf("Connect = %v after %v (ctx: %v), want the connect timeout's DeadlineExceeded", err, took, ctx.Err())
	}
	if took < session.DefaultConnectTimeout || took > session.DefaultConnectTimeout+3*time.Second {
		t.Fatalf("Connect took %v, want about %v", took, session.DefaultConnectTimeout)
	}
}

// ctx still bounds Connect when it ends before the connect timeout.
func TestConnectCtxBeforeTimeout(t *testing.T) {
	addr := deadAddr(t)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	s, err := session.Connect(ctx, []string{addr})
	took := time.Since(start)
	if err == nil {
		s.Close()
		t.Fatal("Connect succeeded")
	}
	if !errors.Is(err, context.DeadlineExceeded) || ctx.Err() == nil || took > 2*time.Second {
		t.Fatalf("Connect = %v after %v, want ctx's deadline", err, took)
	}
	if strings.Contains(err.Error(), "connect timeout") {
		t.Fatalf("error %q blames the connect timeout, not ctx", err)
	}
}

// Malformed server lists fail at once with ErrBadArgument, before any dial,
// naming what is wrong; a host without port gets ZooKeeper's 2181.
func TestConnectMalformedServers(t *testing.T) {
	for _, tc := range []struct {
		servers []string
		want    string
	}{
		{nil, "empty"},
		{[]string{""}, "empty"},
		{[]string{" , "}, "empty"},
		{[]string{"127.0.0.1:99999"}, "99999"},
		{[]string{"127.0.0.1:0"}, "port"},
		{[]string{"127.0.0.1:http"}, "port"},
		{[]string{"127.0.0.1:"}, "port"},
		{[]string{":2181"}, "no host"},
		{[]string{"zk1:2181/chroot"}, "chroot"},
		{[]string{"zk1:2181,zk2:-1"}, "-1"},
		{[]string{"[::1:2181"}, "::1"},
		{[]string{"[::1]x"}, "::1"},
		{[]string{"zk1:2181:2181"}, "2181"},
	} {
		// A bound, so that a list wrongly accepted fails the test instead of
		// hanging it.
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		start := time.Now()
		s, err := session.Connect(ctx, tc.servers)
		took := time.Since(start)
		cancel()
		if err == nil {
			s.Close()
			t.Errorf("Connect(%q) succeeded", tc.servers)
			continue
		}
		if !errors.Is(err, session.ErrBadArgument) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Connect(%q) = %v, want ErrBadArgument naming %q", tc.servers, err, tc.want)
		}
		if took > 100*time.Millisecond {
			t.Errorf("Connect(%q) took %v, want an immediate failure", tc.servers, took)
		}
	}
}

// A host without a port connects to 2181; the zktest server listens
// elsewhere, so the check is that "localhost" alone is accepted and dialed
// (the failure names localhost:2181), not refused as malformed.
func TestConnectHostWithoutPort(t *testing.T) {
	s, err := session.Connect(context.Background(), []string{"127.0.0.1"}, session.WithConnectTimeout(300*time.Millisecond))
	if err == nil {
		// A ZooKeeper on 2181 of this machine: the address was accepted.
		s.Close()
		return
	}
	if errors.Is(err, session.ErrBadArgument) || !strings.Contains(err.Error(), "127.0.0.1:2181") {
		t.Fatalf("Connect(127.0.0.1) = %v, want a dial of 127.0.0.1:2181", err)
	}
}

// Connect succeeds against a real server with the default options, and the
// public accessors report the session.
func TestConnectPublicAccessors(t *testing.T) {
	ns := zktest.NewNamespace(t)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	s, err := session.Connect(ctx, ns.Servers(), session.WithNamespace(ns.Root))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.State() != session.Connected || s.SessionID() == 0 || s.SessionTimeout() <= 0 || s.Conn() == nil {
		t.Fatalf("State %v, SessionID %x, SessionTimeout %v, Conn %v", s.State(), s.SessionID(), s.SessionTimeout(), s.Conn())
	}
	if s.Conn().SessionID() != s.SessionID() {
		t.Fatalf("SessionID %x, the connection's %x", s.SessionID(), s.Conn().SessionID())
	}
	p, err := s.Path("/a/b")
	if err != nil || p != ns.Root+"/a/b" {
		t.Fatalf("Path = %q, %v", p, err)
	}
	if _, err := s.Path("a"); !errors.Is(err, session.ErrBadArgument) || !strings.Contains(err.Error(), `bad path "a"`) {
		t.Fatalf("Path(a) = %v", err)
	}
	sub := s.Subscribe()
	defer sub.Close()
	if in := sub.Initial(); in.State != session.Connected || in.SessionID != s.SessionID() {
		t.Fatalf("Initial = %+v", in)
	}
	got := make(chan []session.State, 1)
	go func() { // reads while Close runs: Closed is delivered to a reader
		var sts []session.State
		for ev := range sub.C() {
			sts = append(sts, ev.State)
		}
		got <- sts
	}()
	select {
	case <-s.Done():
		t.Fatal("Done closed before Close")
	default:
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	<-s.Done()
	if s.State() != session.Closed {
		t.Fatalf("State after Close = %v", s.State())
	}
	if sts := <-got; len(sts) != 1 || sts[0] != session.Closed {
		t.Fatalf("subscription delivered %v, want [Closed]", sts)
	}
}

// A ctx that ends with a cause of the caller's (WithCancelCause,
// WithTimeoutCause) still gives an error matching ctx's error, and the cause
// is kept.
func TestConnectCtxWithCause(t *testing.T) {
	addr := deadAddr(t)
	shutdown := errors.New("shutting down")
	ctx, cancel := context.WithCancelCause(context.Background())
	time.AfterFunc(200*time.Millisecond, func() { cancel(shutdown) })
	_, err := session.Connect(ctx, []string{addr})
	if !errors.Is(err, context.Canceled) || !errors.Is(err, shutdown) {
		t.Fatalf("Connect = %v, want an error matching context.Canceled and the cause", err)
	}
	budget := errors.New("my budget")
	tctx, tcancel := context.WithTimeoutCause(context.Background(), 200*time.Millisecond, budget)
	defer tcancel()
	_, err = session.Connect(tctx, []string{addr})
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, budget) || strings.Contains(err.Error(), "connect timeout") {
		t.Fatalf("Connect = %v, want an error matching context.DeadlineExceeded and the cause", err)
	}
}

// Well-formed server lists are accepted: host names, IPv4 and IPv6
// addresses with or without a port (brackets, zones): Connect dials them
// (the failure is the dial's, within the bound), it does not refuse them.
func TestConnectAcceptsServerForms(t *testing.T) {
	for _, servers := range [][]string{
		{"zk-1.example.invalid"}, {"zk-1.example.invalid:2181"}, {"127.0.0.1"}, {"[::1]:1"}, {"::1"},
		{"[::1]"}, {"fe80::1%lo"}, {"[fe80::1%lo]:1"}, {"127.0.0.1:1, [::1]:1"},
	} {
		s, err := session.Connect(context.Background(), servers, session.WithConnectTimeout(200*time.Millisecond))
		if err == nil {
			s.Close()
			continue // a server answered: accepted
		}
		if errors.Is(err, session.ErrBadArgument) {
			t.Errorf("Connect(%q) refused a well-formed list: %v", servers, err)
		}
	}
}
