package engine_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/zkrecipes/zkrecipes/internal/engine"
	"github.com/zkrecipes/zkrecipes/internal/testkit/sessiontest"
	"github.com/zkrecipes/zkrecipes/recipes"
	"github.com/zkrecipes/zkrecipes/session"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// nilCtx is a nil context.Context, as a careless caller passes it.
var nilCtx context.Context

// TestNilInputs: every entry point of the engine refuses a nil context, a nil
// driver (also a typed nil one) and a nil lease with an error matching its
// sentinel, before it starts anything.
func TestNilInputs(t *testing.T) {
	ns := zktest.NewNamespace(t)
	raw := ns.Conn(t)
	s := sessiontest.Connect(t, ns)
	in := newInternals(t, s)
	ctx := ctxT(t)
	data := []byte("id")

	sessiontest.CheckNilCases(t, raw, ns.Root, []sessiontest.NilCase{
		{Name: "engine.New nil session", Call: func(t *testing.T) error {
			in, err := engine.New(nil, dir)
			if in != nil {
				t.Errorf("engine.New returned an engine")
			}
			return err
		}, Want: session.ErrBadArgument, Arg: "nil session"},
		{Name: "engine.New nil option", Call: func(*testing.T) error {
			_, err := engine.New(s, dir, nil)
			return err
		}, Want: session.ErrBadArgument, Arg: "nil option"},
		{Name: "engine.New empty path", Call: func(*testing.T) error {
			_, err := engine.New(s, "")
			return err
		}, Want: session.ErrBadArgument, Arg: "empty"},
		{Name: "Acquire nil ctx", Call: func(t *testing.T) error {
			l, err := in.Acquire(nilCtx, lockDriver, data)
			if l != nil {
				t.Errorf("Acquire returned a lease")
			}
			return err
		}, Want: session.ErrBadArgument, Arg: "nil context"},
		{Name: "TryAcquire nil ctx", Call: func(*testing.T) error {
			_, err := in.TryAcquire(nilCtx, lockDriver, data)
			return err
		}, Want: session.ErrBadArgument, Arg: "nil context"},
		{Name: "Acquire nil driver", Call: func(*testing.T) error {
			_, err := in.Acquire(ctx, nil, data)
			return err
		}, Want: engine.ErrBadDriver, Arg: "nil"},
		{Name: "Acquire driver without Decide", Call: func(*testing.T) error {
			_, err := in.Acquire(ctx, &engine.Driver{Marker: "lock-", Markers: []string{"lock-"}}, data)
			return err
		}, Want: engine.ErrBadDriver, Arg: "nil"},
		{Name: "Acquire negative holders", Call: func(*testing.T) error {
			_, err := in.Acquire(ctx, engine.Standard("lock-", -1), data)
			return err
		}, Want: engine.ErrBadDriver, Arg: "holders"},
		{Name: "AcquireFixed nil ctx", Call: func(*testing.T) error {
			_, err := in.AcquireFixed(nilCtx, "lock", "id")
			return err
		}, Want: session.ErrBadArgument, Arg: "nil context"},
		{Name: "TryAcquireFixed nil ctx", Call: func(*testing.T) error {
			_, err := in.TryAcquireFixed(nilCtx, "lock", "id")
			return err
		}, Want: session.ErrBadArgument, Arg: "nil context"},
		{Name: "AcquireFixed empty name", Call: func(*testing.T) error {
			_, err := in.AcquireFixed(ctx, "", "id")
			return err
		}, Want: session.ErrBadArgument, Arg: "node name"},
		{Name: "FixedHolder nil ctx", Call: func(t *testing.T) error {
			p, err := in.FixedHolder(nilCtx, "lock")
			if p != nil {
				t.Errorf("FixedHolder returned %v", p)
			}
			return err
		}, Want: session.ErrBadArgument, Arg: "nil context"},
		{Name: "Participants nil ctx", Call: func(t *testing.T) error {
			ps, err := in.Participants(nilCtx, lockDriver)
			if ps != nil {
				t.Errorf("Participants returned %v", ps)
			}
			return err
		}, Want: session.ErrBadArgument, Arg: "nil context"},
		{Name: "Participants nil driver", Call: func(*testing.T) error {
			_, err := in.Participants(ctx, nil)
			return err
		}, Want: engine.ErrBadDriver, Arg: "nil"},
		{Name: "GoroutineHolds.Add nil lease", Call: func(t *testing.T) error {
			var r engine.GoroutineHolds
			err := r.Add(nil)
			if n := r.Holds(); n != 0 {
				t.Errorf("Holds = %d after Add(nil)", n)
			}
			if l, n, err := r.Enter(); l != nil || n != 0 || err != nil {
				t.Errorf("Enter after Add(nil) = %v, %d, %v", l, n, err)
			}
			return err
		}, Want: session.ErrBadArgument, Arg: "nil lease"},
		{Name: "nil Lease Release", Call: func(*testing.T) error {
			var l *engine.Lease
			return l.Release(ctx)
		}, Want: session.ErrBadArgument, Arg: "nil lease"},
	})
}

// TestNilLease: a nil *Lease behaves as a lease that has ended: Done is
// closed, Err and the cause of Context match ErrBadArgument and name the nil
// lease, the accessors return zero values.
func TestNilLease(t *testing.T) {
	var l *engine.Lease
	p, _ := sessiontest.CatchPanic(func() error {
		select {
		case <-l.Done():
		default:
			t.Error("Done of a nil lease is not closed")
		}
		if err := l.Err(); !errors.Is(err, session.ErrBadArgument) || !strings.Contains(err.Error(), "nil lease") {
			t.Errorf("Err = %v", err)
		}
		ctx := l.Context()
		if ctx.Err() == nil || !errors.Is(context.Cause(ctx), session.ErrBadArgument) {
			t.Errorf("Context: err %v, cause %v", ctx.Err(), context.Cause(ctx))
		}
		if l.Token() != 0 || l.Path() != "" || l.Node() != "" || l.Seq() != 0 || l.ID() != "" || l.Epoch() != nil {
			t.Errorf("accessors of a nil lease: %d %q %q %d %q %v", l.Token(), l.Path(), l.Node(), l.Seq(), l.ID(), l.Epoch())
		}
		return nil
	})
	if p != nil {
		t.Fatalf("panic: %v", p)
	}
}

// TestReleaseNilContext: Release takes a nil ctx as context.Background(): a
// release is cleanup and is never refused, so the lease ends and its node
// goes.
func TestReleaseNilContext(t *testing.T) {
	ns := zktest.NewNamespace(t)
	raw := ns.Conn(t)
	in := newInternals(t, sessiontest.Connect(t, ns))
	l, err := in.Acquire(ctxT(t), lockDriver, []byte("id"))
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Release(nilCtx); err != nil {
		t.Fatalf("Release(nil) = %v", err)
	}
	if err := l.Err(); !errors.Is(err, recipes.ErrReleased) {
		t.Fatalf("Err after Release(nil) = %v", err)
	}
	waitChildren(t, raw, ns, 0)
}
