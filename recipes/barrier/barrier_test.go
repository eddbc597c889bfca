package barrier_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/zkrecipes/zkrecipes/internal/testkit/sessiontest"
	"github.com/zkrecipes/zkrecipes/recipes/barrier"
	"github.com/zkrecipes/zkrecipes/session"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// Wait returns at once when the barrier is not set; Set makes one
// persistent node (set twice, it stays one) with the id as data; Wait then
// blocks on its watch until Remove, which is idempotent.
func TestBarrierSetWaitRemove(t *testing.T) {
	ns := zktest.NewNamespace(t)
	raw := ns.Conn(t)
	ctx := ctxT(t)
	s := sessiontest.Connect(t, ns)
	b, err := barrier.New(s, bpath, barrier.WithID("setter"))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := b.Wait(ctx); err != nil {
		t.Fatalf("Wait on a barrier not set = %v", err)
	}
	for i := 0; i < 2; i++ {
		if err := b.Set(ctx); err != nil {
			t.Fatal(err)
		}
	}
	data, st, err := raw.Get(ns.Path(bpath))
	if err != nil || string(data) != "setter" || st.EphemeralOwner != 0 {
		t.Fatalf("barrier node %q %+v, %v", data, st, err)
	}
	ws := sessiontest.Connect(t, ns)
	wb, err := barrier.New(ws, bpath)
	if err != nil {
		t.Fatal(err)
	}
	defer wb.Close()
	waited := async(func() error { return wb.Wait(ctx) })
	zktest.Eventually(t, wait, func() bool { return sessiontest.Core(ws).WatchCount() > 0 }, "Wait sets its watch")
	pending(t, "Wait", waited)
	for i := 0; i < 2; i++ {
		if err := b.Remove(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := sessiontest.Recv(t, waited, wait, "Wait after Remove"); err != nil {
		t.Fatal(err)
	}
	if ok, _, _ := raw.Exists(ns.Path(bpath)); ok {
		t.Fatal("barrier node still there")
	}
	zktest.Eventually(t, wait, func() bool {
		ok, _, err := raw.Exists(ns.Path("/barriers"))
		return err == nil && !ok
	}, "the server reaps the empty parent container")
}

// A Wait goes on through a partition that expires its session: the barrier
// removed meanwhile by another process releases it once it is back.
func TestBarrierWaitAcrossSessionLoss(t *testing.T) {
	ns := zktest.NewNamespace(t)
	ctx := ctxT(t)
	setter, err := barrier.New(sessiontest.Connect(t, ns), bpath)
	if err != nil {
		t.Fatal(err)
	}
	defer setter.Close()
	if err := setter.Set(ctx); err != nil {
		t.Fatal(err)
	}
	s, p := sessiontest.ConnectProxy(t, ns)
	rec := sessiontest.Record(t, s)
	b, err := barrier.New(s, bpath)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	waited := async(func() error { return b.Wait(ctx) })
	zktest.Eventually(t, wait, func() bool { return sessiontest.Core(s).WatchCount() > 0 }, "Wait sets its watch")
	p.Partition()
	rec.Wait(t, wait, session.Lost)
	if err := setter.Remove(ctx); err != nil {
		t.Fatal(err)
	}
	pending(t, "Wait", waited)
	p.Heal()
	if err := sessiontest.Recv(t, waited, wait, "Wait after the heal"); err != nil {
		t.Fatal(err)
	}
}

// Close ends a Wait with ErrClosed; later calls fail with it.
func TestBarrierCloseWhileWaiting(t *testing.T) {
	ns := zktest.NewNamespace(t)
	ctx := ctxT(t)
	s := sessiontest.Connect(t, ns)
	b, err := barrier.New(s, bpath)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Set(ctx); err != nil {
		t.Fatal(err)
	}
	waited := async(func() error { return b.Wait(ctx) })
	zktest.Eventually(t, wait, func() bool { return sessiontest.Core(s).WatchCount() > 0 }, "Wait sets its watch")
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if err := sessiontest.Recv(t, waited, wait, "Wait at Close"); !errors.Is(err, session.ErrClosed) {
		t.Fatalf("Wait at Close = %v, want ErrClosed", err)
	}
	if err := b.Set(ctx); !errors.Is(err, session.ErrClosed) {
		t.Fatalf("Set after Close = %v", err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	// ctx bounds a Wait too.
	b2, err := barrier.New(s, bpath)
	if err != nil {
		t.Fatal(err)
	}
	defer b2.Close()
	cctx, cancel := context.WithCancel(ctx)
	waited = async(func() error { return b2.Wait(cctx) })
	cancel()
	if err := sessiontest.Recv(t, waited, wait, "Wait at cancel"); !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait at cancel = %v", err)
	}
}

// Bad input fails at once with ErrBadArgument naming the recipe.
func TestBadInput(t *testing.T) {
	ns := zktest.NewNamespace(t)
	s := sessiontest.Connect(t, ns)
	b, err := barrier.New(s, bpath)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	d, err := barrier.NewDouble(s, bpath, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	for _, tc := range []struct {
		name, want string
		f          func() error
	}{
		{"nil session", "barrier", func() error { _, err := barrier.New(nil, bpath); return err }},
		{"empty path", "barrier", func() error { _, err := barrier.New(s, ""); return err }},
		{"root", "barrier", func() error { _, err := barrier.New(s, "/"); return err }},
		{"trailing slash", "double barrier", func() error { _, err := barrier.NewDouble(s, "/a/", 2); return err }},
		{"zero members", "double barrier", func() error { _, err := barrier.NewDouble(s, bpath, 0); return err }},
		{"nil option", "barrier", func() error { _, err := barrier.New(s, bpath, nil); return err }},
		{"empty id", "double barrier", func() error { _, err := barrier.NewDouble(s, bpath, 2, barrier.WithID("")); return err }},
		{"nil logger", "barrier", func() error { _, err := barrier.New(s, bpath, barrier.WithLogger(nil)); return err }},
		{"nil ctx Wait", "barrier", func() error { return b.Wait(nil) }},          //nolint:staticcheck // the case under test
		{"nil ctx Enter", "double barrier", func() error { return d.Enter(nil) }}, //nolint:staticcheck // the case under test
	} {
		err := tc.f()
		if !errors.Is(err, session.ErrBadArgument) || !strings.HasPrefix(err.Error(), tc.want+" ") {
			t.Errorf("%s: %v, want ErrBadArgument from %s", tc.name, err, tc.want)
		}
	}
}
