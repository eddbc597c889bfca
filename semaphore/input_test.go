package semaphore_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/zkrecipes/zkrecipes/semaphore"
	"github.com/zkrecipes/zkrecipes/session"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// Bad input gets a clear error, never a panic and never a node.
func TestBadInput(t *testing.T) {
	ns := zktest.NewNamespace(t)
	raw := ns.Conn(t)
	s := connect(t, ns)
	ctx := ctxT(t)

	for _, p := range []string{"", "sem", "/sem/", "/a/../b", "/a/./b", "/a\x00b", "//a"} {
		if _, err := semaphore.New(s, p, 1); !errors.Is(err, session.ErrBadArgument) {
			t.Errorf("New(path %q) = %v, want ErrBadArgument", p, err)
		}
	}
	for _, max := range []int{0, -1, semaphore.MaxCount + 1} {
		_, err := semaphore.New(s, semPath, max)
		if !errors.Is(err, session.ErrBadArgument) {
			t.Errorf("New(max %d) = %v, want ErrBadArgument", max, err)
		}
	}
	if _, err := semaphore.New(nil, semPath, 1); !errors.Is(err, session.ErrBadArgument) {
		t.Errorf("New(nil session) = %v", err)
	}
	if _, err := semaphore.NewMutex(nil, semPath); !errors.Is(err, session.ErrBadArgument) {
		t.Errorf("NewMutex(nil session) = %v", err)
	}
	if _, err := semaphore.NewShared(s, semPath, nil); !errors.Is(err, session.ErrBadArgument) {
		t.Errorf("NewShared(nil count) = %v", err)
	}
	other := connect(t, ns)
	if _, err := semaphore.NewShared(s, semPath, newCount(t, other, countPath, 1)); !errors.Is(err, session.ErrBadArgument) {
		t.Errorf("NewShared with another session's count = %v", err)
	}
	for name, o := range map[string]semaphore.Option{
		"nil option":   nil,
		"empty id":     semaphore.WithID(""),
		"NUL id":       semaphore.WithID("a\x00b"),
		"bad UTF-8 id": semaphore.WithID("\xff"),
		"huge id":      semaphore.WithID(strings.Repeat("x", 600<<10)),
		"nil logger":   semaphore.WithLogger(nil),
	} {
		if _, err := semaphore.New(s, semPath, 1, o); !errors.Is(err, session.ErrBadArgument) {
			t.Errorf("New with %s = %v, want ErrBadArgument", name, err)
		}
	}

	sem := newSem(t, s, 2)
	//lint:ignore SA1012 a nil context is the bad input under test
	if _, err := sem.Acquire(nil); !errors.Is(err, session.ErrBadArgument) { //nolint:staticcheck
		t.Errorf("Acquire(nil) = %v", err)
	}
	//lint:ignore SA1012 a nil context is the bad input under test
	if _, err := sem.TryAcquire(nil); !errors.Is(err, session.ErrBadArgument) { //nolint:staticcheck
		t.Errorf("TryAcquire(nil) = %v", err)
	}
	//lint:ignore SA1012 a nil context is the bad input under test
	if _, err := sem.Participants(nil); !errors.Is(err, session.ErrBadArgument) { //nolint:staticcheck
		t.Errorf("Participants(nil) = %v", err)
	}
	for _, n := range []int{0, -1, 3} {
		if _, err := sem.AcquireN(ctx, n); !errors.Is(err, session.ErrBadArgument) {
			t.Errorf("AcquireN(%d) of a maximum of 2 = %v, want ErrBadArgument", n, err)
		}
	}
	big := newSem(t, s, 100, semaphore.WithID(strings.Repeat("x", 100<<10)))
	if _, err := big.AcquireN(ctx, 10); !errors.Is(err, session.ErrBadArgument) {
		t.Errorf("AcquireN of 10 leases of a 100 KiB id = %v, want ErrBadArgument", err)
	}
	if ok, _, err := raw.Exists(ns.Path(semPath)); err != nil || ok {
		t.Fatalf("bad input created %s: %v %v", semPath, ok, err)
	}

	// A Release of a nil context still releases (as the engine's lease does).
	l, err := sem.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	//lint:ignore SA1012 a nil context is the input under test
	if err := l.Release(nil); err != nil { //nolint:staticcheck
		t.Fatalf("Release(nil) = %v", err)
	}
	if err := releaseAll(context.Background(), []*semaphore.Lease{nil, l}); err != nil {
		t.Fatalf("ReleaseAll with a nil lease = %v", err)
	}
	waitNodes(t, raw, ns, semaphore.LeasesDir, 0)
}

// Errors name the path as the user gave it, once, and say what is wrong.
func TestErrorText(t *testing.T) {
	ns := zktest.NewNamespace(t)
	s := connect(t, ns)
	_, err := semaphore.New(s, semPath, 0)
	if err == nil || err.Error() != `semaphore "/sem/a": bad argument: maximum 0, want 1 to 2147483647` {
		t.Errorf("New(max 0) = %q", err)
	}
	sem := newSem(t, s, 1)
	ctx := ctxT(t)
	l, err := sem.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(ctx)
	_, err = sem.TryAcquire(ctx)
	if err == nil || err.Error() != `semaphore "/sem/a": busy` {
		t.Errorf("TryAcquire when full = %q", err)
	}
	_, err = semaphore.New(s, "sem", 1)
	if err == nil || err.Error() != `semaphore "sem": bad path: must start with '/'` {
		t.Errorf("New(bad path) = %q", err)
	}
	other := newSem(t, s, 1)
	if err := other.Close(); err != nil {
		t.Fatal(err)
	}
	_, err = other.Participants(ctx)
	if err == nil || err.Error() != `semaphore "/sem/a": closed` {
		t.Errorf("Participants after Close = %q", err)
	}
}
