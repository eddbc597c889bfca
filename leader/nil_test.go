package leader_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/go-zookeeper/zk"
	"go.uber.org/goleak"

	"github.com/zkrecipes/zkrecipes/internal/sessiontest"
	"github.com/zkrecipes/zkrecipes/leader"
	"github.com/zkrecipes/zkrecipes/session"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// nilCtx is a nil context.Context, as a careless caller passes it.
var nilCtx context.Context

// nilCase is one call of the API with a nil or otherwise bad input. call
// returns the call's error; it fails t itself when the call returns
// something besides the error (a channel, a term).
type nilCase struct {
	name string
	call func(t *testing.T) error
	want error  // the sentinel the error must match
	arg  string // the text naming the bad argument
}

// checkNilCases runs each case in its own subtest and checks that the call
// does not panic, returns an error matching want that names arg, leaves no
// goroutine running, and creates or deletes no znode under root.
func checkNilCases(t *testing.T, raw *zk.Conn, root string, cases []nilCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := subtree(t, raw, root)
			running := goleak.IgnoreCurrent()
			p, err := catchPanic(func() error { return c.call(t) })
			switch {
			case p != nil:
				t.Errorf("panic: %v", p)
			case err == nil:
				t.Errorf("no error, want one matching %v naming %q", c.want, c.arg)
			case !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.arg):
				t.Errorf("err = %v, want one matching %v naming %q", err, c.want, c.arg)
			}
			if err := goleak.Find(running); err != nil {
				t.Errorf("the call left goroutines running: %v", err)
			}
			if after := subtree(t, raw, root); !slices.Equal(before, after) {
				t.Errorf("znodes under %s changed: before %q, after %q", root, before, after)
			}
		})
	}
}

// catchPanic calls f and returns what it panicked with, or its error.
func catchPanic(f func() error) (p any, err error) {
	defer func() { p = recover() }()
	return nil, f()
}

// subtree lists every znode below root (root excluded), sorted.
func subtree(t *testing.T, raw *zk.Conn, root string) []string {
	t.Helper()
	kids, _, err := raw.Children(root)
	if errors.Is(err, zk.ErrNoNode) {
		return nil
	}
	if err != nil {
		t.Fatalf("children of %s: %v", root, err)
	}
	var out []string
	for _, k := range kids {
		p := root + "/" + k
		out = append(out, p)
		out = append(out, subtree(t, raw, p)...)
	}
	slices.Sort(out)
	return out
}

// TestNilInputs: the functions and the methods of Latch and Selector refuse
// a nil context, a nil session and a nil callback with an error matching
// ErrBadArgument, before they start anything: no goroutine (Observe returns
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
	// A started latch that does not lead: Await would have to wait.
	first := startLatch(t, s, "first")
	await(t, first)
	second := startLatch(t, s, "second")
	zktest.Eventually(t, wait, func() bool {
		ps, err := leader.Participants(ctx, s, electionPath)
		return err == nil && len(ps) == 2
	}, "second latch not in the election")

	checkNilCases(t, raw, ns.Root, []nilCase{
		{"Observe nil ctx", func(t *testing.T) error {
			ch, err := leader.Observe(nilCtx, s, electionPath)
			if ch != nil {
				t.Errorf("Observe returned a channel")
			}
			return err
		}, leader.ErrBadArgument, "nil context"},
		{"Observe nil session", func(t *testing.T) error {
			ch, err := leader.Observe(ctx, nil, electionPath)
			if ch != nil {
				t.Errorf("Observe returned a channel")
			}
			return err
		}, leader.ErrBadArgument, "nil session"},
		{"Observe empty path", func(*testing.T) error {
			_, err := leader.Observe(ctx, s, "")
			return err
		}, session.ErrBadPath, "empty"},
		{"Run nil ctx", func(*testing.T) error {
			return leader.Run(nilCtx, s, "/run", work)
		}, leader.ErrBadArgument, "nil context"},
		{"Run nil session", func(*testing.T) error {
			return leader.Run(ctx, nil, "/run", work)
		}, leader.ErrBadArgument, "nil session"},
		{"Run nil work", func(*testing.T) error {
			return leader.Run(ctx, s, "/run", nil)
		}, leader.ErrBadArgument, "nil work"},
		{"Run nil option", func(*testing.T) error {
			return leader.Run(ctx, s, "/run", work, nil)
		}, leader.ErrBadOption, "nil option"},
		{"Leader nil ctx", func(t *testing.T) error {
			p, _, err := leader.Leader(nilCtx, s, electionPath)
			if p != (leader.Participant{}) {
				t.Errorf("Leader returned %v", p)
			}
			return err
		}, leader.ErrBadArgument, "nil context"},
		{"Participants nil ctx", func(t *testing.T) error {
			ps, err := leader.Participants(nilCtx, s, electionPath)
			if ps != nil {
				t.Errorf("Participants returned %v", ps)
			}
			return err
		}, leader.ErrBadArgument, "nil context"},
		{"Leader nil session", func(*testing.T) error {
			_, _, err := leader.Leader(ctx, nil, electionPath)
			return err
		}, leader.ErrBadArgument, "nil session"},
		{"NewLatch nil session", func(*testing.T) error {
			_, err := leader.NewLatch(nil, electionPath)
			return err
		}, leader.ErrBadArgument, "nil session"},
		{"NewSelector nil callback", func(*testing.T) error {
			_, err := leader.NewSelector(s, electionPath, nil)
			return err
		}, leader.ErrBadArgument, "nil callback"},
		{"Latch.Await nil ctx, not started", func(t *testing.T) error {
			term, err := latent.Await(nilCtx)
			if term != nil {
				t.Errorf("Await returned a term")
			}
			return err
		}, leader.ErrBadArgument, "nil context"},
		{"Latch.Await nil ctx, waiting", func(t *testing.T) error {
			term, err := second.Await(nilCtx)
			if term != nil {
				t.Errorf("Await returned a term")
			}
			return err
		}, leader.ErrBadArgument, "nil context"},
		{"Latch.Await nil ctx, leading", func(*testing.T) error {
			_, err := first.Await(nilCtx)
			return err
		}, leader.ErrBadArgument, "nil context"},
		{"Latch.Leader nil ctx", func(*testing.T) error {
			_, _, err := latent.Leader(nilCtx)
			return err
		}, leader.ErrBadArgument, "nil context"},
		{"Latch.Participants nil ctx", func(*testing.T) error {
			_, err := first.Participants(nilCtx)
			return err
		}, leader.ErrBadArgument, "nil context"},
		{"Selector.Leader nil ctx", func(*testing.T) error {
			_, _, err := sel.Leader(nilCtx)
			return err
		}, leader.ErrBadArgument, "nil context"},
		{"Selector.Participants nil ctx", func(*testing.T) error {
			_, err := sel.Participants(nilCtx)
			return err
		}, leader.ErrBadArgument, "nil context"},
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
	running := goleak.IgnoreCurrent()
	var ch <-chan leader.Event
	if p, _ := catchPanic(func() error { ch = l.Changes(nilCtx); return nil }); p != nil {
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
// Err and the cause of Context match ErrBadArgument and name the nil term,
// the accessors return zero values; TermFromContext(nil) finds no term.
func TestNilTerm(t *testing.T) {
	var term *leader.Term
	p, _ := catchPanic(func() error {
		select {
		case <-term.Done():
		default:
			t.Error("Done of a nil term is not closed")
		}
		if err := term.Err(); !errors.Is(err, leader.ErrBadArgument) || !strings.Contains(err.Error(), "nil term") {
			t.Errorf("Err = %v", err)
		}
		ctx := term.Context()
		if ctx.Err() == nil || !errors.Is(context.Cause(ctx), leader.ErrBadArgument) {
			t.Errorf("Context: err %v, cause %v", ctx.Err(), context.Cause(ctx))
		}
		if got, ok := leader.TermFromContext(ctx); got != nil || ok {
			t.Errorf("TermFromContext(nil term's context) = %v, %v", got, ok)
		}
		if term.Token() != 0 || term.ID() != "" || term.Node() != "" || term.Path() != "" ||
			term.SessionID() != 0 || !term.Started().IsZero() {
			t.Errorf("accessors of a nil term: %d %q %q %q %d %v",
				term.Token(), term.ID(), term.Node(), term.Path(), term.SessionID(), term.Started())
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
