package rwlock_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/internal/testkit/sessiontest"
	"github.com/zkrecipes/zkrecipes/recipes"
	"github.com/zkrecipes/zkrecipes/rwlock"
	"github.com/zkrecipes/zkrecipes/session"
	"github.com/zkrecipes/zkrecipes/zktest"
)

type constructor func(*session.Session, string, ...rwlock.Option) (locker, error)

var constructors = map[string]constructor{
	"rwmutex": func(s *session.Session, p string, o ...rwlock.Option) (locker, error) {
		return rwlock.New(s, p, o...)
	},
	"reentrant": func(s *session.Session, p string, o ...rwlock.Option) (locker, error) {
		return rwlock.NewReentrant(s, p, o...)
	},
}

// TestBadInput: bad paths, a nil session, bad options and nil contexts give
// clear errors, no panic, and create nothing.
func TestBadInput(t *testing.T) {
	ns := zktest.NewNamespace(t)
	raw := ns.Conn(t)
	s := connect(t, ns)
	ctx := ctxT(t)
	for name, mk := range constructors {
		t.Run(name, func(t *testing.T) {
			for _, p := range []string{"", "locks", "/", "/locks/", "/a//b", "/a/./b", "/a/../b", "/a\x00b", "/a\x01"} {
				l, err := mk(s, p)
				if err == nil || !errors.Is(err, session.ErrBadArgument) {
					t.Errorf("path %q: %v, %v; want ErrBadArgument", p, l, err)
				}
			}
			if _, err := mk(nil, lockPath); !errors.Is(err, session.ErrBadArgument) {
				t.Errorf("nil session: %v", err)
			}
			for what, o := range map[string]rwlock.Option{
				"nil option":   nil,
				"nil logger":   rwlock.WithLogger(nil),
				"empty id":     rwlock.WithID(""),
				"id with NUL":  rwlock.WithID("a\x00b"),
				"id not UTF-8": rwlock.WithID("\xff"),
				"id too long":  rwlock.WithID(strings.Repeat("x", 513<<10)),
			} {
				if _, err := mk(s, lockPath, o); !errors.Is(err, session.ErrBadArgument) {
					t.Errorf("%s: %v, want ErrBadArgument", what, err)
				}
			}
			lk, err := mk(s, lockPath)
			if err != nil {
				t.Fatal(err)
			}
			defer lk.Close()
			var nilCtx context.Context
			if _, err := lk.Lock(nilCtx); !errors.Is(err, session.ErrBadArgument) {
				t.Errorf("Lock(nil): %v", err)
			}
			if _, err := lk.TryLock(nilCtx); !errors.Is(err, session.ErrBadArgument) {
				t.Errorf("TryLock(nil): %v", err)
			}
			if _, err := lk.RLock(nilCtx); !errors.Is(err, session.ErrBadArgument) {
				t.Errorf("RLock(nil): %v", err)
			}
			if _, err := lk.TryRLock(nilCtx); !errors.Is(err, session.ErrBadArgument) {
				t.Errorf("TryRLock(nil): %v", err)
			}
			if _, err := lk.Participants(nilCtx); !errors.Is(err, session.ErrBadArgument) {
				t.Errorf("Participants(nil): %v", err)
			}
			// Release with a nil ctx still releases (as a background ctx).
			l, err := lk.RLock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if err := l.Release(nilCtx); err != nil || !errors.Is(l.Err(), recipes.ErrReleased) {
				t.Errorf("Release(nil): %v, lease %v", err, l.Err())
			}
			waitEmpty(t, raw, ns)
		})
	}
	// The good calls above created the lock directories, containers that
	// the server reaps once empty (zktest checks every 500 ms): the reaper
	// may have deleted them already.
	for _, p := range []string{lockPath, "/locks"} {
		if err := raw.Delete(ns.Path(p), -1); err != nil && !errors.Is(err, zk.ErrNoNode) {
			t.Fatal(err)
		}
	}
	children, _, err := raw.Children(ns.Root)
	if err != nil {
		t.Fatal(err)
	}
	if len(children) != 0 {
		t.Fatalf("bad input created nodes: %q", children)
	}
}

// TestUseAfterClose: every call after Close returns ErrClosed and creates
// nothing; Close is idempotent; a closed session is reported.
func TestUseAfterClose(t *testing.T) {
	ns := zktest.NewNamespace(t)
	raw := ns.Conn(t)
	s := connect(t, ns)
	ctx := ctxT(t)
	for name, mk := range constructors {
		t.Run(name, func(t *testing.T) {
			lk, err := mk(s, lockPath)
			if err != nil {
				t.Fatal(err)
			}
			for i := 0; i < 2; i++ {
				if err := lk.Close(); err != nil {
					t.Fatal(err)
				}
			}
			for _, side := range []Side{Read, Write} {
				for _, try := range []bool{false, true} {
					if _, err := acquire(ctx, lk, side, try); !errors.Is(err, session.ErrClosed) {
						t.Errorf("%v acquire (try %v) after Close = %v", side, try, err)
					}
				}
			}
			if _, err := lk.Participants(ctx); !errors.Is(err, session.ErrClosed) {
				t.Errorf("Participants after Close = %v", err)
			}
		})
	}
	if ok, _, _ := raw.Exists(ns.Path(lockPath)); ok {
		t.Fatal("lock directory created after Close")
	}
	s2 := connect(t, ns)
	m := newRWMutex(t, s2)
	s2.Close()
	if _, err := m.RLock(ctx); !errors.Is(err, session.ErrClosed) {
		t.Fatalf("RLock on a closed session = %v", err)
	}
}

// TestCloseWhileBusy: Close while leases of both sides are held and
// acquires of both sides wait: the waiting acquires return ErrClosed (their
// nodes deleted), the held leases end with ErrClosed, every node goes, and
// Release afterwards returns nil. Another lock on the same path is not
// affected.
func TestCloseWhileBusy(t *testing.T) {
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			ns := zktest.NewNamespace(t)
			raw := ns.Conn(t)
			ctx := ctxT(t)
			other := k.make(t, connect(t, ns))
			s := connect(t, ns)
			lk := k.make(t, s)

			ol, err := other.RLock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			r1, err := lk.RLock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var clock atomic.Int64
			ww := lockAsync(t, ctx, lk, Write, &clock) // waits for both readers
			waitNodes(t, raw, ns, 3)
			wr := lockAsync(t, ctx, lk, Read, &clock) // waits for the writer
			waitNodes(t, raw, ns, 4)
			ow := lockAsync(t, ctx, other, Write, &clock) // other's writer, last
			waitNodes(t, raw, ns, 5)

			if err := lk.Close(); err != nil {
				t.Fatal(err)
			}
			for what, a := range map[string]*async{"waiting Lock": ww, "waiting RLock": wr} {
				if r := a.result(t); !errors.Is(r.err, session.ErrClosed) {
					t.Fatalf("%s after Close = %v", what, r.err)
				}
			}
			if err := sessiontest.WaitDone(t, r1, wait); !errors.Is(err, session.ErrClosed) {
				t.Fatalf("held read lease after Close: %v", err)
			}
			if err := r1.Release(ctx); err != nil {
				t.Fatalf("Release after Close: %v", err)
			}
			// Only other's nodes are left; its reader still holds, its
			// writer gets the lock once that reader unlocks.
			zktest.Eventually(t, wait, func() bool { return len(nodes(t, raw, ns)) == 2 }, "nodes of the closed lock left")
			if ol.Err() != nil {
				t.Fatalf("the other lock's lease ended: %v", ol.Err())
			}
			ow.pending(t, "other's writer behind other's reader")
			if err := ol.Release(ctx); err != nil {
				t.Fatal(err)
			}
			ow.held(t)
			ow.unlock(t)
			waitEmpty(t, raw, ns)
		})
	}
}
