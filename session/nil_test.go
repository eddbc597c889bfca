package session_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/go-zookeeper/zk"
	"go.uber.org/goleak"

	"github.com/zkrecipes/zkrecipes/internal/sessiontest"
	"github.com/zkrecipes/zkrecipes/session"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// nilCtx is a nil context.Context, as a careless caller passes it.
var nilCtx context.Context

// nilCase is one call of the API with a nil or otherwise bad input. call
// returns the call's error; it fails t itself when the call returns
// something besides the error (a session, an epoch).
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

// TestNilInputs: every entry point of the session package refuses a nil
// context, a nil function and a nil epoch with an error matching its
// bad-argument sentinel, before it starts anything.
func TestNilInputs(t *testing.T) {
	ns := zktest.NewNamespace(t)
	raw := ns.Conn(t)
	s := sessiontest.Connect(t, ns)
	ctx := ctxT(t, wait)
	ep := s.Epoch()
	node := ns.Root + "/n"
	op := func(*zk.Conn) error { return nil }

	checkNilCases(t, raw, ns.Root, []nilCase{
		{"Connect nil ctx", func(t *testing.T) error {
			s, err := session.Connect(nilCtx, ns.Servers())
			if s != nil {
				t.Errorf("Connect returned a session")
				s.Close()
			}
			return err
		}, session.ErrBadOption, "nil context"},
		{"Connect retry factory returning nil", func(t *testing.T) error {
			s, err := session.Connect(ctx, ns.Servers(),
				session.WithRetry(func() backoff.BackOff { return nil }))
			if s != nil {
				t.Errorf("Connect returned a session")
				s.Close()
			}
			return err
		}, session.ErrBadOption, "retry"},
		{"WaitConnected nil ctx", func(t *testing.T) error {
			ep, err := s.WaitConnected(nilCtx)
			if ep != nil {
				t.Errorf("WaitConnected returned an epoch")
			}
			return err
		}, session.ErrBadOption, "nil context"},
		{"WaitLease nil ctx", func(t *testing.T) error {
			ep, lease, err := s.Toolkit().WaitLease(nilCtx)
			if ep != nil || lease != nil {
				t.Errorf("WaitLease returned %v, %v", ep, lease)
			}
			return err
		}, session.ErrBadOption, "nil context"},
		{"Retry nil ctx", func(*testing.T) error {
			return s.Toolkit().Retry(nilCtx, ep, op)
		}, session.ErrBadOption, "nil context"},
		{"Retry nil op", func(*testing.T) error {
			return s.Toolkit().Retry(ctx, ep, nil)
		}, session.ErrBadOption, "nil op"},
		{"Retry nil epoch", func(*testing.T) error {
			return s.Toolkit().Retry(ctx, nil, op)
		}, session.ErrBadEpoch, "nil epoch"},
		{"EnsureContainers nil ctx", func(*testing.T) error {
			return s.Toolkit().EnsureContainers(nilCtx, node)
		}, session.ErrBadOption, "nil context"},
		{"EnsureContainers empty path", func(*testing.T) error {
			return s.Toolkit().EnsureContainers(ctx, "")
		}, session.ErrBadPath, "empty"},
		{"CreateEphemeral nil ctx", func(t *testing.T) error {
			p, st, err := s.Toolkit().CreateEphemeral(nilCtx, ep, node, nil, 0)
			if p != "" || st != nil {
				t.Errorf("CreateEphemeral returned %q, %v", p, st)
			}
			return err
		}, session.ErrBadOption, "nil context"},
		{"CreateEphemeral nil epoch", func(*testing.T) error {
			_, _, err := s.Toolkit().CreateEphemeral(ctx, nil, node, nil, 0)
			return err
		}, session.ErrBadEpoch, "nil epoch"},
		{"CreateEphemeral empty path", func(*testing.T) error {
			_, _, err := s.Toolkit().CreateEphemeral(ctx, ep, "", nil, 0)
			return err
		}, session.ErrBadPath, "empty"},
		{"Path empty", func(*testing.T) error {
			_, err := s.Path("")
			return err
		}, session.ErrBadPath, "empty"},
	})
}

// TestNilEpoch: a nil *Epoch behaves as an epoch that has ended: Lost is
// closed, Err and the cause of Context match ErrBadEpoch; the numbers are 0.
func TestNilEpoch(t *testing.T) {
	var ep *session.Epoch
	p, err := catchPanic(func() error {
		select {
		case <-ep.Lost():
		default:
			t.Error("Lost of a nil epoch is not closed")
		}
		if err := ep.Err(); !errors.Is(err, session.ErrBadEpoch) || !strings.Contains(err.Error(), "nil epoch") {
			t.Errorf("Err = %v, want ErrBadEpoch naming the nil epoch", err)
		}
		ctx := ep.Context()
		if ctx.Err() == nil || !errors.Is(context.Cause(ctx), session.ErrBadEpoch) {
			t.Errorf("Context: err %v, cause %v", ctx.Err(), context.Cause(ctx))
		}
		if ep.SessionID() != 0 || ep.Seq() != 0 {
			t.Errorf("SessionID %d, Seq %d", ep.SessionID(), ep.Seq())
		}
		if s := ep.String(); !strings.Contains(s, "nil") {
			t.Errorf("String = %q", s)
		}
		return nil
	})
	if p != nil || err != nil {
		t.Fatalf("panic: %v", p)
	}
	// A session refuses it as before.
	ns := zktest.NewNamespace(t)
	s := sessiontest.Connect(t, ns)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.Toolkit().Retry(ctx, ep, func(*zk.Conn) error { return nil }); !errors.Is(err, session.ErrBadEpoch) {
		t.Fatalf("Retry(nil epoch) = %v", err)
	}
}
