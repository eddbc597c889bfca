package semaphore_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/internal/testkit/sessiontest"
	"github.com/zkrecipes/zkrecipes/recipes"
	"github.com/zkrecipes/zkrecipes/semaphore"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// watchLeases counts the children of the lease directory at every change
// (a raw connection re-reading with a child watch) until stop is closed, and
// returns a function that reports the highest count seen and how many reads.
func watchLeases(t testing.TB, c *zk.Conn, ns *zktest.Namespace, stop <-chan struct{}) func() (max, reads int) {
	t.Helper()
	dir := ns.Path(semPath + "/" + semaphore.LeasesDir)
	var mu sync.Mutex
	var most, reads int
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			kids, _, ch, err := c.ChildrenW(dir)
			if errors.Is(err, zk.ErrNoNode) {
				var ok bool
				ok, _, ch, err = c.ExistsW(dir)
				if err == nil && ok {
					continue
				}
			}
			if err != nil {
				return
			}
			mu.Lock()
			most, reads = max(most, len(kids)), reads+1
			mu.Unlock()
			select {
			case <-ch:
			case <-stop:
				return
			}
		}
	}()
	return func() (int, int) {
		<-done
		mu.Lock()
		defer mu.Unlock()
		return most, reads
	}
}

// N+1 sessions (two goroutines each) contend for N leases: never more than N
// holders, counted in this process at every acquire and on the server at
// every change of the lease directory.
func TestNeverOverMax(t *testing.T) {
	const max, sessions, perWorker = 3, 4, 10
	ns := zktest.NewNamespace(t)
	ctx := ctxT(t)
	stop := make(chan struct{})
	observed := watchLeases(t, ns.Conn(t), ns, stop)
	var holders, peak, total atomic.Int64
	errs := make(chan error, 2*sessions)
	var wg sync.WaitGroup
	for i := 0; i < sessions; i++ {
		sem := newSem(t, connect(t, ns), max, semaphore.WithID(fmt.Sprint("s", i)))
		for g := 0; g < 2; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for k := 0; k < perWorker; k++ {
					l, err := sem.Acquire(ctx)
					if err != nil {
						errs <- err
						return
					}
					h := holders.Add(1)
					for p := peak.Load(); h > p && !peak.CompareAndSwap(p, h); p = peak.Load() {
					}
					total.Add(1)
					time.Sleep(25 * time.Millisecond) // the guarded work, so that holds overlap
					holders.Add(-1)
					if err := l.Release(ctx); err != nil {
						errs <- err
						return
					}
				}
			}()
		}
	}
	wg.Wait()
	close(stop)
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	most, reads := observed()
	t.Logf("%d acquisitions; at most %d holders in process, %d lease nodes on the server (%d reads)", total.Load(), peak.Load(), most, reads)
	if p := peak.Load(); p > max {
		t.Fatalf("%d leases held at once in process, maximum %d", p, max)
	}
	if most > max {
		t.Fatalf("%d lease nodes on the server at once, maximum %d", most, max)
	}
	if peak.Load() < 2 {
		t.Fatalf("holds never overlapped (peak %d): the test proves nothing", peak.Load())
	}
}

// Acquirers are served in the order they queued: the first queues on the
// mutex and waits for room while holding it, the second queues behind it.
func TestFIFO(t *testing.T) {
	ns := zktest.NewNamespace(t)
	raw := ns.Conn(t)
	ctx := ctxT(t)
	holder := newSem(t, connect(t, ns), 1)
	a := newSem(t, connect(t, ns), 1)
	b := newSem(t, connect(t, ns), 1)
	hl, err := holder.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ga := acquireAsync(ctx, a, 1)
	waitNodes(t, raw, ns, semaphore.LocksDir, 1)
	gb := acquireAsync(ctx, b, 1)
	waitNodes(t, raw, ns, semaphore.LocksDir, 2)
	if err := hl.Release(ctx); err != nil {
		t.Fatal(err)
	}
	ra := sessiontest.Recv(t, ga, wait, "first acquire")
	if ra.err != nil {
		t.Fatal(ra.err)
	}
	notAcquired(t, gb) // a holds the only lease: b cannot have it
	if err := ra.ls[0].Release(ctx); err != nil {
		t.Fatal(err)
	}
	rb := sessiontest.Recv(t, gb, wait, "second acquire")
	if rb.err != nil {
		t.Fatal(rb.err)
	}
	if rb.ls[0].Token() <= ra.ls[0].Token() {
		t.Fatalf("tokens not increasing: %d then %d", ra.ls[0].Token(), rb.ls[0].Token())
	}
	rb.ls[0].Release(ctx)
}

// AcquireN takes its leases in one transaction when enough are free: while
// it waits it holds none (no part held while waiting for the rest), and two
// AcquireN callers that could each hold a part never block each other.
func TestAcquireNAllOrNone(t *testing.T) {
	ns := zktest.NewNamespace(t)
	raw := ns.Conn(t)
	ctx := ctxT(t)
	h := newSem(t, connect(t, ns), 3)
	a := newSem(t, connect(t, ns), 3)
	b := newSem(t, connect(t, ns), 3)
	hl, err := h.AcquireN(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(hl) != 2 || hl[0].Token() != hl[1].Token() || hl[0].Node() == hl[1].Node() {
		t.Fatalf("AcquireN(2) = %d leases, tokens %d/%d", len(hl), hl[0].Token(), hl[len(hl)-1].Token())
	}
	if got := h.Held(); got != 2 {
		t.Fatalf("Held = %d, want 2", got)
	}
	ga := acquireAsync(ctx, a, 2)
	waitNodes(t, raw, ns, semaphore.LocksDir, 1)
	gb := acquireAsync(ctx, b, 2)
	waitNodes(t, raw, ns, semaphore.LocksDir, 2)
	// One lease is free, two are asked for: a waits and holds none of them.
	if got := leases(t, raw, ns); len(got) != 2 {
		t.Fatalf("lease nodes while AcquireN(2) waits with one free: %v", got)
	}
	notAcquired(t, ga)
	if err := releaseAll(ctx, hl); err != nil {
		t.Fatal(err)
	}
	ra := sessiontest.Recv(t, ga, wait, "a's AcquireN")
	if ra.err != nil {
		t.Fatal(ra.err)
	}
	if len(ra.ls) != 2 {
		t.Fatalf("a got %d leases", len(ra.ls))
	}
	// b now waits for two with one free, and holds none.
	waitNodes(t, raw, ns, semaphore.LocksDir, 1)
	if got := leases(t, raw, ns); len(got) != 2 {
		t.Fatalf("lease nodes: %v", got)
	}
	notAcquired(t, gb)
	if err := ra.ls[0].Release(ctx); err != nil {
		t.Fatal(err)
	}
	rb := sessiontest.Recv(t, gb, wait, "b's AcquireN")
	if rb.err != nil {
		t.Fatal(rb.err)
	}
	releaseAll(ctx, append(ra.ls[1:], rb.ls...))
	waitNodes(t, raw, ns, semaphore.LeasesDir, 0)
}

// TryAcquire succeeds while a lease is free, fails with ErrBusy when all
// are held or another acquirer holds the mutex, and leaves no node.
func TestTryAcquire(t *testing.T) {
	ns := zktest.NewNamespace(t)
	raw := ns.Conn(t)
	ctx := ctxT(t)
	a := newSem(t, connect(t, ns), 2)
	b := newSem(t, connect(t, ns), 2)
	l1, err := a.TryAcquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	l2, err := b.TryAcquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.TryAcquire(ctx); !errors.Is(err, recipes.ErrBusy) {
		t.Fatalf("TryAcquire when full = %v", err)
	}
	got := acquireAsync(ctx, b, 1) // holds the mutex, waiting
	waitNodes(t, raw, ns, semaphore.LocksDir, 1)
	if _, err := a.TryAcquire(ctx); !errors.Is(err, recipes.ErrBusy) {
		t.Fatalf("TryAcquire while another acquirer holds the mutex = %v", err)
	}
	if k := children(t, raw, ns, semaphore.LocksDir); len(k) != 1 {
		t.Fatalf("TryAcquire left a node: %v", k)
	}
	l1.Release(ctx)
	r := sessiontest.Recv(t, got, wait, "acquire")
	if r.err != nil {
		t.Fatal(r.err)
	}
	releaseAll(ctx, append(r.ls, l2))
	waitNodes(t, raw, ns, semaphore.LeasesDir, 0)
}

// Canceling an acquire, whether it queues on the mutex or holds it waiting
// for room, and canceling an AcquireN, leaves no node; the holders keep
// their leases.
func TestCancelLeavesNoNode(t *testing.T) {
	for _, n := range []int{1, 2} {
		t.Run(fmt.Sprint("n=", n), func(t *testing.T) {
			ns := zktest.NewNamespace(t)
			raw := ns.Conn(t)
			ctx := ctxT(t)
			h := newSem(t, connect(t, ns), 2)
			hl, err := h.AcquireN(ctx, 2)
			if err != nil {
				t.Fatal(err)
			}
			a, b := newSem(t, connect(t, ns), 2), newSem(t, connect(t, ns), 2)
			actx, acancel := context.WithCancel(ctx)
			bctx, bcancel := context.WithCancel(ctx)
			defer acancel()
			defer bcancel()
			ga := acquireAsync(actx, a, n)
			waitNodes(t, raw, ns, semaphore.LocksDir, 1)
			gb := acquireAsync(bctx, b, n)
			waitNodes(t, raw, ns, semaphore.LocksDir, 2)
			bcancel() // queued on the mutex
			if r := sessiontest.Recv(t, gb, wait, "b's acquire"); !errors.Is(r.err, context.Canceled) || r.ls != nil {
				t.Fatalf("canceled queued acquire = %v, %v", r.ls, r.err)
			}
			waitNodes(t, raw, ns, semaphore.LocksDir, 1)
			acancel() // holding the mutex, waiting for room
			if r := sessiontest.Recv(t, ga, wait, "a's acquire"); !errors.Is(r.err, context.Canceled) || r.ls != nil {
				t.Fatalf("canceled waiting acquire = %v, %v", r.ls, r.err)
			}
			waitNodes(t, raw, ns, semaphore.LocksDir, 0)
			if got := leases(t, raw, ns); len(got) != 2 {
				t.Fatalf("lease nodes after the cancels: %v", got)
			}
			for _, l := range hl {
				if err := l.Err(); err != nil {
					t.Fatalf("holder's lease ended: %v", err)
				}
			}
			releaseAll(ctx, hl)
			waitNodes(t, raw, ns, semaphore.LeasesDir, 0)
		})
	}
}

// A deadline that ends while the acquire waits returns DeadlineExceeded
// within the deadline plus a little, and leaves no node.
func TestDeadlineWhileWaiting(t *testing.T) {
	ns := zktest.NewNamespace(t)
	raw := ns.Conn(t)
	ctx := ctxT(t)
	h := newSem(t, connect(t, ns), 1)
	hl, err := h.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer hl.Release(ctx)
	w := newSem(t, connect(t, ns), 1)
	const d = 300 * time.Millisecond
	dctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	start := time.Now()
	_, err = w.Acquire(dctx)
	took := time.Since(start)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Acquire past its deadline = %v", err)
	}
	t.Logf("returned %v after a %v deadline", took, d)
	if took > d+time.Second {
		t.Fatalf("returned %v after a %v deadline", took, d)
	}
	waitNodes(t, raw, ns, semaphore.LocksDir, 0)
}

// The semaphore of one lease (NewMutex): one holder, TryAcquire fails, the
// first participant (the holder) and Held say who.
func TestMutexBasic(t *testing.T) {
	ns := zktest.NewNamespace(t)
	ctx := ctxT(t)
	s1, s2 := connect(t, ns), connect(t, ns)
	m1, err := semaphore.NewMutex(s1, semPath, semaphore.WithID("m1"))
	if err != nil {
		t.Fatal(err)
	}
	defer m1.Close()
	m2, err := semaphore.NewMutex(s2, semPath, semaphore.WithID("m2"))
	if err != nil {
		t.Fatal(err)
	}
	defer m2.Close()
	if _, ok, err := holder(ctx, m1); err != nil || ok {
		t.Fatalf("Holder of a free lock = %v, %v", ok, err)
	}
	l, err := m1.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if m1.Held() != 1 || m2.Held() != 0 {
		t.Fatalf("Held = %v, %v", m1.Held(), m2.Held())
	}
	if _, err := m2.TryAcquire(ctx); !errors.Is(err, recipes.ErrBusy) {
		t.Fatalf("TryAcquire of a held lock = %v", err)
	}
	p, ok, err := holder(ctx, m2)
	if err != nil || !ok || p.ID != "m1" || p.Node != l.Node() || p.SessionID != s1.SessionID() {
		t.Fatalf("Holder = %+v, %v, %v", p, ok, err)
	}
	got := make(chan error, 1)
	go func() {
		l2, err := m2.Acquire(ctx)
		if err == nil {
			err = l2.Release(ctx)
		}
		got <- err
	}()
	waitNodes(t, ns.Conn(t), ns, semaphore.LocksDir, 1)
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if m1.Held() != 0 {
		t.Fatal("Held after Release")
	}
	if err := sessiontest.Recv(t, got, wait, "second Acquire"); err != nil {
		t.Fatal(err)
	}
}
