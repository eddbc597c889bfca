package rwlock_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/internal/testkit/sessiontest"
	"github.com/zkrecipes/zkrecipes/recipes"
	"github.com/zkrecipes/zkrecipes/rwlock"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// TestReentrantHolds: a goroutine re-enters each side it holds (one node
// per side), each hold needs its own Release, by that goroutine; the node
// goes at the last one.
func TestReentrantHolds(t *testing.T) {
	ns := zktest.NewNamespace(t)
	raw := ns.Conn(t)
	ctx := ctxT(t)
	m := newReentrant(t, connect(t, ns))
	other := newReentrant(t, connect(t, ns))

	r1, err := m.RLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	r2, err := m.TryRLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if r1.Node() != r2.Node() || len(nodes(t, raw, ns)) != 1 {
		t.Fatalf("re-entered read: nodes %q, %q", r1.Node(), r2.Node())
	}
	if rd, wr := rwlock.Holds(m); rd != 2 || wr != 0 {
		t.Fatalf("Holds = %d, %d; want 2, 0", rd, wr)
	}
	// Another goroutine cannot unlock it, and holds nothing itself.
	res := make(chan error, 1)
	go func() {
		if rd, wr := rwlock.Holds(m); rd != 0 || wr != 0 {
			res <- errors.New("another goroutine sees holds")
			return
		}
		res <- r1.Release(ctx)
	}()
	if err := sessiontest.Recv(t, res, wait, "Release from another goroutine"); !errors.Is(err, recipes.ErrNotOwner) {
		t.Fatalf("Release from another goroutine: %v, want ErrNotOwner", err)
	}
	if err := r1.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := r1.Release(ctx); err != nil { // idempotent per handle: no second exit
		t.Fatal(err)
	}
	if r2.Err() != nil || len(nodes(t, raw, ns)) != 1 {
		t.Fatalf("the first Release of two released the read lock: %v", r2.Err())
	}
	if err := r2.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(r1.Err(), recipes.ErrReleased) {
		t.Fatalf("after the last Release: %v", r1.Err())
	}
	waitEmpty(t, raw, ns)

	// Write: re-entry, then a read beside it (downgrade) and a write again.
	w1, err := m.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	w2, err := m.TryLock(ctx)
	if err != nil || w2.Node() != w1.Node() {
		t.Fatalf("re-entered write: %v %v", w2, err)
	}
	rr, err := m.RLock(ctx) // Curator's downgrade: held at once
	if err != nil {
		t.Fatal(err)
	}
	w3, err := m.Lock(ctx) // still a writer: re-enters
	if err != nil || w3.Node() != w1.Node() {
		t.Fatalf("write while holding both: %v %v", w3, err)
	}
	if rd, wr := rwlock.Holds(m); rd != 1 || wr != 3 {
		t.Fatalf("Holds = %d, %d; want 1, 3", rd, wr)
	}
	if _, err := other.TryRLock(ctx); !errors.Is(err, recipes.ErrBusy) {
		t.Fatalf("other's TryRLock while written: %v", err)
	}
	for _, w := range []*rwlock.WriteLease{w3, w2, w1} {
		if err := w.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// Only the downgraded read hold is left: others may read, not write.
	if ks := nodes(t, raw, ns); len(ks) != 1 || ks[0] != rr.Node() {
		t.Fatalf("nodes %q, want the read node %s", ks, rr.Node())
	}
	ol, err := other.TryRLock(ctx)
	if err != nil {
		t.Fatalf("other's TryRLock beside the downgraded reader: %v", err)
	}
	if _, err := m.Lock(ctx); !errors.Is(err, rwlock.ErrUpgrade) {
		t.Fatalf("Lock while holding only the read lock: %v, want ErrUpgrade", err)
	}
	for _, l := range []*rwlock.Lease{rr, ol} {
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	waitEmpty(t, raw, ns)
}

// TestReentrantUpgradeFailsAtOnce: a read holder asking for the write lock
// gets ErrUpgrade at once, and no node is created: no create request goes
// out (counted on the wire).
func TestReentrantUpgradeFailsAtOnce(t *testing.T) {
	ns := zktest.NewNamespace(t)
	raw := ns.Conn(t)
	ctx := ctxT(t)
	s, tap := sessiontest.ConnectTap(t, ns)
	m := newReentrant(t, s)
	rl, err := m.RLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	before := tap.Requests()
	for _, try := range []bool{false, true} {
		start := time.Now()
		var err error
		if try {
			_, err = m.TryLock(ctx)
		} else {
			_, err = m.Lock(ctx)
		}
		if !errors.Is(err, rwlock.ErrUpgrade) {
			t.Fatalf("upgrade (try %v): %v, want ErrUpgrade", try, err)
		}
		t.Logf("upgrade refused in %v: %v", time.Since(start), err)
	}
	// Only writes matter: the read lease's own-node watch may be armed
	// (a getData) meanwhile.
	after := tap.Requests()
	for op, n := range after {
		if name := zktest.OpName(op); n != before[op] && (strings.Contains(name, "create") || name == "multi") {
			t.Fatalf("the refused upgrade sent %d %s requests", n-before[op], name)
		}
	}
	if ks := nodes(t, raw, ns); len(ks) != 1 || ks[0] != rl.Node() {
		t.Fatalf("nodes %q, want only the read node", ks)
	}
	if err := rl.Release(ctx); err != nil {
		t.Fatal(err)
	}
	// Without the read hold the write lock is granted.
	wl, err := m.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := wl.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestRWMutexUpgradeWaits: the documented choice for the non-reentrant
// kind: a Lock while this process holds a read lease waits like any writer.
// Another goroutine unlocking that read lease lets it through; a goroutine
// waiting on its own read lease gets ctx's error, and its write node goes.
func TestRWMutexUpgradeWaits(t *testing.T) {
	ns := zktest.NewNamespace(t)
	raw := ns.Conn(t)
	ctx := ctxT(t)
	s, _, rd := connectReads(t, ns)
	m := newRWMutex(t, s)

	// Waiting on its own read lease: bounded by ctx.
	rl, err := m.RLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := m.Lock(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Lock behind our own read lease: %v, want DeadlineExceeded", err)
	}
	t.Logf("Lock behind our own read lease returned %v after it began (ctx 300ms)", time.Since(start))
	// The timed-out Lock's write node goes through the session's
	// guaranteed-delete queue (the call waits for it only within its ctx +
	// 10 ms): wait for it.
	var ks []string
	zktest.Eventually(t, wait, func() bool {
		ks = nodes(t, raw, ns)
		return len(ks) == 1 && ks[0] == rl.Node()
	}, "nodes %q, want only the read node %s", &ks, rl.Node())
	if _, err := m.TryLock(ctx); !errors.Is(err, recipes.ErrBusy) {
		t.Fatalf("TryLock behind our own read lease: %v, want ErrBusy", err)
	}

	// Another goroutine unlocks the read lease: the write Lock goes through.
	var clock atomic.Int64
	wa := lockAsync(t, ctx, m, Write, &clock)
	rd.waitRead(t, rl.Node())
	wa.pending(t, "write behind our own read lease")
	u := clock.Add(1)
	unl := make(chan error, 1)
	go func() { unl <- rl.Release(ctx) }()
	if err := sessiontest.Recv(t, unl, wait, "Release from another goroutine"); err != nil {
		t.Fatal(err)
	}
	if r := wa.held(t); r.n < u {
		t.Fatal("write granted before the read lease was unlocked")
	}
	wa.unlock(t)
	waitEmpty(t, raw, ns)
}

// TestRWMutexHandoff: an RWMutex lease taken by one goroutine is unlocked
// by another, and child goroutines read while their parent holds a read
// lease (no reentrancy needed: readers share).
func TestRWMutexHandoff(t *testing.T) {
	ns := zktest.NewNamespace(t)
	raw := ns.Conn(t)
	ctx := ctxT(t)
	m := newRWMutex(t, connect(t, ns))
	wl, err := m.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 3)
	go func() { errs <- wl.Release(ctx) }()
	if err := sessiontest.Recv(t, errs, wait, "Release from a child goroutine"); err != nil {
		t.Fatal(err)
	}
	parent, err := m.RLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		go func() {
			errs <- func() error {
				l, err := m.RLock(ctx)
				if err != nil {
					return err
				}
				return l.Release(ctx)
			}()
		}()
	}
	for i := 0; i < 3; i++ {
		if err := sessiontest.Recv(t, errs, wait, "child reader"); err != nil {
			t.Fatal(err)
		}
	}
	if err := parent.Release(ctx); err != nil {
		t.Fatal(err)
	}
	waitEmpty(t, raw, ns)
}
