package semaphore_test

// Interoperability with Apache Curator 5.4's InterProcessSemaphoreV2,
// InterProcessSemaphoreMutex and SharedCount: Java participants
// (internal/curatortest's CuratorSemaphore program) and Go ones on one path.
// The Java side gets full server paths (the Go sessions' namespace root plus
// the path).

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/internal/testkit/curatortest"
	"github.com/zkrecipes/zkrecipes/internal/testkit/sessiontest"
	"github.com/zkrecipes/zkrecipes/recipes"
	"github.com/zkrecipes/zkrecipes/semaphore"
	"github.com/zkrecipes/zkrecipes/zktest"
)

func interopContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// createCounter creates a decimal counter node holding "0".
func createCounter(t *testing.T, c *zk.Conn, p string) {
	t.Helper()
	if _, err := c.Create(p, []byte("0"), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
}

// casAdd adds delta to the decimal counter at p by compare-and-set and
// returns the new value (as the Java side's cycles do).
func casAdd(c *zk.Conn, p string, delta int) (int, error) {
	for {
		data, st, err := c.Get(p)
		if err != nil {
			return 0, err
		}
		v, err := strconv.Atoi(string(data))
		if err != nil {
			return 0, err
		}
		v += delta
		_, err = c.Set(p, []byte(strconv.Itoa(v)), st.Version)
		if errors.Is(err, zk.ErrBadVersion) {
			continue
		}
		return v, err
	}
}

// goCycles runs n rounds of: acquire, add 1 to the holders counter (CAS),
// with a counter path read it and write it + 1 with version -1, hold, subtract
// 1, release; it returns the highest holders value it wrote.
func goCycles(ctx context.Context, c *zk.Conn, acquire func(context.Context) (*semaphore.Lease, error), n int, hold time.Duration, holders, counter string) (int, error) {
	maxSeen := 0
	for i := 0; i < n; i++ {
		l, err := acquire(ctx)
		if err != nil {
			return maxSeen, fmt.Errorf("cycle %d: %w", i, err)
		}
		h, err := casAdd(c, holders, 1)
		if err == nil {
			maxSeen = max(maxSeen, h)
			if counter != "" {
				var data []byte
				if data, _, err = c.Get(counter); err == nil {
					var v int
					if v, err = strconv.Atoi(string(data)); err == nil {
						_, err = c.Set(counter, []byte(strconv.Itoa(v+1)), -1)
					}
				}
			}
		}
		if err == nil {
			time.Sleep(hold) // the guarded work
			_, err = casAdd(c, holders, -1)
		}
		if rerr := l.Release(ctx); err == nil {
			err = rerr
		}
		if err != nil {
			return maxSeen, fmt.Errorf("cycle %d: %w", i, err)
		}
	}
	return maxSeen, nil
}

// Go and Java leases on one path with a maximum of 3: the holders, counted
// by compare-and-set on a shared counter at every acquire on both sides,
// never exceed 3; on the server the lease directory never holds more than 3
// nodes plus the one a waiting Curator acquirer keeps there.
func TestCuratorSemaphoreMixed(t *testing.T) {
	const maxLeases, cycles, hold = 3, 15, 20 * time.Millisecond
	ctx := interopContext(t)
	ns := zktest.NewNamespace(t)
	raw := ns.Conn(t)
	holders := ns.Path("/holders")
	createCounter(t, raw, holders)
	var javas []*curatortest.Semaphore
	for i := 0; i < 2; i++ {
		javas = append(javas, curatortest.StartSemaphore(t, ns.Servers(), ns.Path(semPath), curatortest.ModeMax, strconv.Itoa(maxLeases)))
	}
	stop := make(chan struct{})
	observed := watchLeases(t, ns.Conn(t), ns, stop)
	for _, j := range javas {
		if err := j.BeginCycles(cycles, hold, holders, ""); err != nil {
			t.Fatal(err)
		}
	}
	type result struct {
		seen int
		err  error
	}
	results := make(chan result, 3)
	var wg sync.WaitGroup
	for i := 0; i < 3; i++ {
		sem := newSem(t, connect(t, ns), maxLeases, semaphore.WithID(fmt.Sprint("go-", i)))
		c := ns.Conn(t)
		wg.Add(1)
		go func() {
			defer wg.Done()
			seen, err := goCycles(ctx, c, sem.Acquire, cycles, hold, holders, "")
			results <- result{seen, err}
		}()
	}
	wg.Wait()
	close(results)
	goMax := 0
	for r := range results {
		if r.err != nil {
			t.Error(r.err)
		}
		goMax = max(goMax, r.seen)
	}
	javaMax := 0
	for _, j := range javas {
		m, err := j.WaitCycles(ctx)
		if err != nil {
			t.Fatal(err)
		}
		javaMax = max(javaMax, m)
	}
	close(stop)
	most, reads := observed()
	t.Logf("holders at most: Go saw %d, Java saw %d; lease nodes at most %d (%d reads)", goMax, javaMax, most, reads)
	if goMax > maxLeases || javaMax > maxLeases {
		t.Fatalf("more than %d holders: Go saw %d, Java saw %d", maxLeases, goMax, javaMax)
	}
	if most > maxLeases+1 {
		t.Fatalf("%d lease nodes at once: more than %d holders and one Curator waiter", most, maxLeases)
	}
	if goMax < 2 && javaMax < 2 {
		t.Fatalf("holds never overlapped (Go %d, Java %d): the test proves nothing", goMax, javaMax)
	}
	waitNodes(t, raw, ns, semaphore.LeasesDir, 0)
	waitNodes(t, raw, ns, semaphore.LocksDir, 0)
}

// Go's Mutex and Curator's InterProcessSemaphoreMutex exclude each other: a
// counter read and written back without a version check under the lock by
// both sides loses no increment, and the holders counter never exceeds 1.
func TestCuratorSemaphoreMutexCounter(t *testing.T) {
	const cycles = 30
	ctx := interopContext(t)
	ns := zktest.NewNamespace(t)
	raw := ns.Conn(t)
	holders, counter := ns.Path("/holders"), ns.Path("/counter")
	createCounter(t, raw, holders)
	createCounter(t, raw, counter)
	java := curatortest.StartSemaphore(t, ns.Servers(), ns.Path(semPath), curatortest.ModeMutex, "")
	if err := java.BeginCycles(cycles, 0, holders, counter); err != nil {
		t.Fatal(err)
	}
	m, err := semaphore.NewMutex(connect(t, ns), semPath, semaphore.WithID("go"))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	goSeen, err := goCycles(ctx, ns.Conn(t), m.Acquire, cycles, 0, holders, counter)
	if err != nil {
		t.Fatal(err)
	}
	javaSeen, err := java.WaitCycles(ctx)
	if err != nil {
		t.Fatal(err)
	}
	data, _, err := raw.Get(counter)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("counter %s, holders at most: Go %d, Java %d", data, goSeen, javaSeen)
	if got, want := string(data), strconv.Itoa(2*cycles); got != want {
		t.Fatalf("counter = %s, want %s: increments were lost, the locks did not exclude each other", got, want)
	}
	if goSeen != 1 || javaSeen != 1 {
		t.Fatalf("holders at most: Go %d, Java %d, want 1", goSeen, javaSeen)
	}
}

// Leases go back and forth between Go and Java in queue order, and both see
// the same lease nodes (a waiting Curator acquirer's node included).
func TestCuratorSemaphoreHandoff(t *testing.T) {
	ctx := interopContext(t)
	ns := zktest.NewNamespace(t)
	raw := ns.Conn(t)
	java := curatortest.StartSemaphore(t, ns.Servers(), ns.Path(semPath), curatortest.ModeMax, "1")
	sem := newSem(t, connect(t, ns), 1, semaphore.WithID("go"))
	nodes, err := java.Acquire(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes) != 1 || !leaseNode.MatchString(nodes[0]) {
		t.Fatalf("Java lease nodes %v", nodes)
	}
	if _, err := sem.TryAcquire(ctx); !errors.Is(err, recipes.ErrBusy) {
		t.Fatalf("Go TryAcquire while Java holds = %v", err)
	}
	got := acquireAsync(ctx, sem, 1)
	waitNodes(t, raw, ns, semaphore.LocksDir, 1)
	notAcquired(t, got)
	if err := java.Release(ctx); err != nil {
		t.Fatal(err)
	}
	r := sessiontest.Recv(t, got, wait, "Go acquire after Java's release")
	if r.err != nil {
		t.Fatal(r.err)
	}
	// Java now waits, with its lease node in the directory.
	if err := java.BeginAcquire(1); err != nil {
		t.Fatal(err)
	}
	waitNodes(t, raw, ns, semaphore.LeasesDir, 2)
	ps, err := sem.Participants(ctx)
	if err != nil {
		t.Fatal(err)
	}
	jps, err := java.Participants(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(ps) != 2 || len(jps) != 2 || ps[0].Node != r.ls[0].Node() || ps[0].ID != "go" || jps[0] != ps[0].Node || jps[1] != ps[1].Node {
		t.Fatalf("Go participants %+v, Java participants %v", ps, jps)
	}
	if err := r.ls[0].Release(ctx); err != nil {
		t.Fatal(err)
	}
	nodes, err = java.WaitAcquired(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes) != 1 || nodes[0] != ps[1].Node {
		t.Fatalf("Java holds %v, its waiting node was %s", nodes, ps[1].Node)
	}
	if err := java.Release(ctx); err != nil {
		t.Fatal(err)
	}
	waitNodes(t, raw, ns, semaphore.LeasesDir, 0)
	waitNodes(t, raw, ns, semaphore.LocksDir, 0)
}

// A SharedCount written from Go is read by Curator's SharedCount and the
// other way round, in the same 4-byte format; each side's compare-and-set
// fails on a version the other side has changed.
func TestCuratorSharedCount(t *testing.T) {
	ctx := interopContext(t)
	ns := zktest.NewNamespace(t)
	raw := ns.Conn(t)
	c := newCount(t, connect(t, ns), countPath, 1)
	if v, err := c.Get(ctx); err != nil || v.Count != 1 {
		t.Fatalf("Get = %+v, %v", v, err)
	}
	java := curatortest.StartSemaphore(t, ns.Servers(), ns.Path("/unused-sem"), curatortest.ModeCount, ns.Path(countPath))
	if v, _, err := java.Count(ctx); err != nil || v != 1 {
		t.Fatalf("Java count = %d, %v; want Go's 1", v, err)
	}
	watch := c.Watch(ctx)
	if v := nextValue(t, watch); v.Count != 1 {
		t.Fatalf("Go watch = %+v", v)
	}

	// Go writes, Java reads (its listener, then its value).
	if _, err := c.Set(ctx, 5); err != nil {
		t.Fatal(err)
	}
	// Curator's listener may first report an earlier value (its own start
	// under load); it must come to report Go's 5.
	for {
		n, err := java.WaitChanged(ctx)
		if err != nil {
			t.Fatalf("Java listener: %v; want 5", err)
		}
		if n == 5 {
			break
		}
		if n != 1 {
			t.Fatalf("Java listener reported %d; want 1 then 5", n)
		}
	}
	if v, ver, err := java.Count(ctx); err != nil || v != 5 || ver != 1 {
		t.Fatalf("Java count = %d at version %d, %v; want 5 at 1", v, ver, err)
	}
	if v := nextValue(t, watch); v.Count != 5 {
		t.Fatalf("Go watch = %+v", v)
	}

	// Java writes, Go reads (its watch, then Get).
	if err := java.SetCount(ctx, 7); err != nil {
		t.Fatal(err)
	}
	if v := nextValue(t, watch); v.Count != 7 || v.Version != 2 {
		t.Fatalf("Go watch after Java's set = %+v, want 7 at version 2", v)
	}
	data, _, err := raw.Get(ns.Path(countPath))
	if err != nil || string(data) != string(be4(7)) {
		t.Fatalf("node data %x, %v; want %x", data, err, be4(7))
	}

	// Compare-and-set: Java's snapshot goes stale when Go writes.
	if v, _, err := java.Snapshot(ctx); err != nil || v != 7 {
		t.Fatalf("Java snapshot = %d, %v", v, err)
	}
	stale, err := c.Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, err := c.TrySet(ctx, stale, 8); err != nil || !ok {
		t.Fatalf("Go TrySet on the current version = %v, %v", ok, err)
	}
	if ok, err := java.TrySetCount(ctx, 9); err != nil || ok {
		t.Fatalf("Java trySetCount on a version Go changed = %v, %v; want false", ok, err)
	}
	// And Go's goes stale when Java writes.
	cur, err := c.Get(ctx)
	if err != nil || cur.Count != 8 {
		t.Fatalf("Get = %+v, %v", cur, err)
	}
	if err := java.SetCount(ctx, 10); err != nil {
		t.Fatal(err)
	}
	if now, ok, err := c.TrySet(ctx, cur, 11); err != nil || ok || now.Count != 10 {
		t.Fatalf("Go TrySet on a version Java changed = %+v, %v, %v; want 10, false", now, ok, err)
	}
}

// Go and Java semaphores share their maximum through one SharedCount:
// raising it from Go wakes a waiting Java acquirer, raising it from Java
// wakes a waiting Go acquirer.
func TestCuratorSharedCountSemaphore(t *testing.T) {
	ctx := interopContext(t)
	ns := zktest.NewNamespace(t)
	raw := ns.Conn(t)
	s := connect(t, ns)
	c := newCount(t, s, countPath, 1)
	if _, err := c.Get(ctx); err != nil { // the node exists with 1 for both
		t.Fatal(err)
	}
	sem := newShared(t, s, c)
	java := curatortest.StartSemaphore(t, ns.Servers(), ns.Path(semPath), curatortest.ModeCount, ns.Path(countPath))
	gl, err := sem.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := java.BeginAcquire(1); err != nil {
		t.Fatal(err)
	}
	waitNodes(t, raw, ns, semaphore.LeasesDir, 2) // Curator waits with its node
	if _, err := c.Set(ctx, 2); err != nil {
		t.Fatal(err)
	}
	if _, err := java.WaitAcquired(ctx); err != nil {
		t.Fatalf("Java acquire after Go raised the maximum: %v", err)
	}
	got := acquireAsync(ctx, sem, 1)
	waitNodes(t, raw, ns, semaphore.LocksDir, 1)
	notAcquired(t, got)
	if err := java.SetCount(ctx, 3); err != nil {
		t.Fatal(err)
	}
	r := sessiontest.Recv(t, got, wait, "Go acquire after Java raised the maximum")
	if r.err != nil {
		t.Fatal(r.err)
	}
	if k := leases(t, raw, ns); len(k) != 3 {
		t.Fatalf("lease nodes %v, want 3", k)
	}
	releaseAll(ctx, append(r.ls, gl))
	if err := java.Release(ctx); err != nil {
		t.Fatal(err)
	}
	waitNodes(t, raw, ns, semaphore.LeasesDir, 0)
}

// The pair that does NOT exclude: Curator's InterProcessMutex queues lock
// nodes directly under the path, this package's NewMutex holds a lease under
// <path>/leases, so both hold at once (README's table warns about it).
func TestCuratorInterProcessMutexDoesNotExclude(t *testing.T) {
	ctx := interopContext(t)
	ns := zktest.NewNamespace(t)
	java := curatortest.StartMutex(t, ns.Servers(), ns.Path(semPath))
	if _, err := java.Acquire(ctx); err != nil {
		t.Fatal(err)
	}
	m, err := semaphore.NewMutex(connect(t, ns), semPath)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	l, err := m.TryAcquire(ctx)
	if err != nil {
		t.Fatalf("TryAcquire while an InterProcessMutex holds the same path: %v (the two were expected not to exclude each other)", err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := java.Release(ctx); err != nil {
		t.Fatal(err)
	}
}
