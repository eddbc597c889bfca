package mutex_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/internal/testkit/sessiontest"
	"github.com/zkrecipes/zkrecipes/mutex"
	"github.com/zkrecipes/zkrecipes/recipes"
	"github.com/zkrecipes/zkrecipes/session"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// scaleLeases is how many per-key locks the scale tests hold on one session
// (examples/keyload measures 10,000).
const scaleLeases = 2000

// scaleSession is the session timeout of the scale tests.
const scaleSession = 5 * time.Second

// scaleWorkers goroutines take the locks.
const scaleWorkers = 64

// holdPerKey takes a fair lock on each of n new paths under root on s, from
// scaleWorkers goroutines, and waits until every lease watches its node.
func holdPerKey(t *testing.T, s *session.Session, root string, n int) ([]*mutex.Mutex, []*mutex.Lease) {
	t.Helper()
	ms := make([]*mutex.Mutex, n)
	ls := make([]*mutex.Lease, n)
	for i := range ms {
		m, err := mutex.New(s, fmt.Sprintf("%s/k%d", root, i))
		if err != nil {
			t.Fatal(err)
		}
		ms[i] = m
	}
	ctx := ctxT(t)
	errs := make(chan error, scaleWorkers)
	var wg sync.WaitGroup
	for w := 0; w < scaleWorkers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := w; i < n; i += scaleWorkers {
				l, err := ms[i].Lock(ctx)
				if err != nil {
					errs <- fmt.Errorf("lock %d: %w", i, err)
					return
				}
				ls[i] = l
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	// Every held lease sets its own-node watch 100 ms after the acquire.
	core := sessiontest.Core(s)
	zktest.Eventually(t, wait, func() bool { return core.NodeSubs() == n }, fmt.Sprintf("%d own-node watches", n))
	return ms, ls
}

// goroutinesAtMost waits until the process runs at most max goroutines
// (those that set the watches exit once they are set).
func goroutinesAtMost(t *testing.T, max int, what string) {
	t.Helper()
	zktest.Eventually(t, wait, func() bool { return runtime.NumGoroutine() <= max },
		fmt.Sprintf("at most %d goroutines %s (now %d)", max, what, runtime.NumGoroutine()))
}

// TestScaleHeldLeases: thousands of per-key locks held on one session cost
// no goroutine each, and every promise of a held lease holds at that scale:
// a third party deleting one node ends exactly that lease, promptly; a
// suspension ends every lease; Close deletes every node.
func TestScaleHeldLeases(t *testing.T) {
	ns := zktest.NewNamespace(t)
	raw := ns.Conn(t)
	// A session timeout that a busy machine's stalls do not reach while
	// thousands of locks are taken.
	s, p := sessiontest.ConnectProxy(t, ns, session.WithSessionTimeout(scaleSession))
	rec := sessiontest.Record(t, s)
	base := runtime.NumGoroutine()
	ms, ls := holdPerKey(t, s, "/scale", scaleLeases)
	// A fixed number per session (the arm queue's, while it drains), not
	// one per lease.
	goroutinesAtMost(t, base+8, fmt.Sprintf("with %d leases held", scaleLeases))

	// A third party deletes one node: that lease ends, the others hold.
	victim := scaleLeases / 2
	start := time.Now()
	if err := raw.Delete(mutex.NodePath(ls[victim]), -1); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ls[victim].Done():
	case <-time.After(wait):
		t.Fatalf("the lease whose node was deleted did not end within %v", wait)
	}
	t.Logf("the deleted node's lease ended %v after the delete", time.Since(start).Round(time.Millisecond))
	if err := ls[victim].Err(); !errors.Is(err, recipes.ErrNodeDeleted) {
		t.Fatalf("the deleted node's lease ended with %v, want ErrNodeDeleted", err)
	}
	for i, l := range ls {
		if i != victim && l.Err() != nil {
			t.Fatalf("lease %d ended with %v when another lease's node was deleted", i, l.Err())
		}
	}
	if n := sessiontest.Core(s).NodeSubs(); n != scaleLeases-1 {
		t.Fatalf("%d own-node watches after one node was deleted, want %d", n, scaleLeases-1)
	}

	// A suspension ends every lease.
	p.Partition()
	rec.Wait(t, wait, session.Suspended)
	for i, l := range ls {
		select {
		case <-l.Done():
		default:
			t.Fatalf("lease %d still held after the suspension", i)
		}
		if i != victim && !errors.Is(l.Err(), session.ErrSuspended) {
			t.Fatalf("lease %d ended with %v, want ErrSuspended", i, l.Err())
		}
	}
	p.Heal()
	rec.Wait(t, wait, session.Reconnected)
	// Their nodes go through the session's queue once the connection is
	// back (the session was not lost).
	zktest.Eventually(t, wait, func() bool { return keysEmpty(t, raw, ns, scaleLeases) },
		"every node of the suspended leases deleted")
	for _, m := range ms {
		m.Close()
	}
	if n := sessiontest.Core(s).NodeSubs(); n != 0 {
		t.Fatalf("%d own-node subscriptions left after every lease ended", n)
	}
}

// TestScaleCloseDeletesAll: closing thousands of per-key locks deletes every
// node, on a session that stays open.
func TestScaleCloseDeletesAll(t *testing.T) {
	ns := zktest.NewNamespace(t)
	raw := ns.Conn(t)
	s := sessiontest.Connect(t, ns, session.WithSessionTimeout(scaleSession))
	base := runtime.NumGoroutine()
	heap0 := liveHeap()
	ms, ls := holdPerKey(t, s, "/scale", scaleLeases)
	goroutinesAtMost(t, base+8, fmt.Sprintf("with %d leases held", scaleLeases))
	// The package documentation's bound (examples/keyload measures it).
	perLease := (int64(liveHeap()) - int64(heap0)) / scaleLeases
	t.Logf("heap per held lease, its Mutex included: %d B", perLease)
	if perLease >= 2048 {
		t.Errorf("%d B of heap per held lease (its Mutex included), want less than 2 KB", perLease)
	}
	runtime.KeepAlive(ms)
	for _, m := range ms {
		if err := m.Close(); err != nil {
			t.Fatal(err)
		}
	}
	for i, l := range ls {
		if !errors.Is(l.Err(), session.ErrClosed) {
			t.Fatalf("lease %d after Close: %v, want ErrClosed", i, l.Err())
		}
	}
	// Close returns once the deletes are done on a healthy connection.
	if !keysEmpty(t, raw, ns, scaleLeases) {
		t.Fatal("nodes left after Close")
	}
	if n := sessiontest.Core(s).NodeSubs(); n != 0 {
		t.Fatalf("%d own-node subscriptions left after Close", n)
	}
	if err := ls[0].Release(context.Background()); err != nil {
		t.Fatalf("Release after Close: %v", err)
	}
}

// liveHeap returns the bytes of live heap after a collection.
func liveHeap() uint64 {
	runtime.GC()
	var st runtime.MemStats
	runtime.ReadMemStats(&st)
	return st.HeapAlloc
}

// keysEmpty reports whether none of the n key directories under /scale has
// a child left (a reaped container counts as empty).
func keysEmpty(t *testing.T, raw *zk.Conn, ns *zktest.Namespace, n int) bool {
	t.Helper()
	for i := 0; i < n; i++ {
		kids, _, err := raw.Children(ns.Path(fmt.Sprintf("/scale/k%d", i)))
		if errors.Is(err, zk.ErrNoNode) {
			continue
		}
		if err != nil {
			t.Fatalf("children of key %d: %v", i, err)
		}
		if len(kids) > 0 {
			return false
		}
	}
	return true
}
