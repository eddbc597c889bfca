package sessiontest

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/recipes"
	"github.com/zkrecipes/zkrecipes/session"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// The outcome harness checks what a recipe call that writes says when the
// write's answer is lost, and when the write cannot be sent at all: every
// such call (a lease's Commit, a counter's change, a node's SetData, ...)
// promises recipes.ErrUnknownOutcome in the first case only.

// OutcomeCase is one recipe call that writes, for CheckOutcomes.
type OutcomeCase struct {
	// Name names the case's subtests.
	Name string
	// Setup prepares the call in ns: it connects the session the call
	// writes through with ConnectProxy (a SessionTimeout long enough that a
	// lease outlives a few seconds of disconnection, e.g. 10 s) and returns
	// the call. It runs once per subtest, on the test's goroutine.
	Setup func(t *testing.T, ns *zktest.Namespace) OutcomeWrite
	// Later says that the recipe keeps a write that could not be sent and
	// sends it once the connection is back (a group Node's data): the
	// "not sent" subtest then checks that the write is applied once the
	// connection is back, instead of never.
	Later bool
}

// OutcomeWrite is a call set up by an OutcomeCase.
type OutcomeWrite struct {
	// Session is the session the call writes through; Proxy is the proxy
	// between it and the server (from ConnectProxy).
	Session *session.Session
	Proxy   *zktest.Proxy
	// Request reports whether r is the call's write request (OpMulti for a
	// Commit, OpSetData on the node for a set).
	Request func(r zktest.Request) bool
	// Call makes the call under test within ctx.
	Call func(ctx context.Context) error
	// Applied reports whether the server holds the call's write, read
	// through a raw connection to the server (not through the proxy).
	Applied func(t *testing.T) bool
}

// The bounds of the outcome harness: the ctx of a call whose answer is lost
// (a recipe that retries waits for the connection until it ends), the ctx
// of a call made while the connection is down, and how much later than its
// ctx a call may return on a loaded machine.
const (
	OutcomeLostCtx  = 2 * time.Second
	OutcomeDownCtx  = 300 * time.Millisecond
	OutcomeOvershot = 1500 * time.Millisecond
)

// CheckOutcomes runs two subtests for each case, each on a namespace of
// its own:
//
//   - "answer lost": the proxy relays the call's write request to the
//     server, swallows the answer, closes the connection and refuses new
//     ones; the call must return within its ctx (OutcomeLostCtx) with an
//     error matching recipes.ErrUnknownOutcome, and the server must hold
//     the write.
//   - "not sent": the connection is cut and refused, and once the session
//     is Suspended the call is made with a ctx of OutcomeDownCtx; it must
//     return within that ctx, with ctx's error and not matching
//     recipes.ErrUnknownOutcome, and the server must not hold the write.
//     After the connection is back (and a round trip of the session, behind
//     anything go-zookeeper queued), the request never reached the server
//     and the server still does not hold the write, or, for a Later case,
//     the server comes to hold it.
func CheckOutcomes(t *testing.T, cases ...OutcomeCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.Name+"/answer lost", func(t *testing.T) { checkAnswerLost(t, c) })
		t.Run(c.Name+"/not sent", func(t *testing.T) { checkNotSent(t, c) })
	}
}

func checkAnswerLost(t *testing.T, c OutcomeCase) {
	ns := zktest.NewNamespace(t)
	w := c.Setup(t, ns)
	var hit atomic.Int32
	w.Proxy.OnRequest(func(r zktest.Request) zktest.Action {
		if w.Request(r) && hit.Add(1) == 1 {
			// No connection until the call has returned: it cannot
			// learn the outcome by asking again.
			w.Proxy.Refuse(true)
			return zktest.SwallowReply
		}
		return zktest.Forward
	})
	defer w.Proxy.Heal()
	ctx, cancel := context.WithTimeout(context.Background(), OutcomeLostCtx)
	start := time.Now()
	err := w.Call(ctx)
	took := time.Since(start)
	cancel()
	w.Proxy.OnRequest(nil)
	if hit.Load() == 0 {
		t.Fatalf("the write request never reached the proxy (the call returned %v)", err)
	}
	if !errors.Is(err, recipes.ErrUnknownOutcome) {
		t.Fatalf("answer lost: the call returned %v, want an error matching recipes.ErrUnknownOutcome", err)
	}
	if took > OutcomeLostCtx+OutcomeOvershot {
		t.Fatalf("answer lost: the call returned after %v with a ctx of %v", took, OutcomeLostCtx)
	}
	if !w.Applied(t) {
		t.Fatal("answer lost: the server does not hold the write, which it received")
	}
	t.Logf("answer lost: %v after %v", err, took.Round(time.Millisecond))
}

func checkNotSent(t *testing.T, c OutcomeCase) {
	ns := zktest.NewNamespace(t)
	w := c.Setup(t, ns)
	rec := Record(t, w.Session)
	var hit atomic.Int32
	w.Proxy.OnRequest(func(r zktest.Request) zktest.Action {
		if w.Request(r) {
			hit.Add(1)
		}
		return zktest.Forward
	})
	w.Proxy.Refuse(true)
	w.Proxy.Cut()
	defer w.Proxy.Heal()
	rec.Wait(t, 30*time.Second, session.Suspended)

	ctx, cancel := context.WithTimeout(context.Background(), OutcomeDownCtx)
	start := time.Now()
	err := w.Call(ctx)
	took := time.Since(start)
	cancel()
	switch {
	case took > OutcomeDownCtx+OutcomeOvershot:
		t.Fatalf("not sent: the call returned after %v with a ctx of %v", took, OutcomeDownCtx)
	case errors.Is(err, recipes.ErrUnknownOutcome):
		t.Fatalf("not sent: the call returned %v: it matches recipes.ErrUnknownOutcome, but nothing was sent", err)
	case !errors.Is(err, context.DeadlineExceeded):
		t.Fatalf("not sent: the call returned %v, want ctx's error (context.DeadlineExceeded)", err)
	case w.Applied(t):
		t.Fatal("not sent: the server holds the write while the connection is down")
	}
	t.Logf("not sent: %v after %v", err, took.Round(time.Millisecond))

	w.Proxy.Heal()
	rec.Wait(t, 30*time.Second, session.Reconnected)
	if c.Later {
		zktest.Eventually(t, 30*time.Second, func() bool { return w.Applied(t) },
			"the kept write is applied once the connection is back")
		return
	}
	// A request go-zookeeper still held would go out first on the new
	// connection: once a later one is answered, it would have been too.
	if _, _, err := Core(w.Session).Conn().Exists("/"); err != nil {
		t.Fatalf("a round trip after the reconnection: %v", err)
	}
	if n := hit.Load(); n != 0 {
		t.Fatalf("not sent: the write reached the server %d time(s) after the call returned", n)
	}
	if w.Applied(t) {
		t.Fatal("not sent: the server holds the write after the connection came back")
	}
}

// CommitSessionTimeout is the session timeout of CommitCase's session:
// long enough that a lease outlives the "not sent" subtest's disconnection
// under the Standard loss policy.
const CommitSessionTimeout = 10 * time.Second

// CommitCase is the OutcomeCase of a guarded write: acquire takes a lease
// (or a term) on s, a session connected through a proxy with
// CommitSessionTimeout, and returns its Commit. The write is a create of
// the node "/written" under the namespace.
func CommitCase(name string, acquire func(t *testing.T, s *session.Session) func(ctx context.Context, ops ...any) ([]zk.MultiResponse, error)) OutcomeCase {
	return OutcomeCase{Name: name, Setup: func(t *testing.T, ns *zktest.Namespace) OutcomeWrite {
		s, p := ConnectProxy(t, ns, session.WithSessionTimeout(CommitSessionTimeout))
		commit := acquire(t, s)
		raw := ns.Conn(t)
		return OutcomeWrite{
			Session: s,
			Proxy:   p,
			Request: func(r zktest.Request) bool { return r.Op == zktest.OpMulti },
			Call: func(ctx context.Context) error {
				_, err := commit(ctx, &zk.CreateRequest{Path: "/written", Data: []byte("x")})
				return err
			},
			Applied: func(t *testing.T) bool {
				ok, _, err := raw.Exists(ns.Path("written"))
				if err != nil {
					t.Fatal(err)
				}
				return ok
			},
		}
	}}
}
