package mutex_test

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/mutex"
	"github.com/zkrecipes/zkrecipes/recipes"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// TestErrgroupChildrenQueueBehindParent: with the default,
// non-reentrant Mutex, a parent goroutine that holds the lock may start
// children (as an errgroup does) that take the same lock: they queue behind
// the parent instead of deadlocking or re-entering, the parent's lease may be
// unlocked from a child, and Held says whether this process holds the lock.
func TestErrgroupChildrenQueueBehindParent(t *testing.T) {
	ns := zktest.NewNamespace(t)
	raw := ns.Conn(t)
	m, err := mutex.New(connect(t, ns), lockPath)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	ctx := ctxT(t)
	if m.Held() {
		t.Fatal("Held before any Lock")
	}
	parent, err := m.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !m.Held() {
		t.Fatal("Held false while the parent holds the lock")
	}

	const children = 3
	var wg sync.WaitGroup
	errs := make(chan error, children+1)
	var mu sync.Mutex
	inside := 0 // children inside the critical section at once
	for i := 0; i < children; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l, err := m.Lock(ctx)
			if err != nil {
				errs <- err
				return
			}
			mu.Lock()
			inside++
			if inside != 1 {
				errs <- errors.New("two children held the lock at once")
			}
			mu.Unlock()
			if parent.Err() == nil {
				errs <- errors.New("a child held the lock while the parent's lease was live")
			}
			mu.Lock()
			inside--
			mu.Unlock()
			if err := l.Release(ctx); err != nil {
				errs <- err
			}
		}()
	}
	// The children are queued behind the parent (their nodes exist) before
	// one of them is handed the parent's lease to unlock.
	waitKids(t, raw, ns, 1+children)
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := parent.Release(ctx); err != nil { // unlocked by another goroutine
			errs <- err
		}
	}()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	waitKids(t, raw, ns, 0)
	if m.Held() {
		t.Fatal("Held after every lease was unlocked")
	}
}

// TestHeldFalseAfterLoss: Held counts only leases that have not ended: a
// lease of each kind whose node a third party deleted ends (ErrNodeDeleted), and
// Held then says false although the lease was never unlocked.
func TestHeldFalseAfterLoss(t *testing.T) {
	ns := zktest.NewNamespace(t)
	raw := ns.Conn(t)
	s := connect(t, ns)
	ctx := ctxT(t)
	type heldLock struct {
		name string
		held func() bool
		lock func() (*mutex.Lease, error)
	}
	m, err := mutex.New(s, lockPath+"/fair")
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	r, err := mutex.NewReentrant(s, lockPath+"/reentrant")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	nf, err := mutex.NewNonFair(s, lockPath+"/nonfair")
	if err != nil {
		t.Fatal(err)
	}
	defer nf.Close()
	for _, k := range []heldLock{
		{"fair", m.Held, func() (*mutex.Lease, error) { return m.Lock(ctx) }},
		{"reentrant", r.Held, func() (*mutex.Lease, error) { return r.Lock(ctx) }},
		{"nonfair", nf.Held, func() (*mutex.Lease, error) { return nf.Lock(ctx) }},
	} {
		l, err := k.lock()
		if err != nil {
			t.Fatalf("%s: %v", k.name, err)
		}
		if !k.held() {
			t.Fatalf("%s: Held false while the lease is held", k.name)
		}
		if err := raw.Delete(mutex.NodePath(l), -1); err != nil {
			t.Fatalf("%s: third-party delete: %v", k.name, err)
		}
		select {
		case <-l.Done():
		case <-time.After(wait):
			t.Fatalf("%s: the lease did not end within %v of its node's deletion", k.name, wait)
		}
		if !errors.Is(l.Err(), recipes.ErrNodeDeleted) {
			t.Fatalf("%s: lease ended with %v, want ErrNodeDeleted", k.name, l.Err())
		}
		if k.held() {
			t.Fatalf("%s: Held true after the lease ended", k.name)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatalf("%s: Release after the loss: %v", k.name, err)
		}
	}
}
