package engine_test

import (
	"context"
	"errors"
	"testing"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/internal/engine"
	"github.com/zkrecipes/zkrecipes/internal/testkit/sessiontest"
	"github.com/zkrecipes/zkrecipes/recipes"
	"github.com/zkrecipes/zkrecipes/session"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// trusting is a fair mutex driver that takes over on the deletion notice.
var trustDriver = func() *engine.Driver {
	d := engine.Standard("lock-", 1)
	d.TrustHandoff = true
	return d
}()

func newInternalsAt(t testing.TB, s *session.Session, path string, opts ...engine.Option) *engine.Engine {
	t.Helper()
	in, err := engine.New(s, path, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { in.Close() })
	return in
}

// AcquireCounted grants N leases in one transaction when the directory's
// count right after the create is at most Max (every child counts, as in
// Curator); otherwise it deletes its nodes and fails with ErrBusy.
func TestAcquireCounted(t *testing.T) {
	ns := zktest.NewNamespace(t)
	raw := ns.Conn(t)
	ctx := ctxT(t)
	in := newInternals(t, sessiontest.Connect(t, ns))
	ls, err := in.AcquireCounted(ctx, engine.CountedSpec{Marker: "lease-", Data: []byte("id"), N: 2, Max: 3})
	if err != nil {
		t.Fatal(err)
	}
	if len(ls) != 2 || ls[0].Token() != ls[1].Token() || ls[0].Node() == ls[1].Node() || ls[0].ID() != "id" {
		t.Fatalf("leases %+v", ls)
	}
	_, st, err := raw.Get(ls[1].Path())
	if err != nil || st.Czxid != ls[1].Token() {
		t.Fatalf("token %d, node stat %+v, %v", ls[1].Token(), st, err)
	}
	// A foreign child counts: 2 + 1 + 1 > 3.
	if _, err := raw.Create(ns.Path(dir)+"/foreign", nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	if _, err := in.AcquireCounted(ctx, engine.CountedSpec{Marker: "lease-", N: 1, Max: 3}); !errors.Is(err, recipes.ErrBusy) {
		t.Fatalf("over the maximum: %v, want ErrBusy", err)
	}
	if k := children(t, raw, ns); len(k) != 3 {
		t.Fatalf("children after the refused acquire: %v", k)
	}
	for _, l := range ls {
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	waitChildren(t, raw, ns, 1)
}

// The guard's node is deleted in the same transaction and the guard is
// released; a guard whose node is gone makes the transaction fail as a
// whole with ErrGuardLost.
func TestAcquireCountedGuard(t *testing.T) {
	ns := zktest.NewNamespace(t)
	raw := ns.Conn(t)
	ctx := ctxT(t)
	s := sessiontest.Connect(t, ns)
	locks := newInternalsAt(t, s, "/r/locks", engine.WithNodeWatch(false))
	leases := newInternalsAt(t, s, "/r/leases")
	g, err := locks.Acquire(ctx, trustDriver, nil)
	if err != nil {
		t.Fatal(err)
	}
	ls, err := leases.AcquireCounted(ctx, engine.CountedSpec{Marker: "lease-", N: 1, Max: 1, Guard: g})
	if err != nil {
		t.Fatal(err)
	}
	if ok, _, _ := raw.Exists(g.Path()); ok {
		t.Fatal("the guard's node is still there")
	}
	if err := g.Err(); !errors.Is(err, recipes.ErrReleased) {
		t.Fatalf("guard Err = %v, want ErrReleased", err)
	}
	if err := g.Release(ctx); err != nil {
		t.Fatalf("guard Release after the transaction = %v", err)
	}

	g2, err := locks.Acquire(ctx, trustDriver, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := raw.Delete(g2.Path(), -1); err != nil {
		t.Fatal(err)
	}
	if _, err := leases.AcquireCounted(ctx, engine.CountedSpec{Marker: "lease-", N: 1, Max: 5, Guard: g2}); !errors.Is(err, engine.ErrGuardLost) {
		t.Fatalf("with the guard's node gone: %v, want ErrGuardLost", err)
	}
	k, _, err := raw.Children(ns.Path("/r/leases"))
	if err != nil || len(k) != 1 || k[0] != ls[0].Node() {
		t.Fatalf("lease nodes %v, %v", k, err)
	}
	g2.Release(ctx)
	ls[0].Release(ctx)
}

func TestAcquireCountedBadInput(t *testing.T) {
	ns := zktest.NewNamespace(t)
	ctx := ctxT(t)
	s := sessiontest.Connect(t, ns)
	in := newInternals(t, s)
	otherLocks := newInternalsAt(t, sessiontest.Connect(t, ns), "/r/locks", engine.WithNodeWatch(false))
	g, err := otherLocks.Acquire(ctx, trustDriver, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Release(ctx)
	for name, spec := range map[string]engine.CountedSpec{
		"no marker":     {N: 1, Max: 1},
		"marker with /": {Marker: "a/b", N: 1, Max: 1},
		"zero nodes":    {Marker: "lease-", N: 0, Max: 1},
		"negative max":  {Marker: "lease-", N: 1, Max: -1},
		"foreign guard": {Marker: "lease-", N: 1, Max: 1, Guard: g},
	} {
		err := func() error { _, err := in.AcquireCounted(ctx, spec); return err }()
		if !errors.Is(err, session.ErrBadArgument) && !errors.Is(err, engine.ErrBadDriver) {
			t.Errorf("%s: %v", name, err)
		}
	}
	//lint:ignore SA1012 a nil context is the bad input under test
	if _, err := in.AcquireCounted(nil, engine.CountedSpec{Marker: "lease-", N: 1, Max: 1}); !errors.Is(err, session.ErrBadArgument) { //nolint:staticcheck
		t.Errorf("nil ctx: %v", err)
	}
	if k := children(t, ns.Conn(t), ns); len(k) != 0 {
		t.Fatalf("bad input left nodes: %v", k)
	}
}

// A trusting driver's waiter takes over on the deletion notice with no
// children read and no watch on its own node; a waiter in the middle that
// gives up lets the one behind it hold alongside the holder (the documented
// cost of the trust).
func TestTrustHandoff(t *testing.T) {
	ns := zktest.NewNamespace(t)
	raw := ns.Conn(t)
	ctx := ctxT(t)
	h := newInternals(t, sessiontest.Connect(t, ns), engine.WithNodeWatch(false))
	ws, tap := sessiontest.ConnectTap(t, ns)
	// Connect has read the ensemble's config: the waiter's reads come after.
	dataBefore := tap.Requests()[zktest.OpGetData]
	w := newInternals(t, ws, engine.WithNodeWatch(false))
	hl, err := h.Acquire(ctx, trustDriver, nil)
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		l   *engine.Lease
		err error
	}
	got := make(chan result, 1)
	go func() {
		l, err := w.Acquire(ctx, trustDriver, nil)
		got <- result{l, err}
	}()
	waitChildren(t, raw, ns, 2)
	reads := func() int64 { return tap.Requests()[zktest.OpGetChildren2] + tap.Requests()[zktest.OpGetData] }
	zktest.Eventually(t, wait, func() bool { return tap.Requests()[zktest.OpGetData] >= dataBefore+1 }, "the waiter did not watch its predecessor")
	before := reads()
	if err := hl.Release(ctx); err != nil {
		t.Fatal(err)
	}
	r := <-got
	if r.err != nil {
		t.Fatal(r.err)
	}
	if n := reads() - before; n != 0 {
		t.Fatalf("the handoff cost %d reads, want none", n)
	}

	// r holds; a queues behind it, b behind a; a gives up: b holds too.
	a := newInternals(t, sessiontest.Connect(t, ns), engine.WithNodeWatch(false))
	b := newInternals(t, sessiontest.Connect(t, ns), engine.WithNodeWatch(false))
	actx, acancel := context.WithCancel(ctx)
	aDone := make(chan error, 1)
	go func() {
		_, err := a.Acquire(actx, trustDriver, nil)
		aDone <- err
	}()
	waitChildren(t, raw, ns, 2)
	bDone := make(chan result, 1)
	go func() {
		l, err := b.Acquire(ctx, trustDriver, nil)
		bDone <- result{l, err}
	}()
	waitChildren(t, raw, ns, 3)
	acancel()
	if err := <-aDone; !errors.Is(err, context.Canceled) {
		t.Fatalf("a = %v", err)
	}
	rb := <-bDone
	if rb.err != nil {
		t.Fatal(rb.err)
	}
	if r.l.Err() != nil {
		t.Fatalf("first holder's lease ended: %v", r.l.Err())
	}
	r.l.Release(ctx)
	rb.l.Release(ctx)
}
