// Package sessiontest connects session.Sessions to zktest servers for tests.
// It is test support for the library's own packages (recipes, mutex, leader,
// ...): every helper takes a testing.TB, must be called from the test's
// goroutine, fails the test on error and closes what it opened in t.Cleanup.
//
// Typical use:
//
//	func TestMain(m *testing.M) { zktest.Main(m) }
//
//	func TestX(t *testing.T) {
//		ns := zktest.NewNamespace(t)
//		s, proxy := sessiontest.ConnectProxy(t, ns) // namespace ns.Root, 2 s session timeout
//		rec := sessiontest.Record(t, s)             // every transition from now on
//		proxy.Cut()
//		rec.Wait(t, 10*time.Second, session.Suspended)
//		rec.Wait(t, 10*time.Second, session.Reconnected)
//
//		s2, tap := sessiontest.ConnectTap(t, ns) // through a session tap
//		sessiontest.Expire(t, s2, tap)           // the server ends s2's session now
//	}
//
// Paths: with Connect the Session's namespace is ns.Root, so s.Path("/lock")
// is ns.Root+"/lock", the same node as ns.Path("lock") for a raw ns.Conn(t).
//
// It also holds the harnesses that several packages' tests share: the
// nil-input table runner (NilCase, CheckNilCases, CatchPanic, Subtree), the
// ctx-bound measurer (MeasureBound, MeasureBoundWithin, the Bound*
// constants, LibraryStacks), the write-outcome table (CheckOutcomes,
// CommitCase: an answer lost says recipes.ErrUnknownOutcome, a write made
// while the connection is down sends nothing) and the waits Recv and
// WaitDone. Only tests may import this package, never the library's own
// code.
package sessiontest

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/internal/zksession"
	"github.com/zkrecipes/zkrecipes/session"
	"github.com/zkrecipes/zkrecipes/zktest"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
)

// SessionTimeout is the session timeout the helpers ask for unless the
// options given override it (zktest servers accept down to 500 ms).
const SessionTimeout = 2 * time.Second

// ConnectTimeout bounds how long the helpers wait for the first session.
const ConnectTimeout = 20 * time.Second

// Connect connects a Session to ns's server with namespace ns.Root, session
// timeout SessionTimeout and a zaptest logger at info level; opts come after
// those, so they win. The Session is closed in t.Cleanup.
func Connect(t testing.TB, ns *zktest.Namespace, opts ...session.Option) *session.Session {
	t.Helper()
	return ConnectTo(t, ns.Servers(), ns.Root, opts...)
}

// ConnectTo connects a Session to servers with the given namespace ("" for
// none), as Connect does.
func ConnectTo(t testing.TB, servers []string, namespace string, opts ...session.Option) *session.Session {
	t.Helper()
	all := append([]session.Option{
		session.WithNamespace(namespace),
		session.WithSessionTimeout(SessionTimeout),
		session.WithLogger(zaptest.NewLogger(t, zaptest.Level(zapcore.InfoLevel))),
	}, opts...)
	ctx, cancel := context.WithTimeout(context.Background(), ConnectTimeout)
	defer cancel()
	s, err := session.Connect(ctx, servers, all...)
	if err != nil {
		t.Fatalf("sessiontest: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// ConnectProxy starts a proxy in front of ns's server (closed in t.Cleanup,
// after the Session) and connects a Session through it, as Connect does.
func ConnectProxy(t testing.TB, ns *zktest.Namespace, opts ...session.Option) (*session.Session, *zktest.Proxy) {
	t.Helper()
	p := ns.Proxy(t)
	return ConnectTo(t, p.Servers(), ns.Root, opts...), p
}

// ConnectTap connects a Session to ns's server through a zktest.Tap, which
// records the session credentials that Expire needs.
func ConnectTap(t testing.TB, ns *zktest.Namespace, opts ...session.Option) (*session.Session, *zktest.Tap) {
	t.Helper()
	tap := zktest.NewTap()
	opts = append([]session.Option{session.WithDialer(tap.Dialer())}, opts...)
	return ConnectTo(t, ns.Servers(), ns.Root, opts...), tap
}

// ConnectProxyTap connects a Session through a proxy in front of ns's server
// and through a Tap.
func ConnectProxyTap(t testing.TB, ns *zktest.Namespace, opts ...session.Option) (*session.Session, *zktest.Proxy, *zktest.Tap) {
	t.Helper()
	p := ns.Proxy(t)
	tap := zktest.NewTap()
	opts = append([]session.Option{session.WithDialer(tap.Dialer())}, opts...)
	return ConnectTo(t, p.Servers(), ns.Root, opts...), p, tap
}

// Hold keeps s's current ZooKeeper session alive on the server from another
// connection (zktest.HoldSession with the credentials p saw), until the
// returned release or t.Cleanup: the server moves the session there and
// closes s's connection. servers are the real servers (not p).
func Hold(t testing.TB, s *session.Session, p *zktest.Proxy, servers []string) (release func()) {
	t.Helper()
	id := s.SessionID()
	for _, c := range p.Sessions() {
		if c.ID == id {
			return zktest.HoldSession(t, servers, c)
		}
	}
	t.Fatalf("sessiontest: the proxy did not see session 0x%x", id)
	return nil
}

// Expire ends s's current ZooKeeper session on the server at once
// (zktest.ExpireSession with the credentials tap saw). servers default to
// s.Servers(); pass the real servers when s connects through a proxy that is
// partitioned. s learns of it (Lost) when it next reconnects: to make that
// immediate, cut its connection (Proxy.Cut) afterwards.
func Expire(t testing.TB, s *session.Session, tap *zktest.Tap, servers ...string) zktest.SessionCreds {
	t.Helper()
	id := s.SessionID()
	var creds zktest.SessionCreds
	found := false
	for _, c := range tap.Sessions() {
		if c.ID == id {
			creds, found = c, true
		}
	}
	if !found {
		t.Fatalf("sessiontest: the tap did not see session 0x%x", id)
	}
	if len(servers) == 0 {
		servers = Core(s).Servers()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := zktest.ExpireSession(ctx, servers, creds); err != nil {
		t.Fatalf("sessiontest: %v", err)
	}
	return creds
}

// Watches returns the paths on which ZooKeeper session sid holds a data
// watch at the server addr: one set by a read of a node's data or by an
// exists check, on a node that does not exist too. It reads the wchc
// four-letter word, which lists the server's data watches only: a child
// watch (set by listing a node's children) is not among them. Pass the real
// server's address (ns.Server.Addr()), not a proxy's.
func Watches(t testing.TB, addr string, sid int64) map[string]bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), ConnectTimeout)
	defer cancel()
	out, err := zktest.FourLetterWord(ctx, addr, "wchc")
	if err != nil {
		t.Fatalf("sessiontest: wchc: %v", err)
	}
	paths := map[string]bool{}
	in := false
	for _, line := range strings.Split(out, "\n") {
		switch l := strings.TrimSpace(line); {
		case strings.HasPrefix(l, "0x"):
			in = strings.EqualFold(l, fmt.Sprintf("0x%x", sid))
		case in && strings.HasPrefix(l, "/"):
			paths[l] = true
		}
	}
	return paths
}

// Event is a transition as a Recorder records it: the public event and the
// epoch it refers to (see zksession.Event).
type Event struct {
	session.Event
	Epoch *zksession.Epoch
}

// Recorder collects every transition of a Session from a Subscription.
// It is safe for concurrent use.
type Recorder struct {
	sub  *zksession.Subscription[Event]
	done chan struct{}

	mu     sync.Mutex
	events []Event
	cursor int
	more   chan struct{}
}

// Record subscribes to s and records every transition until t.Cleanup.
func Record(t testing.TB, s *session.Session) *Recorder {
	sub := zksession.SubscribeAs(Core(s), func(e zksession.Event) Event {
		return Event{Event: session.Event{State: session.State(e.State), SessionID: e.SessionID, At: e.At}, Epoch: e.Epoch}
	})
	r := &Recorder{sub: sub, done: make(chan struct{}), more: make(chan struct{})}
	go func() {
		defer close(r.done)
		for ev := range r.sub.C() {
			r.mu.Lock()
			r.events = append(r.events, ev)
			close(r.more)
			r.more = make(chan struct{})
			r.mu.Unlock()
		}
	}()
	t.Cleanup(r.Stop)
	return r
}

// Initial returns the subscription's initial state.
func (r *Recorder) Initial() Event { return r.sub.Initial() }

// Stop ends the recording and waits for its goroutine. Idempotent.
func (r *Recorder) Stop() {
	r.sub.Close()
	<-r.done
}

// Events returns the transitions recorded so far.
func (r *Recorder) Events() []Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Event(nil), r.events...)
}

// States returns the states recorded so far.
func (r *Recorder) States() []session.State {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]session.State, len(r.events))
	for i, ev := range r.events {
		out[i] = ev.State
	}
	return out
}

// Wait waits for the next transition to state st after the one the previous
// Wait returned (earlier transitions to other states are skipped) and returns
// it; it fails the test after timeout.
func (r *Recorder) Wait(t testing.TB, timeout time.Duration, st session.State) Event {
	t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		r.mu.Lock()
		for ; r.cursor < len(r.events); r.cursor++ {
			if ev := r.events[r.cursor]; ev.State == st {
				r.cursor++
				r.mu.Unlock()
				return ev
			}
		}
		more := r.more
		r.mu.Unlock()
		select {
		case <-more:
		case <-r.done:
			r.mu.Lock()
			n := len(r.events)
			r.mu.Unlock()
			if r.cursor >= n {
				t.Fatalf("sessiontest: subscription ended before %v; recorded %v", st, r.States())
			}
		case <-deadline.C:
			t.Fatalf("sessiontest: no %v within %v; recorded %v", st, timeout, r.States())
		}
	}
}

// Core returns the implementation behind s, for tests that check what the
// public API does not show (epochs, watches, the request paths).
func Core(s *session.Session) *zksession.Session {
	zs, err := zksession.Of(s)
	if err != nil {
		panic(err)
	}
	return zs
}
