package recipes_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/go-zookeeper/zk"
	"go.uber.org/goleak"

	"github.com/zkrecipes/zkrecipes/internal/sessiontest"
	"github.com/zkrecipes/zkrecipes/recipes"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// nilCtx is a nil context.Context, as a careless caller passes it.
var nilCtx context.Context

// nilCase is one call of the API with a nil or otherwise bad input. call
// returns the call's error; it fails t itself when the call returns
// something besides the error (a lease, a participant).
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

	checkNilCases(t, raw, ns.Root, []nilCase{
		{"NewEngine nil session", func(t *testing.T) error {
			in, err := recipes.NewEngine(nil, dir)
			if in != nil {
				t.Errorf("NewEngine returned an engine")
			}
			return err
		}, recipes.ErrNilSession, "nil session"},
		{"NewEngine nil option", func(*testing.T) error {
			_, err := recipes.NewEngine(s, dir, nil)
			return err
		}, recipes.ErrBadOption, "nil option"},
		{"NewEngine empty path", func(*testing.T) error {
			_, err := recipes.NewEngine(s, "")
			return err
		}, recipes.ErrBadPath, "empty"},
		{"Acquire nil ctx", func(t *testing.T) error {
			l, err := in.Acquire(nilCtx, lockDriver, data)
			if l != nil {
				t.Errorf("Acquire returned a lease")
			}
			return err
		}, recipes.ErrBadOption, "nil context"},
		{"TryAcquire nil ctx", func(*testing.T) error {
			_, err := in.TryAcquire(nilCtx, lockDriver, data)
			return err
		}, recipes.ErrBadOption, "nil context"},
		{"Acquire nil driver", func(*testing.T) error {
			_, err := in.Acquire(ctx, nil, data)
			return err
		}, recipes.ErrBadDriver, "nil"},
		{"Acquire typed nil driver", func(*testing.T) error {
			_, err := in.Acquire(ctx, (*ptrDriver)(nil), data)
			return err
		}, recipes.ErrBadDriver, "nil"},
		{"Acquire negative MaxLeases", func(*testing.T) error {
			_, err := in.Acquire(ctx, recipes.StandardDriver{Name: "lock-", MaxLeases: -1}, data)
			return err
		}, recipes.ErrBadDriver, "MaxLeases"},
		{"AcquireFixed nil ctx", func(*testing.T) error {
			_, err := in.AcquireFixed(nilCtx, "lock", "id")
			return err
		}, recipes.ErrBadOption, "nil context"},
		{"TryAcquireFixed nil ctx", func(*testing.T) error {
			_, err := in.TryAcquireFixed(nilCtx, "lock", "id")
			return err
		}, recipes.ErrBadOption, "nil context"},
		{"AcquireFixed empty name", func(*testing.T) error {
			_, err := in.AcquireFixed(ctx, "", "id")
			return err
		}, recipes.ErrBadPath, "node name"},
		{"FixedHolder nil ctx", func(t *testing.T) error {
			p, err := in.FixedHolder(nilCtx, "lock")
			if p != nil {
				t.Errorf("FixedHolder returned %v", p)
			}
			return err
		}, recipes.ErrBadOption, "nil context"},
		{"Participants nil ctx", func(t *testing.T) error {
			ps, err := in.Participants(nilCtx, lockDriver)
			if ps != nil {
				t.Errorf("Participants returned %v", ps)
			}
			return err
		}, recipes.ErrBadOption, "nil context"},
		{"Participants typed nil driver", func(*testing.T) error {
			_, err := in.Participants(ctx, (*ptrDriver)(nil))
			return err
		}, recipes.ErrBadDriver, "nil"},
		{"GoroutineHolds.Add nil lease", func(t *testing.T) error {
			var r recipes.GoroutineHolds
			err := r.Add(nil)
			if n := r.Holds(); n != 0 {
				t.Errorf("Holds = %d after Add(nil)", n)
			}
			if l, n, err := r.Enter(); l != nil || n != 0 || err != nil {
				t.Errorf("Enter after Add(nil) = %v, %d, %v", l, n, err)
			}
			return err
		}, recipes.ErrBadOption, "nil lease"},
		{"nil Lease Release", func(*testing.T) error {
			var l *recipes.Lease
			return l.Release(ctx)
		}, recipes.ErrBadOption, "nil lease"},
	})
}

// TestNilLease: a nil *Lease behaves as a lease that has ended: Done is
// closed, Err and the cause of Context match ErrBadOption and name the nil
// lease, the accessors return zero values.
func TestNilLease(t *testing.T) {
	var l *recipes.Lease
	p, _ := catchPanic(func() error {
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
