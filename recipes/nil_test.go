package recipes_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/zkrecipes/zkrecipes/internal/sessiontest"
	"github.com/zkrecipes/zkrecipes/recipes"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// nilCtx is a nil context.Context, as a careless caller passes it.
var nilCtx context.Context

// ptrDriver is a Driver with pointer receivers that read their receiver, so
// a nil *ptrDriver panics when used.
type ptrDriver struct{ recipes.StandardDriver }

func (d *ptrDriver) Marker() string    { return d.StandardDriver.Marker() }
func (d *ptrDriver) Markers() []string { return d.StandardDriver.Markers() }
func (d *ptrDriver) Decide(sorted []recipes.Child, self int) (bool, string, error) {
	return d.StandardDriver.Decide(sorted, self)
}

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
		{Name: "NewEngine nil session", Call: func(t *testing.T) error {
			in, err := recipes.NewEngine(nil, dir)
			if in != nil {
				t.Errorf("NewEngine returned an engine")
			}
			return err
		}, Want: recipes.ErrNilSession, Arg: "nil session"},
		{Name: "NewEngine nil option", Call: func(*testing.T) error {
			_, err := recipes.NewEngine(s, dir, nil)
			return err
		}, Want: recipes.ErrBadOption, Arg: "nil option"},
		{Name: "NewEngine empty path", Call: func(*testing.T) error {
			_, err := recipes.NewEngine(s, "")
			return err
		}, Want: recipes.ErrBadPath, Arg: "empty"},
		{Name: "Acquire nil ctx", Call: func(t *testing.T) error {
			l, err := in.Acquire(nilCtx, lockDriver, data)
			if l != nil {
				t.Errorf("Acquire returned a lease")
			}
			return err
		}, Want: recipes.ErrBadOption, Arg: "nil context"},
		{Name: "TryAcquire nil ctx", Call: func(*testing.T) error {
			_, err := in.TryAcquire(nilCtx, lockDriver, data)
			return err
		}, Want: recipes.ErrBadOption, Arg: "nil context"},
		{Name: "Acquire nil driver", Call: func(*testing.T) error {
			_, err := in.Acquire(ctx, nil, data)
			return err
		}, Want: recipes.ErrBadDriver, Arg: "nil"},
		{Name: "Acquire typed nil driver", Call: func(*testing.T) error {
			_, err := in.Acquire(ctx, (*ptrDriver)(nil), data)
			return err
		}, Want: recipes.ErrBadDriver, Arg: "nil"},
		{Name: "Acquire negative MaxLeases", Call: func(*testing.T) error {
			_, err := in.Acquire(ctx, recipes.StandardDriver{Name: "lock-", MaxLeases: -1}, data)
			return err
		}, Want: recipes.ErrBadDriver, Arg: "MaxLeases"},
		{Name: "AcquireFixed nil ctx", Call: func(*testing.T) error {
			_, err := in.AcquireFixed(nilCtx, "lock", "id")
			return err
		}, Want: recipes.ErrBadOption, Arg: "nil context"},
		{Name: "TryAcquireFixed nil ctx", Call: func(*testing.T) error {
			_, err := in.TryAcquireFixed(nilCtx, "lock", "id")
			return err
		}, Want: recipes.ErrBadOption, Arg: "nil context"},
		{Name: "AcquireFixed empty name", Call: func(*testing.T) error {
			_, err := in.AcquireFixed(ctx, "", "id")
			return err
		}, Want: recipes.ErrBadPath, Arg: "node name"},
		{Name: "FixedHolder nil ctx", Call: func(t *testing.T) error {
			p, err := in.FixedHolder(nilCtx, "lock")
			if p != nil {
				t.Errorf("FixedHolder returned %v", p)
			}
			return err
		}, Want: recipes.ErrBadOption, Arg: "nil context"},
		{Name: "Participants nil ctx", Call: func(t *testing.T) error {
			ps, err := in.Participants(nilCtx, lockDriver)
			if ps != nil {
				t.Errorf("Participants returned %v", ps)
			}
			return err
		}, Want: recipes.ErrBadOption, Arg: "nil context"},
		{Name: "Participants typed nil driver", Call: func(*testing.T) error {
			_, err := in.Participants(ctx, (*ptrDriver)(nil))
			return err
		}, Want: recipes.ErrBadDriver, Arg: "nil"},
		{Name: "GoroutineHolds.Add nil lease", Call: func(t *testing.T) error {
			var r recipes.GoroutineHolds
			err := r.Add(nil)
			if n := r.Holds(); n != 0 {
				t.Errorf("Holds = %d after Add(nil)", n)
			}
			if l, n, err := r.Enter(); l != nil || n != 0 || err != nil {
				t.Errorf("Enter after Add(nil) = %v, %d, %v", l, n, err)
			}
			return err
		}, Want: recipes.ErrBadOption, Arg: "nil lease"},
		{Name: "nil Lease Release", Call: func(*testing.T) error {
			var l *recipes.Lease
			return l.Release(ctx)
		}, Want: recipes.ErrBadOption, Arg: "nil lease"},
	})
}

// TestNilLease: a nil *Lease behaves as a lease that has ended: Done is
// closed, Err and the cause of Context match ErrBadOption and name the nil
// lease, the accessors return zero values.
func TestNilLease(t *testing.T) {
	var l *recipes.Lease
	p, _ := sessiontest.CatchPanic(func() error {
		select {
		case <-l.Done():
		default:
			t.Error("Done of a nil lease is not closed")
		}
		if err := l.Err(); !errors.Is(err, recipes.ErrBadOption) || !strings.Contains(err.Error(), "nil lease") {
			t.Errorf("Err = %v", err)
		}
		ctx := l.Context()
		if ctx.Err() == nil || !errors.Is(context.Cause(ctx), recipes.ErrBadOption) {
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
