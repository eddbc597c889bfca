package mutex_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/internal/testkit/leasetest"
	"github.com/zkrecipes/zkrecipes/internal/testkit/sessiontest"
	"github.com/zkrecipes/zkrecipes/mutex"
	"github.com/zkrecipes/zkrecipes/recipes"
	"github.com/zkrecipes/zkrecipes/session"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// nilCtx is a nil context.Context, as a careless caller passes it.
var nilCtx context.Context

// noLease checks that a call that failed returned nothing but its error.
func noLease[L comparable](t *testing.T, l L, err error) error {
	t.Helper()
	var zero L
	if l != zero {
		t.Errorf("returned %v with %v", l, err)
	}
	return err
}

// nilLocker is a Locker whose Lock and TryLock return neither a lease nor an
// error.
type nilLocker struct{}

func (nilLocker) Lock(context.Context) (*mutex.Lease, error)    { return nil, nil }
func (nilLocker) TryLock(context.Context) (*mutex.Lease, error) { return nil, nil }
func (nilLocker) Path() string                                  { return "/nil" }

// TestNilInputs: every lock kind, Multi and the leases refuse a nil context,
// a nil session, a typed nil lock and a nil lease with an error matching the
// package's sentinel, before they start anything.
func TestNilInputs(t *testing.T) {
	ns := zktest.NewNamespace(t)
	raw := ns.Conn(t)
	s := connect(t, ns)
	ctx := ctxT(t)
	m := newMutex(t, s)
	nr, err := mutex.New(s, lockPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nr.Close() })
	nf, err := mutex.NewNonFair(s, lockPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nf.Close() })
	multi, err := mutex.NewMulti(m, nf)
	if err != nil {
		t.Fatal(err)
	}

	cases := []sessiontest.NilCase{
		{Name: "New nil session", Call: func(t *testing.T) error {
			m, err := mutex.NewReentrant(nil, lockPath)
			return noLease(t, m, err)
		}, Want: session.ErrBadArgument, Arg: "nil session"},
		{Name: "NewNonFair nil session", Call: func(*testing.T) error {
			_, err := mutex.NewNonFair(nil, lockPath)
			return err
		}, Want: session.ErrBadArgument, Arg: "nil session"},
		{Name: "NewNonReentrant nil option", Call: func(*testing.T) error {
			_, err := mutex.New(s, lockPath, nil)
			return err
		}, Want: session.ErrBadArgument, Arg: "nil option"},
		{Name: "NewMulti typed nil Mutex", Call: func(t *testing.T) error {
			ml, err := mutex.NewMulti(m, (*mutex.Reentrant)(nil))
			return noLease(t, ml, err)
		}, Want: session.ErrBadArgument, Arg: "lock 1"},
		{Name: "NewMulti typed nil NonFair", Call: func(*testing.T) error {
			_, err := mutex.NewMulti((*mutex.NonFair)(nil), m)
			return err
		}, Want: session.ErrBadArgument, Arg: "lock 0"},
		{Name: "NewMulti typed nil NonReentrant", Call: func(*testing.T) error {
			_, err := mutex.NewMulti(m, nf, (*mutex.Mutex)(nil))
			return err
		}, Want: session.ErrBadArgument, Arg: "lock 2"},
		{Name: "NewMulti nil Locker", Call: func(*testing.T) error {
			_, err := mutex.NewMulti(m, nil)
			return err
		}, Want: session.ErrBadArgument, Arg: "lock 1"},
		{Name: "NewMulti none", Call: func(*testing.T) error {
			_, err := mutex.NewMulti()
			return err
		}, Want: session.ErrBadArgument, Arg: "no locks"},
		{Name: "Multi.Lock nil ctx", Call: func(t *testing.T) error {
			ml, err := multi.Lock(nilCtx)
			return noLease(t, ml, err)
		}, Want: session.ErrBadArgument, Arg: "nil context"},
		{Name: "Multi.TryLock nil ctx", Call: func(t *testing.T) error {
			ml, err := multi.TryLock(nilCtx)
			return noLease(t, ml, err)
		}, Want: session.ErrBadArgument, Arg: "nil context"},
		{Name: "Multi.Lock of a Locker returning no lease", Call: func(t *testing.T) error {
			multi, err := mutex.NewMulti(nilLocker{}, m)
			if err != nil {
				t.Fatal(err)
			}
			ml, err := multi.Lock(ctx)
			return noLease(t, ml, err)
		}, Want: session.ErrBadArgument, Arg: "nil lease"},
		{Name: "nil Lease Release", Call: func(*testing.T) error {
			var l *mutex.Lease
			return l.Release(ctx)
		}, Want: session.ErrBadArgument, Arg: "nil lease"},
		{Name: "nil MultiLease Release", Call: func(*testing.T) error {
			var ml *mutex.MultiLease
			return ml.Release(ctx)
		}, Want: session.ErrBadArgument, Arg: "nil multi-lease"},
	}
	for _, k := range []struct {
		name string
		lk   interface {
			mutex.Locker
			Holder(context.Context) (recipes.Participant, bool, error)
		}
	}{{"Reentrant", m}, {"Mutex", nr}, {"NonFair", nf}} {
		cases = append(cases,
			sessiontest.NilCase{Name: k.name + ".Lock nil ctx", Call: func(t *testing.T) error {
				l, err := k.lk.Lock(nilCtx)
				return noLease(t, l, err)
			}, Want: session.ErrBadArgument, Arg: "nil context"},
			sessiontest.NilCase{Name: k.name + ".TryLock nil ctx", Call: func(t *testing.T) error {
				l, err := k.lk.TryLock(nilCtx)
				return noLease(t, l, err)
			}, Want: session.ErrBadArgument, Arg: "nil context"},
			sessiontest.NilCase{Name: k.name + ".Holder nil ctx", Call: func(t *testing.T) error {
				p, ok, err := k.lk.Holder(nilCtx)
				if ok || p != (recipes.Participant{}) {
					t.Errorf("Holder returned %+v, %v", p, ok)
				}
				return err
			}, Want: session.ErrBadArgument, Arg: "nil context"},
		)
		if pl, ok := k.lk.(interface {
			Participants(context.Context) ([]recipes.Participant, error)
		}); ok {
			cases = append(cases, sessiontest.NilCase{Name: k.name + ".Participants nil ctx", Call: func(t *testing.T) error {
				ps, err := pl.Participants(nilCtx)
				if ps != nil {
					t.Errorf("Participants returned %v", ps)
				}
				return err
			}, Want: session.ErrBadArgument, Arg: "nil context"})
		}
	}
	sessiontest.CheckNilCases(t, raw, ns.Root, cases)
}

// TestNilLeases: nil *Lease and *MultiLease behave as leases that have
// ended: Done is closed, Err and the cause of Context match ErrBadArgument and
// name the nil lease, the accessors return zero values.
func TestNilLeases(t *testing.T) {
	var l *mutex.Lease
	var ml *mutex.MultiLease
	p, _ := sessiontest.CatchPanic(func() error {
		for _, h := range []struct {
			name string
			h    interface {
				Done() <-chan struct{}
				Err() error
				Context() context.Context
			}
		}{{"Lease", l}, {"MultiLease", ml}} {
			select {
			case <-h.h.Done():
			default:
				t.Errorf("Done of a nil %s is not closed", h.name)
			}
			if err := h.h.Err(); !errors.Is(err, session.ErrBadArgument) || !strings.Contains(err.Error(), "nil") {
				t.Errorf("Err of a nil %s = %v", h.name, err)
			}
			ctx := h.h.Context()
			if ctx.Err() == nil || !errors.Is(context.Cause(ctx), session.ErrBadArgument) {
				t.Errorf("Context of a nil %s: err %v, cause %v", h.name, ctx.Err(), context.Cause(ctx))
			}
		}
		// Token and Node are the Lease's accessors (Path, SessionID and
		// ID are no longer part of the API).
		if l.Token() != 0 || l.Node() != "" {
			t.Errorf("accessors of a nil Lease: %d %q", l.Token(), l.Node())
		}
		if ls := ml.Leases(); ls != nil {
			t.Errorf("Leases of a nil MultiLease = %v", ls)
		}
		return nil
	})
	if p != nil {
		t.Fatalf("panic: %v", p)
	}
}

// TestNilLeaseMethods: every method of a nil *Lease and *MultiLease, each in
// its own subtest, behaves as that of a lease that has ended with an error
// matching session.ErrBadArgument (the same checks as for the other lease
// types).
func TestNilLeaseMethods(t *testing.T) {
	ctx := context.Background()
	t.Run("Lease", func(t *testing.T) {
		var l *mutex.Lease
		leasetest.CheckNil(t, l, "mutex", "nil lease",
			leasetest.Call{Name: "Release", Call: func(*testing.T) error { return l.Release(ctx) }},
			leasetest.Call{Name: "Commit", Call: func(t *testing.T) error {
				res, err := l.Commit(ctx, &zk.CreateRequest{Path: "/x"})
				if res != nil {
					t.Errorf("Commit of a nil lease returned %v", res)
				}
				return err
			}})
	})
	t.Run("MultiLease", func(t *testing.T) {
		var ml *mutex.MultiLease
		leasetest.CheckNil(t, ml, "mutex", "nil multi-lease",
			leasetest.Call{Name: "Release", Call: func(*testing.T) error { return ml.Release(ctx) }},
			leasetest.Call{Name: "Leases", NoError: true, Call: func(t *testing.T) error {
				if ls := ml.Leases(); ls != nil {
					t.Errorf("Leases of a nil MultiLease = %v", ls)
				}
				return nil
			}})
	})
}

// TestReentrantLockNilContext: a goroutine that holds a Mutex and calls
// Lock(nil) gets the error and no extra hold: its one Release releases the
// lock.
func TestReentrantLockNilContext(t *testing.T) {
	ns := zktest.NewNamespace(t)
	raw := ns.Conn(t)
	m := newMutex(t, connect(t, ns))
	ctx := ctxT(t)
	l, err := m.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	p, err := sessiontest.CatchPanic(func() error {
		l2, err := m.Lock(nilCtx)
		if l2 != nil {
			t.Errorf("Lock(nil) while holding returned a lease")
		}
		return err
	})
	if p != nil {
		t.Fatalf("panic: %v", p)
	}
	if !errors.Is(err, session.ErrBadArgument) || !strings.Contains(err.Error(), "nil context") {
		t.Fatalf("Lock(nil) while holding = %v", err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if mutex.HeldByMe(m) {
		t.Fatal("still held after the one Release")
	}
	waitKids(t, raw, ns, 0)
}

// TestUnlockNilContext: Release (of a Lease and of a MultiLease) takes a nil
// ctx as context.Background(): a release is cleanup and is never refused, so
// the locks are released and their nodes go.
func TestUnlockNilContext(t *testing.T) {
	ns := zktest.NewNamespace(t)
	raw := ns.Conn(t)
	s := connect(t, ns)
	ctx := ctxT(t)
	m := newMutex(t, s)
	l, err := m.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Release(nilCtx); err != nil {
		t.Fatalf("Release(nil) = %v", err)
	}
	if err := l.Err(); !errors.Is(err, recipes.ErrReleased) {
		t.Fatalf("Err after Release(nil) = %v", err)
	}
	waitKids(t, raw, ns, 0)

	multi, err := mutex.NewMulti(m)
	if err != nil {
		t.Fatal(err)
	}
	ml, err := multi.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	waitKids(t, raw, ns, 1)
	if err := ml.Release(nilCtx); err != nil {
		t.Fatalf("MultiLease.Release(nil) = %v", err)
	}
	if err := ml.Err(); !errors.Is(err, recipes.ErrReleased) {
		t.Fatalf("Err after MultiLease.Release(nil) = %v", err)
	}
	waitKids(t, raw, ns, 0)
}
