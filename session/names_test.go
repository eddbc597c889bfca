package session_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/mutex"
	"github.com/zkrecipes/zkrecipes/session"
	"github.com/zkrecipes/zkrecipes/zktest"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// countingResolver counts the lookups of a zktest.Resolver.
type countingResolver struct {
	zktest.Resolver
	lookups atomic.Int64
}

func (r *countingResolver) LookupHost(ctx context.Context, host string) ([]string, error) {
	r.lookups.Add(1)
	return r.Resolver.LookupHost(ctx, host)
}

// sharedName returns the name "<label>.zk.test:<port>" of the shared server,
// made to resolve to its address in r.
func sharedName(t *testing.T, r *zktest.Resolver, label string) string {
	t.Helper()
	host, port, err := net.SplitHostPort(zktest.SharedServers()[0])
	if err != nil {
		t.Fatal(err)
	}
	name := label + ".zk.test"
	r.Set(name, host)
	return net.JoinHostPort(name, port)
}

// One name of three does not resolve (a Kubernetes pod being rescheduled has
// no record behind its headless service): Connect succeeds on the others, a
// warning names the name, and a recipe works on the session. go-zookeeper's
// own host provider fails Connect at once with the lookup error.
func TestConnectSkipsNameThatDoesNotResolve(t *testing.T) {
	var r zktest.Resolver
	servers := []string{sharedName(t, &r, "zk-0"), "zk-1.no-such-host.invalid:2181", sharedName(t, &r, "zk-2")}
	logOpt, logs := observed(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s, err := session.Connect(ctx, servers, session.WithResolver(&r), logOpt, session.WithConnectTimeout(10*time.Second))
	if err != nil {
		t.Fatalf("Connect with one unresolvable name of three: %v", err)
	}
	defer s.Close()
	ns := zktest.NewNamespace(t)
	m, err := mutex.New(s, ns.Path("/lock"))
	if err != nil {
		t.Fatal(err)
	}
	lease, err := m.Lock(ctx)
	if err != nil {
		t.Fatalf("Lock on a session with an unresolvable name: %v", err)
	}
	if err := lease.Release(ctx); err != nil {
		t.Fatal(err)
	}
	// The provider resolves every name at its first pass, whichever server
	// answers first.
	if !loggedWith(logs, "server name does not resolve, skipping it", "zk-1.no-such-host.invalid:2181") {
		t.Errorf("no warning names the unresolvable server; log: %v", messages(logs))
	}
}

// The issue's own example with the system resolver: a reserved .invalid name
// beside a live address does not fail Connect.
func TestConnectSystemResolverSkipsInvalidName(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	servers := []string{zktest.SharedServers()[0], "zk-2.no-such-host.invalid:2181"}
	s, err := session.Connect(ctx, servers, session.WithConnectTimeout(15*time.Second))
	if err != nil {
		t.Fatalf("Connect(%v): %v", servers, err)
	}
	s.Close()
}

// No name resolves: Connect fails within its bound, matching
// context.DeadlineExceeded, and names each server with its lookup error.
func TestConnectNoNameResolves(t *testing.T) {
	var r zktest.Resolver
	servers := []string{"zk-0.gone.test:2181", "zk-1.gone.test:2182"}
	const bound = 1500 * time.Millisecond
	start := time.Now()
	s, err := session.Connect(context.Background(), servers, session.WithResolver(&r), session.WithConnectTimeout(bound))
	took := time.Since(start)
	if err == nil {
		s.Close()
		t.Fatal("Connect succeeded with no name resolving")
	}
	t.Logf("Connect returned after %v: %v", took.Round(time.Millisecond), err)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("error %q does not match context.DeadlineExceeded", err)
	}
	for _, want := range []string{"zk-0.gone.test:2181: lookup zk-0.gone.test", "zk-1.gone.test:2182: lookup zk-1.gone.test", "no such host"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if took > bound+2*time.Second {
		t.Errorf("Connect took %v, want about %v", took, bound)
	}
}

// Names are resolved again after a pass in which no server answered: a name
// that first points where no server listens, then at the server, gets a
// session without a new Connect. (go-zookeeper resolves once, in Connect,
// and would try the dead address for ever.)
func TestConnectResolvesNamesAgain(t *testing.T) {
	var r countingResolver
	_, port, err := net.SplitHostPort(zktest.SharedServers()[0])
	if err != nil {
		t.Fatal(err)
	}
	live, _, _ := net.SplitHostPort(zktest.SharedServers()[0])
	r.Set("zk.moving.test", "127.0.0.254") // no server listens there
	name := net.JoinHostPort("zk.moving.test", port)

	type result struct {
		s   *session.Session
		err error
	}
	done := make(chan result, 1)
	go func() {
		s, err := session.Connect(context.Background(), []string{name}, session.WithResolver(&r), session.WithConnectTimeout(20*time.Second))
		done <- result{s, err}
	}()
	zktest.Eventually(t, 10*time.Second, func() bool { return r.lookups.Load() >= 2 }, "a second lookup of the name")
	r.Set("zk.moving.test", live)
	select {
	case res := <-done:
		if res.err != nil {
			t.Fatalf("Connect after the name moved: %v", res.err)
		}
		res.s.Close()
	case <-time.After(15 * time.Second):
		t.Fatal("no session within 15 s of the name resolving to a live server")
	}
}

// loggedWith reports whether logs hold an entry with message msg whose
// "server" field is server.
func loggedWith(logs *observer.ObservedLogs, msg, server string) bool {
	for _, e := range logs.FilterMessage(msg).All() {
		if e.ContextMap()["server"] == server {
			return true
		}
	}
	return false
}

// messages returns the messages of logs, for a failure's report.
func messages(logs *observer.ObservedLogs) []string {
	var out []string
	for _, e := range logs.All() {
		out = append(out, e.Message)
	}
	return out
}

// observed returns a logger option that records entries at debug level.
func observed(t *testing.T) (session.Option, *observer.ObservedLogs) {
	core, logs := observer.New(zapcore.DebugLevel)
	return session.WithLogger(zap.New(core)), logs
}
