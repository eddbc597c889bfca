package mutex_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/internal/testkit/sessiontest"
	"github.com/zkrecipes/zkrecipes/mutex"
	"github.com/zkrecipes/zkrecipes/recipes"
	"github.com/zkrecipes/zkrecipes/session"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// TestReentrancy: three nested Locks by one goroutine share one node; an
// Release from another goroutine is refused; the node goes at the last Release.
func TestReentrancy(t *testing.T) {
	ns := zktest.NewNamespace(t)
	raw := ns.Conn(t)
	s := connect(t, ns)
	m := newMutex(t, s)
	other := newMutex(t, connect(t, ns))
	ctx := ctxT(t)

	l1, err := m.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	l2, err := m.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	l3, err := m.TryLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !mutex.HeldByMe(m) {
		t.Fatal("HeldByMe = false")
	}
	if ks := lockKids(t, raw, ns); len(ks) != 1 || l1.Node() != ks[0] || l2.Node() != ks[0] || l3.Node() != ks[0] {
		t.Fatalf("nodes %q; leases %s %s %s", ks, l1.Node(), l2.Node(), l3.Node())
	}
	if l1.Token() != l3.Token() {
		t.Fatal("nested holds have different tokens")
	}

	// Another goroutine of the same process neither re-enters nor unlocks.
	type res struct {
		held  bool
		try   error
		unl   error
		inner error
	}
	ch := make(chan res, 1)
	go func() {
		_, terr := m.TryLock(ctx)
		ch <- res{held: mutex.HeldByMe(m), try: terr, unl: l1.Release(ctx), inner: l3.Release(ctx)}
	}()
	r := <-ch
	if r.held || !errors.Is(r.try, recipes.ErrBusy) {
		t.Fatalf("other goroutine: HeldByMe=%v TryLock=%v", r.held, r.try)
	}
	if !errors.Is(r.unl, recipes.ErrNotOwner) || !errors.Is(r.inner, recipes.ErrNotOwner) {
		t.Fatalf("Release from another goroutine = %v, %v; want ErrNotOwner", r.unl, r.inner)
	}
	if _, err := other.TryLock(ctx); !errors.Is(err, recipes.ErrBusy) {
		t.Fatalf("other session TryLock = %v", err)
	}

	// Release in any order; the node goes at the last one.
	for i, l := range []*mutex.Lease{l2, l3} {
		if err := l.Release(ctx); err != nil {
			t.Fatalf("Release %d: %v", i, err)
		}
		if err := l.Release(ctx); err != nil { // idempotent per handle
			t.Fatalf("second Release %d: %v", i, err)
		}
		if l1.Err() != nil || len(lockKids(t, raw, ns)) != 1 {
			t.Fatalf("lock released before the last Release")
		}
	}
	if err := l1.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := sessiontest.WaitDone(t, l1, wait); !errors.Is(err, recipes.ErrReleased) {
		t.Fatalf("cause %v", err)
	}
	if ks := lockKids(t, raw, ns); len(ks) != 0 {
		t.Fatalf("nodes left %q", ks)
	}
	if mutex.HeldByMe(m) {
		t.Fatal("HeldByMe after last Release")
	}
}

// TestReentryAfterLoss: a goroutine whose hold was lost gets an error from a
// nested Lock until it unlocks the outer hold; then it can lock again.
func TestReentryAfterLoss(t *testing.T) {
	ns := zktest.NewNamespace(t)
	raw := ns.Conn(t)
	m := newMutex(t, connect(t, ns))
	ctx := ctxT(t)
	l, err := m.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := raw.Delete(mutex.NodePath(l), -1); err != nil {
		t.Fatal(err)
	}
	sessiontest.WaitDone(t, l, wait)
	if _, err := m.Lock(ctx); !errors.Is(err, recipes.ErrNodeDeleted) {
		t.Fatalf("nested Lock after loss = %v, want ErrNodeDeleted", err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	l2, err := m.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	l2.Release(ctx)
}

// TestNonReentrant: the handle may be unlocked from another goroutine; a
// second Lock by the holder waits (queues behind itself) until the first
// lease is unlocked or its ctx ends.
func TestNonReentrant(t *testing.T) {
	ns := zktest.NewNamespace(t)
	raw := ns.Conn(t)
	m, err := mutex.New(connect(t, ns), lockPath)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	ctx := ctxT(t)
	l1, err := m.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.TryLock(ctx); !errors.Is(err, recipes.ErrBusy) {
		t.Fatalf("TryLock by the holder = %v, want ErrBusy", err)
	}

	// A second Lock by the same goroutine waits until ctx ends. The deadline
	// is long enough for the second node to be queued first on a loaded
	// machine, and that is checked: a deadline that ended the create would
	// prove nothing.
	short, cancel := context.WithTimeout(ctx, 2*time.Second)
	queued := seenBefore(short, func() bool { return childCount(raw, ns.Path(lockPath)) == 2 })
	_, err = m.Lock(short)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("second Lock = %v, want DeadlineExceeded", err)
	}
	if !<-queued {
		t.Fatal("the second Lock's node was never seen queued before the deadline")
	}
	// The timed-out Lock's node goes through the session's guaranteed-delete
	// queue: the call waits for it only within ctx + 10 ms. Wait for it.
	var ks []string
	zktest.Eventually(t, wait, func() bool {
		ks = lockKids(t, raw, ns)
		return len(ks) == 1 && ks[0] == l1.Node()
	}, "nodes %q, want only the first lease's %s", &ks, l1.Node())

	// ... or until another goroutine unlocks the first lease.
	got := lockAsync(t, ctx, m, new(atomic.Int64))
	waitKids(t, raw, ns, 2)
	unl := make(chan error, 1)
	go func() { unl <- l1.Release(ctx) }()
	if err := <-unl; err != nil {
		t.Fatalf("Release from another goroutine: %v", err)
	}
	r := got.result(t)
	if r.err != nil {
		t.Fatal(r.err)
	}
	if err := r.l.Release(ctx); err != nil { // any goroutine may unlock
		t.Fatal(err)
	}
	waitKids(t, raw, ns, 0)
}

// TestExcludesAcrossKinds: Mutex and NonReentrant on one path exclude each
// other (same node layout); NonFair uses its own node and ignores them.
func TestExcludesAcrossKinds(t *testing.T) {
	ns := zktest.NewNamespace(t)
	ctx := ctxT(t)
	m := newMutex(t, connect(t, ns))
	nr, err := mutex.New(connect(t, ns), lockPath)
	if err != nil {
		t.Fatal(err)
	}
	defer nr.Close()
	l, err := m.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := nr.TryLock(ctx); !errors.Is(err, recipes.ErrBusy) {
		t.Fatalf("NonReentrant TryLock while Mutex holds = %v", err)
	}
	ps, err := nr.Participants(ctx)
	if err != nil || len(ps) != 1 || ps[0].Node != l.Node() {
		t.Fatalf("Participants = %+v, %v", ps, err)
	}
	l.Release(ctx)
}

// TestMultiRollback: a multi-lock whose second lock is held elsewhere times
// out and rolls the first back; once free it takes both, and releases them in
// reverse order.
func TestMultiRollback(t *testing.T) {
	ns := zktest.NewNamespace(t)
	raw := ns.Conn(t)
	ctx := ctxT(t)
	s := connect(t, ns)
	a, err := mutex.NewReentrant(s, "/locks/a")
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := mutex.New(s, "/locks/b")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	c, err := mutex.NewNonFair(s, "/locks/c")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	blocker, err := mutex.New(connect(t, ns), "/locks/b")
	if err != nil {
		t.Fatal(err)
	}
	defer blocker.Close()
	bl, err := blocker.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}

	ml, err := mutex.NewMulti(a, b, c)
	if err != nil {
		t.Fatal(err)
	}
	// The deadline must interrupt the wait on b, with a held: checked, and
	// long enough for that on a loaded machine.
	short, cancel := context.WithTimeout(ctx, 2*time.Second)
	queued := seenBefore(short, func() bool {
		return childCount(raw, ns.Path("/locks/a")) == 1 && childCount(raw, ns.Path("/locks/b")) == 2
	})
	_, err = ml.Lock(short)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("multi Lock = %v, want DeadlineExceeded", err)
	}
	if !<-queued {
		t.Fatal("the multi-lock was never seen holding a and queued on b before the deadline")
	}
	for _, p := range []string{"/locks/a", "/locks/c"} {
		k, _, _ := raw.Children(ns.Path(p))
		if len(k) != 0 {
			t.Fatalf("%s not rolled back: %q", p, k)
		}
	}
	// a was unlocked by the rollback before Lock returned (checked above);
	// the node the multi-lock queued on b goes through the session's
	// guaranteed-delete queue (the failed Lock waits for it only within its
	// ctx + 10 ms): wait for it.
	var kb []string
	zktest.Eventually(t, wait, func() bool {
		kb, _, _ = raw.Children(ns.Path("/locks/b"))
		return len(kb) == 1 && kb[0] == bl.Node()
	}, "/locks/b: %q, want only the blocker's node %s", &kb, bl.Node())
	if _, err := ml.TryLock(ctx); !errors.Is(err, recipes.ErrBusy) {
		t.Fatalf("multi TryLock = %v, want ErrBusy", err)
	}
	if mutex.HeldByMe(a) {
		t.Fatal("a still held after the rollback")
	}

	bl.Release(ctx)
	mlease, err := ml.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(mlease.Leases()) != 3 || mlease.Err() != nil {
		t.Fatalf("leases %d, err %v", len(mlease.Leases()), mlease.Err())
	}
	// Losing one lock ends the set.
	if err := raw.Delete(mutex.NodePath(mlease.Leases()[1]), -1); err != nil {
		t.Fatal(err)
	}
	if err := sessiontest.WaitDone(t, mlease, wait); !errors.Is(err, recipes.ErrNodeDeleted) {
		t.Fatalf("multi cause = %v", err)
	}
	if err := mlease.Release(ctx); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/locks/a", "/locks/b", "/locks/c"} {
		k, _, _ := raw.Children(ns.Path(p))
		if len(k) != 0 {
			t.Fatalf("%s left: %q", p, k)
		}
	}
	if _, err := mutex.NewMulti(); !errors.Is(err, session.ErrBadArgument) {
		t.Fatalf("NewMulti() = %v", err)
	}
	if _, err := mutex.NewMulti(a, nil); !errors.Is(err, session.ErrBadArgument) {
		t.Fatalf("NewMulti(a, nil) = %v", err)
	}
}

// TestMultiUnlockNotOwner: a multi-lock holding a reentrant Mutex refuses an
// Release from a goroutine other than the one that locked it before it
// releases anything. The Mutex comes first in the set, so a release in
// reverse order that checked ownership as it went would already have freed
// the other two. The goroutine that locked it then unlocks the whole set.
func TestMultiUnlockNotOwner(t *testing.T) {
	ns := zktest.NewNamespace(t)
	raw := ns.Conn(t)
	ctx := ctxT(t)
	s := connect(t, ns)
	a, err := mutex.NewReentrant(s, "/locks/a")
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := mutex.New(s, "/locks/b")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	c, err := mutex.NewNonFair(s, "/locks/c")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ml, err := mutex.NewMulti(a, b, c)
	if err != nil {
		t.Fatal(err)
	}

	type result struct {
		l   *mutex.MultiLease
		err error
	}
	locked := make(chan result, 1)
	unlockReq, stop := make(chan struct{}), make(chan struct{})
	unlocked := make(chan error, 1)
	done := make(chan struct{})
	go func() { // the owner: locks, then unlocks when asked
		defer close(done)
		l, err := ml.Lock(ctx)
		locked <- result{l, err}
		if err != nil {
			return
		}
		select {
		case <-unlockReq:
		case <-stop:
		}
		unlocked <- l.Release(ctx)
	}()
	t.Cleanup(func() { close(stop); <-done })
	r := sessiontest.Recv(t, locked, wait, "multi Lock")
	if r.err != nil {
		t.Fatal(r.err)
	}

	if err := r.l.Release(ctx); !errors.Is(err, recipes.ErrNotOwner) {
		t.Fatalf("Release from another goroutine = %v, want ErrNotOwner", err)
	}
	if err := r.l.Err(); err != nil {
		t.Fatalf("set ended by a refused Release: %v", err)
	}
	for i, l := range r.l.Leases() {
		if err := l.Err(); err != nil {
			t.Fatalf("lease %d (%s) ended by a refused Release: %v", i, mutex.NodePath(l), err)
		}
		if ok, _, err := raw.Exists(mutex.NodePath(l)); err != nil || !ok {
			t.Fatalf("lease %d: node %s gone after a refused Release (%v)", i, mutex.NodePath(l), err)
		}
	}
	// Still exclusive for everyone else.
	other := connect(t, ns)
	ob, err := mutex.New(other, "/locks/b")
	if err != nil {
		t.Fatal(err)
	}
	defer ob.Close()
	oc, err := mutex.NewNonFair(other, "/locks/c")
	if err != nil {
		t.Fatal(err)
	}
	defer oc.Close()
	for _, lk := range []mutex.Locker{ob, oc} {
		if _, err := lk.TryLock(ctx); !errors.Is(err, recipes.ErrBusy) {
			t.Fatalf("%s: TryLock by another session = %v, want ErrBusy", lk.Path(), err)
		}
	}

	close(unlockReq)
	if err := sessiontest.Recv(t, unlocked, wait, "owner's Release"); err != nil {
		t.Fatalf("owner's Release: %v", err)
	}
	if err := r.l.Err(); !errors.Is(err, recipes.ErrReleased) {
		t.Fatalf("set cause after Release = %v, want ErrReleased", err)
	}
	for _, p := range []string{"/locks/a", "/locks/b", "/locks/c"} {
		if k, _, _ := raw.Children(ns.Path(p)); len(k) != 0 {
			t.Fatalf("%s left: %q", p, k)
		}
	}
}
