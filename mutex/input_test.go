package mutex_test

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/internal/testkit/sessiontest"
	"github.com/zkrecipes/zkrecipes/mutex"
	"github.com/zkrecipes/zkrecipes/recipes"
	"github.com/zkrecipes/zkrecipes/session"
	"github.com/zkrecipes/zkrecipes/zktest"
)

type constructor func(*session.Session, string, ...mutex.Option) (mutex.Locker, error)

var constructors = map[string]constructor{
	"mutex": func(s *session.Session, p string, o ...mutex.Option) (mutex.Locker, error) {
		return mutex.NewReentrant(s, p, o...)
	},
	"nonreentrant": func(s *session.Session, p string, o ...mutex.Option) (mutex.Locker, error) {
		return mutex.New(s, p, o...)
	},
	"nonfair": func(s *session.Session, p string, o ...mutex.Option) (mutex.Locker, error) {
		return mutex.NewNonFair(s, p, o...)
	},
}

// TestBadInput: bad paths, a nil session and bad options give clear errors
// and create nothing.
func TestBadInput(t *testing.T) {
	ns := zktest.NewNamespace(t)
	raw := ns.Conn(t)
	s := connect(t, ns)
	for name, mk := range constructors {
		t.Run(name, func(t *testing.T) {
			for _, p := range []string{"", "locks", "/", "/locks/", "/a//b", "/a/./b", "/a/../b", "/a\x00b", "/a\x01"} {
				l, err := mk(s, p)
				if err == nil || !errors.Is(err, session.ErrBadArgument) || !strings.Contains(err.Error(), "bad path") {
					t.Errorf("path %q: %v, %v; want ErrBadArgument (bad path)", p, l, err)
				}
			}
			if _, err := mk(nil, lockPath); !errors.Is(err, session.ErrBadArgument) {
				t.Errorf("nil session: %v", err)
			}
			if _, err := mk(s, lockPath, nil); !errors.Is(err, session.ErrBadArgument) {
				t.Errorf("nil option: %v", err)
			}
			if _, err := mk(s, lockPath, mutex.WithLogger(nil)); !errors.Is(err, session.ErrBadArgument) {
				t.Errorf("nil logger: %v", err)
			}
			// The cleanup timeout is no longer a public option; the
			// engine's option still refuses a zero one.
			lk, err := mk(s, lockPath)
			if err != nil {
				t.Fatal(err)
			}
			if err := mutex.SetCleanupTimeout(s, lk, 0); !errors.Is(err, session.ErrBadArgument) {
				t.Errorf("zero cleanup timeout: %v", err)
			}
			if err := lk.(io.Closer).Close(); err != nil {
				t.Fatal(err)
			}
		})
	}
	children, _, err := raw.Children(ns.Root)
	if err != nil {
		t.Fatal(err)
	}
	if len(children) != 0 {
		t.Fatalf("bad input created nodes: %q", children)
	}
}

// TestUseAfterClose: Lock, TryLock, Holder after Close return ErrClosed and
// create nothing; Close is idempotent.
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
			c := lk.(interface{ Close() error })
			if err := c.Close(); err != nil {
				t.Fatal(err)
			}
			if err := c.Close(); err != nil {
				t.Fatal(err)
			}
			if _, err := lk.Lock(ctx); !errors.Is(err, session.ErrClosed) {
				t.Errorf("Lock after Close = %v", err)
			}
			if _, err := lk.TryLock(ctx); !errors.Is(err, session.ErrClosed) {
				t.Errorf("TryLock after Close = %v", err)
			}
			if h, ok := lk.(interface {
				Holder(context.Context) (recipes.Participant, bool, error)
			}); ok {
				if _, _, err := h.Holder(ctx); !errors.Is(err, session.ErrClosed) {
					t.Errorf("Holder after Close = %v", err)
				}
			}
		})
	}
	if ok, _, _ := raw.Exists(ns.Path(lockPath)); ok {
		t.Fatal("lock directory created after Close")
	}

	// A closed session.
	s2 := connect(t, ns)
	m := newMutex(t, s2)
	s2.Close()
	if _, err := m.Lock(ctx); !errors.Is(err, session.ErrClosed) {
		t.Fatalf("Lock on a closed session = %v", err)
	}
	// A nil context is refused, not a panic.
	m3 := newMutex(t, s)
	var nilCtx context.Context
	if _, err := m3.Lock(nilCtx); err == nil {
		t.Fatal("Lock(nil) succeeded")
	}
}

// TestCloseWhileWaiting: Close makes a waiting Lock return ErrClosed (its
// node deleted) and ends the held leases of that lock with ErrClosed.
func TestCloseWhileWaiting(t *testing.T) {
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			ns := zktest.NewNamespace(t)
			raw := ns.Conn(t)
			ctx := ctxT(t)
			holder := k.make(t, connect(t, ns))
			ws := connect(t, ns)
			waiter := k.make(t, ws)
			hl, err := holder.Lock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			got := lockAsync(t, ctx, waiter, new(atomic.Int64))
			waitQueued(t, ns, k, ws)
			waiter.(interface{ Close() error }).Close()
			r := got.result(t)
			if !errors.Is(r.err, session.ErrClosed) {
				t.Fatalf("waiting Lock after Close = %v", r.err)
			}
			if k.fair {
				if ks := lockKids(t, raw, ns); len(ks) != 1 || ks[0] != hl.Node() {
					t.Fatalf("nodes %q", ks)
				}
			}
			holder.(interface{ Close() error }).Close()
			if err := sessiontest.WaitDone(t, hl, wait); !errors.Is(err, session.ErrClosed) {
				t.Fatalf("held lease after Close: %v", err)
			}
			zktest.Eventually(t, wait, func() bool {
				k, _, err := raw.Children(ns.Path(lockPath))
				return err == nil && len(k) == 0 || errors.Is(err, zk.ErrNoNode)
			}, "nodes left after Close")
			if err := hl.Release(ctx); err != nil {
				t.Fatalf("Release after Close: %v", err)
			}
		})
	}
}
