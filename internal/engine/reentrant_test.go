package engine

import (
	"context"
	"errors"
	"testing"
)

func fakeLease() (*Lease, context.CancelCauseFunc) {
	ctx, cancel := context.WithCancelCause(context.Background())
	return &Lease{lctx: ctx, node: "/n"}, cancel
}

func TestReentrantCounts(t *testing.T) {
	var r GoroutineHolds
	l, cancel := fakeLease()
	defer cancel(nil)
	if got, n, err := r.Enter(); got != nil || n != 0 || err != nil {
		t.Fatalf("Enter on empty = %v %d %v", got, n, err)
	}
	if err := r.Add(l); err != nil {
		t.Fatal(err)
	}
	if err := r.Add(l); err == nil {
		t.Fatal("second Add succeeded")
	}
	for want := 2; want <= 3; want++ {
		got, n, err := r.Enter()
		if got != l || n != want || err != nil {
			t.Fatalf("Enter = %v %d %v, want count %d", got, n, err, want)
		}
	}
	if r.Count() != 3 {
		t.Fatalf("Count = %d", r.Count())
	}

	// Another goroutine neither re-enters nor exits.
	type res struct {
		l    *Lease
		last bool
		err  error
	}
	ch := make(chan res, 1)
	go func() {
		got, _, _ := r.Enter()
		last, err := r.Exit(l)
		ch <- res{got, last, err}
	}()
	if o := <-ch; o.l != nil || o.last || !errors.Is(o.err, ErrNotOwner) {
		t.Fatalf("other goroutine: Enter=%v Exit=(%v, %v), want nil, ErrNotOwner", o.l, o.last, o.err)
	}

	for i := 3; i >= 1; i-- {
		last, err := r.Exit(l)
		if err != nil || last != (i == 1) {
			t.Fatalf("Exit #%d = %v %v", 4-i, last, err)
		}
	}
	if _, err := r.Exit(l); !errors.Is(err, ErrNotOwner) {
		t.Fatalf("Exit after last = %v, want ErrNotOwner", err)
	}
	if r.Holds() != 0 {
		t.Fatalf("Holds = %d", r.Holds())
	}
}

func TestReentrantEndedLease(t *testing.T) {
	var r GoroutineHolds
	l, cancel := fakeLease()
	if err := r.Add(l); err != nil {
		t.Fatal(err)
	}
	cancel(ErrNodeDeleted)
	got, n, err := r.Enter()
	if got != l || n != 1 || !errors.Is(err, ErrNodeDeleted) {
		t.Fatalf("Enter on ended lease = %v %d %v, want the lease, count 1, ErrNodeDeleted", got, n, err)
	}
	if last, err := r.Exit(l); !last || err != nil {
		t.Fatalf("Exit = %v %v", last, err)
	}
}

// TestReentrantRefusesUnknownGoroutine: when the goroutine id cannot be read
// (goid.ID returns 0 on an unexpected stack header), every goroutine would
// share id 0 and re-enter each other's holds; GoroutineHolds refuses instead.
func TestReentrantRefusesUnknownGoroutine(t *testing.T) {
	var r GoroutineHolds
	l, cancel := fakeLease()
	defer cancel(nil)
	if err := r.add(0, l); !errors.Is(err, ErrNoGoroutineID) {
		t.Fatalf("add(0) = %v, want ErrNoGoroutineID", err)
	}
	if r.Holds() != 0 {
		t.Fatalf("add(0) recorded a hold")
	}
	// Even with a hold recorded under id 0 (it cannot be), nothing re-enters it.
	r.holds = []hold{{id: 0, lease: l, count: 1}}
	if got, n, err := r.enter(0); got != nil || n != 0 || !errors.Is(err, ErrNoGoroutineID) {
		t.Fatalf("enter(0) = %v %d %v, want nil, 0, ErrNoGoroutineID", got, n, err)
	}
	if last, err := r.exit(0, l); last || !errors.Is(err, ErrNoGoroutineID) {
		t.Fatalf("exit(0) = %v %v, want ErrNoGoroutineID", last, err)
	}
	if n := r.countOf(0); n != 0 {
		t.Fatalf("countOf(0) = %d", n)
	}
	if r.holds[0].count != 1 {
		t.Fatalf("the hold changed: %d", r.holds[0].count)
	}
}

func TestReentrantHeld(t *testing.T) {
	var r GoroutineHolds
	if r.Held() != nil {
		t.Fatal("Held on empty")
	}
	l, cancel := fakeLease()
	defer cancel(nil)
	if err := r.Add(l); err != nil {
		t.Fatal(err)
	}
	if r.Held() != l || r.Count() != 1 {
		t.Fatalf("Held = %v, Count = %d", r.Held(), r.Count())
	}
	other := make(chan *Lease)
	go func() { other <- r.Held() }()
	if got := <-other; got != nil {
		t.Fatalf("another goroutine's Held = %v", got)
	}
	if r.held(0) != nil {
		t.Fatal("Held for an unidentified goroutine")
	}
}
