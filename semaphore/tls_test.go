package semaphore_test

import (
	"errors"
	"testing"

	"github.com/zkrecipes/zkrecipes/internal/testkit/sessiontest"
	"github.com/zkrecipes/zkrecipes/recipes"
	"github.com/zkrecipes/zkrecipes/semaphore"
)

// The semaphore works over TLS (sessions on the secure port of the
// package's shared TLS server): two sessions hold both leases of a maximum
// of two, a third's TryAcquire fails with ErrBusy and its Acquire waits,
// and gets the lease given back; nothing is left behind.
func TestTLSAcquireRelease(t *testing.T) {
	ns := sessiontest.NamespaceTLS(t)
	raw := ns.Conn(t)
	ctx := ctxT(t)
	a := newSem(t, sessiontest.ConnectTLS(t, ns), 2, semaphore.WithID("a"))
	b := newSem(t, sessiontest.ConnectTLS(t, ns), 2, semaphore.WithID("b"))
	c := newSem(t, sessiontest.ConnectTLS(t, ns), 2, semaphore.WithID("c"))
	la, err := a.Acquire(ctx)
	if err != nil {
		t.Fatalf("acquire over TLS: %v", err)
	}
	lb, err := b.Acquire(ctx)
	if err != nil {
		t.Fatalf("acquire over TLS: %v", err)
	}
	if _, err := c.TryAcquire(ctx); !errors.Is(err, recipes.ErrBusy) {
		t.Fatalf("TryAcquire on a full semaphore: %v, want ErrBusy", err)
	}
	got := acquireAsync(ctx, c, 1)
	waitNodes(t, raw, ns, semaphore.LocksDir, 1) // it holds the mutex and waits
	notAcquired(t, got)
	if err := la.Release(ctx); err != nil {
		t.Fatal(err)
	}
	r := sessiontest.Recv(t, got, wait, "acquire")
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.ls[0].Token() <= lb.Token() {
		t.Errorf("token %d not above the earlier %d", r.ls[0].Token(), lb.Token())
	}
	if err := releaseAll(ctx, append([]*semaphore.Lease{lb}, r.ls...)); err != nil {
		t.Fatal(err)
	}
	waitNodes(t, raw, ns, semaphore.LeasesDir, 0)
	waitNodes(t, raw, ns, semaphore.LocksDir, 0)
}
