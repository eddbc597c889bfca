package semaphore_test

import (
	"errors"
	"testing"

	"github.com/zkrecipes/zkrecipes/internal/testkit/sessiontest"
	"github.com/zkrecipes/zkrecipes/recipes"
	"github.com/zkrecipes/zkrecipes/semaphore"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// Three leases of a maximum of three are held at once, on Curator's znodes;
// a fourth waits and gets the lease given back.
func TestAcquireRelease(t *testing.T) {
	ns := zktest.NewNamespace(t)
	raw := ns.Conn(t)
	ctx := ctxT(t)
	a := newSem(t, connect(t, ns), 3, semaphore.WithID("a"))
	b := newSem(t, connect(t, ns), 3, semaphore.WithID("b"))
	var held []*semaphore.Lease
	for i := 0; i < 3; i++ {
		sem := a
		if i == 1 {
			sem = b
		}
		l, err := sem.Acquire(ctx)
		if err != nil {
			t.Fatalf("acquire %d: %v", i, err)
		}
		if !leaseNode.MatchString(l.Node()) {
			t.Errorf("lease node %q does not have Curator's name format", l.Node())
		}
		if err := l.Err(); err != nil {
			t.Fatalf("held lease Err = %v", err)
		}
		held = append(held, l)
	}
	if got := leases(t, raw, ns); len(got) != 3 {
		t.Fatalf("lease nodes = %v, want 3", got)
	}
	if got := children(t, raw, ns, semaphore.LocksDir); len(got) != 0 {
		t.Fatalf("acquirer mutex nodes left: %v", got)
	}
	if _, err := b.TryAcquire(ctx); !errors.Is(err, recipes.ErrBusy) {
		t.Fatalf("TryAcquire on a full semaphore: %v, want ErrBusy", err)
	}
	ps, err := a.Participants(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(ps) != 3 || ps[0].ID != "a" || ps[1].ID != "b" || ps[2].ID != "a" {
		t.Fatalf("participants = %+v", ps)
	}
	for i, p := range ps {
		if p.Node != held[i].Node() || p.Token != held[i].Token() || !p.Holds || p.Kind != "lease" {
			t.Fatalf("participant %d = %+v, lease node %s token %d, want it holding", i, p, held[i].Node(), held[i].Token())
		}
	}
	got := acquireAsync(ctx, b, 1)
	waitNodes(t, raw, ns, semaphore.LocksDir, 1) // it holds the mutex and waits
	notAcquired(t, got)
	if err := held[1].Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := held[1].Err(); !errors.Is(err, recipes.ErrReleased) {
		t.Fatalf("released lease Err = %v", err)
	}
	r := sessiontest.Recv(t, got, wait, "acquire")
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.ls[0].Token() <= held[2].Token() {
		t.Fatalf("token %d not above the earlier %d", r.ls[0].Token(), held[2].Token())
	}
	if err := releaseAll(ctx, append(held, r.ls...)); err != nil {
		t.Fatal(err)
	}
	waitNodes(t, raw, ns, semaphore.LeasesDir, 0)
	waitNodes(t, raw, ns, semaphore.LocksDir, 0)
}
