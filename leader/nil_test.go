package leader_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/go-zookeeper/zk"
	"go.uber.org/goleak"

	"github.com/zkrecipes/zkrecipes/internal/testkit/leasetest"
	"github.com/zkrecipes/zkrecipes/internal/testkit/sessiontest"
	"github.com/zkrecipes/zkrecipes/leader"
	"github.com/zkrecipes/zkrecipes/recipes"
	"github.com/zkrecipes/zkrecipes/session"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// nilCtx is a nil context.Context, as a careless caller passes it.
var nilCtx context.Context

// TestNilInputs: the functions and the methods of Latch and Selector refuse
// a nil context, a nil session and a nil callback with an error matching
// session.ErrBadArgument, before they start anything: no goroutine (Observe returns
// no channel), no node.
func TestNilInputs(t *testing.T) {
	ns := zktest.NewNamespace(t)
	raw := ns.Conn(t)
	s := sessiontest.Connect(t, ns)
	ctx := ctxT(t)
	var worked atomic.Bool
	work := func(context.Context) error { worked.Store(true); return nil }

	latent, err := leader.NewLatch(s, electionPath, leader.WithID("latent"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { latent.Close() })
	sel, err := leader.NewSelector(s, "/selection", work, leader.WithID("sel"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sel.Close() })
	// A started latch that does not lead: Await would have to wait. The
	// leader is on a session of its own, so that the test can tell when its
	// lease has started the goroutine that watches its node (100 ms into
	// the hold): the leak check of each case below would see a goroutine
	// started during the call.
	s1 := sessiontest.Connect(t, ns)
	first := startLatch(t, s1, "first")
	await(t, first)
	second := startLatch(t, s, "second")
	zktest.Eventually(t, wait, func() bool {
		ps, err := leader.Participants(ctx, s, electionPath)
		return err == nil && len(ps) == 2
	}, "second latch not in the election")
	awaitNodeWatch(t, ns, s1)

	sessiontest.CheckNilCases(t, raw, ns.Root, []sessiontest.NilCase{
		{Name: "Observe nil ctx", Call: func(t *testing.T) error {
			ch, err := leader.Observe(nilCtx, s, electionPath)
			if ch != nil {
				t.Errorf("Observe returned a channel")
			}
			return err
		}, Want: session.ErrBadArgument, Arg: "nil context"},
		{Name: "Observe nil session", Call: func(t *testing.T) error {
			ch, err := leader.Observe(ctx, nil, electionPath)
			if ch != nil {
				t.Errorf("Observe returned a channel")
			}
			return err
		}, Want: session.ErrBadArgument, Arg: "nil session"},
		{Name: "Observe empty path", Call: func(*testing.T) error {
			_, err := leader.Observe(ctx, s, "")
			return err
		}, Want: session.ErrBadArgument, Arg: "empty"},
		{Name: "Run nil ctx", Call: func(*testing.T) error {
			return leader.Run(nilCtx, s, "/run", work)
		}, Want: session.ErrBadArgument, Arg: "nil context"},
		{Name: "Run nil session", Call: func(*testing.T) error {
			return leader.Run(ctx, nil, "/run", work)
		}, Want: session.ErrBadArgument, Arg: "nil session"},
		{Name: "Run nil work", Call: func(*testing.T) error {
			return leader.Run(ctx, s, "/run", nil)
		}, Want: session.ErrBadArgument, Arg: "nil work"},
		{Name: "Run nil option", Call: func(*testing.T) error {
			return leader.Run(ctx, s, "/run", work, nil)
		}, Want: session.ErrBadArgument, Arg: "nil option"},
		{Name: "Leader nil ctx", Call: func(t *testing.T) error {
			p, _, err := leader.Leader(nilCtx, s, electionPath)
			if p != (recipes.Participant{}) {
				t.Errorf("Leader returned %v", p)
			}
			return err
		}, Want: session.ErrBadArgument, Arg: "nil context"},
		{Name: "Participants nil ctx", Call: func(t *testing.T) error {
			ps, err := leader.Participants(nilCtx, s, electionPath)
			if ps != nil {
				t.Errorf("Participants returned %v", ps)
			}
			return err
		}, Want: session.ErrBadArgument, Arg: "nil context"},
		{Name: "Leader nil session", Call: func(*testing.T) error {
			_, _, err := leader.Leader(ctx, nil, electionPath)
			return err
		}, Want: session.ErrBadArgument, Arg: "nil session"},
		{Name: "NewLatch nil session", Call: func(*testing.T) error {
			_, err := leader.NewLatch(nil, electionPath)
			return err
		}, Want: session.ErrBadArgument, Arg: "nil session"},
		{Name: "NewSelector nil callback", Call: func(*testing.T) error {
			_, err := leader.NewSelector(s, electionPath, nil)
			return err
		}, Want: session.ErrBadArgument, Arg: "nil callback"},
		{Name: "Latch.Await nil ctx, not started", Call: func(t *testing.T) error {
			term, err := latent.Await(nilCtx)
			if term != nil {
				t.Errorf("Await returned a term")
			}
			return err
		}, Want: session.ErrBadArgument, Arg: "nil context"},
		{Name: "Latch.Await nil ctx, waiting", Call: func(t *testing.T) error {
			term, err := second.Await(nilCtx)
			if term != nil {
				t.Errorf("Await returned a term")
			}
			return err
		}, Want: session.ErrBadArgument, Arg: "nil context"},
		{Name: "Latch.Await nil ctx, leading", Call: func(*testing.T) error {
			_, err := first.Await(nilCtx)
			return err
		}, Want: session.ErrBadArgument, Arg: "nil context"},
		// Latch and Selector no longer read the election themselves: the
		// package functions do, on the election a latch leads (above) and
		// on a selector's.
		{Name: "Leader nil ctx, selector's election", Call: func(*testing.T) error {
			_, _, err := leader.Leader(nilCtx, s, "/selection")
			return err
		}, Want: session.ErrBadArgument, Arg: "nil context"},
		{Name: "Participants nil ctx, selector's election", Call: func(*testing.T) error {
			_, err := leader.Participants(nilCtx, s, "/selection")
			return err
		}, Want: session.ErrBadArgument, Arg: "nil context"},
	})
	if worked.Load() {
		t.Error("work ran although Run refused its arguments")
	}
}

// TestNilChanges: Changes cannot return an error; given a nil ctx it returns
// a channel that is already closed, without events, and starts nothing.
func TestNilChanges(t *testing.T) {
	ns := zktest.NewNamespace(t)
	s := sessiontest.Connect(t, ns)
	l := startLatch(t, s, "a")
	await(t, l)
	awaitNodeWatch(t, ns, s) // the lease's goroutine has started
	running := goleak.IgnoreCurrent()
	var ch <-chan leader.Event
	if p, _ := sessiontest.CatchPanic(func() error { ch = l.Changes(nilCtx); return nil }); p != nil {
		t.Fatalf("panic: %v", p)
	}
	if ev, ok := <-ch; ok {
		t.Fatalf("Changes(nil) delivered %+v; want a closed channel", ev)
	}
	if err := goleak.Find(running); err != nil {
		t.Fatalf("Changes(nil) left goroutines running: %v", err)
	}
}

// TestNilTerm: a nil *Term behaves as a term that has ended: Done is closed,
// Err and the cause of Context match session.ErrBadArgument and name the nil term,
// the accessors return zero values; TermFromContext(nil) finds no term.
func TestNilTerm(t *testing.T) {
	var term *leader.Term
	p, _ := sessiontest.CatchPanic(func() error {
		select {
		case <-term.Done():
		default:
			t.Error("Done of a nil term is not closed")
		}
		if err := term.Err(); !errors.Is(err, session.ErrBadArgument) || !strings.Contains(err.Error(), "nil term") {
			t.Errorf("Err = %v", err)
		}
		ctx := term.Context()
		if ctx.Err() == nil || !errors.Is(context.Cause(ctx), session.ErrBadArgument) {
			t.Errorf("Context: err %v, cause %v", ctx.Err(), context.Cause(ctx))
		}
		if got, ok := leader.TermFromContext(ctx); got != nil || ok {
			t.Errorf("TermFromContext(nil term's context) = %v, %v", got, ok)
		}
		if term.Token() != 0 || term.Node() != "" || !term.Started().IsZero() {
			t.Errorf("accessors of a nil term: %d %q %v", term.Token(), term.Node(), term.Started())
		}
		if got, ok := leader.TermFromContext(nilCtx); got != nil || ok {
			t.Errorf("TermFromContext(nil) = %v, %v", got, ok)
		}
		return nil
	})
	if p != nil {
		t.Fatalf("panic: %v", p)
	}
}

// TestNilTermMethods: every method of a nil *Term, each in its own subtest,
// behaves as that of a nil *mutex.Lease: as a term that has ended with an
// error matching session.ErrBadArgument; Resign does nothing.
func TestNilTermMethods(t *testing.T) {
	var term *leader.Term
	leasetest.CheckNil(t, term, "leader", "nil term",
		leasetest.Call{Name: "Resign", NoError: true, Call: func(*testing.T) error { term.Resign(); return nil }},
		leasetest.Call{Name: "Commit", Call: func(t *testing.T) error {
			res, err := term.Commit(context.Background(), &zk.CreateRequest{Path: "/x"})
			if res != nil {
				t.Errorf("Commit of a nil term returned %v", res)
			}
			return err
		}},
		leasetest.Call{Name: "Started", NoError: true, Call: func(t *testing.T) error {
			if s := term.Started(); !s.IsZero() {
				t.Errorf("Started of a nil term = %v", s)
			}
			return nil
		}},
	)
}

// awaitNodeWatch waits until session s, on which the only latch leads,
// watches a node in the election directory: the lease of its term has
// started the goroutine that watches its own node (100 ms into the hold).
// Leak checks must not begin before, or they see that goroutine start.
func awaitNodeWatch(t *testing.T, ns *zktest.Namespace, s *session.Session) {
	t.Helper()
	dir := ns.Path(electionPath) + "/"
	zktest.Eventually(t, wait, func() bool {
		for p := range sessiontest.Watches(t, ns.Server.Addr(), s.SessionID()) {
			if strings.HasPrefix(p, dir) {
				return true
			}
		}
		return false
	}, "the leader's lease does not watch its node")
}
