package mutex_test

// Interoperability with Apache Curator 5.4's InterProcessMutex: a
// Java contender (internal/curatortest's CuratorMutex program) and Go locks
// (the fair reentrant Mutex and the NonReentrant one) on one lock path. The
// Java side gets the full server path (the Go sessions' namespace root plus
// the lock path).

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/internal/testkit/curatortest"
	"github.com/zkrecipes/zkrecipes/internal/testkit/sessiontest"
	"github.com/zkrecipes/zkrecipes/mutex"
	"github.com/zkrecipes/zkrecipes/recipes"
	"github.com/zkrecipes/zkrecipes/session"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// interopLockPath is the lock path of the interop tests, inside each test's
// namespace.
const interopLockPath = "/curator-lock"

// curatorLockNode is the name of an InterProcessMutex node, Curator's or ours.
var curatorLockNode = regexp.MustCompile(`^_c_[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}-lock-[0-9]{10}$`)

// Go and Java increment a counter under the lock, reading it and writing it
// back without a version check: only mutual exclusion keeps the count exact.
func TestCuratorMutexCounter(t *testing.T) {
	ctx := interopContext(t)
	ns := zktest.NewNamespace(t)
	counter := ns.Path("/curator-counter")
	if _, err := ns.Conn(t).Create(counter, []byte("0"), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	java := curatortest.StartMutex(t, ns.Servers(), ns.Path(interopLockPath))
	s1, s2 := sessiontest.Connect(t, ns), sessiontest.Connect(t, ns)
	fair := interopMutex(t, s1, "go-fair")
	nonReentrant := interopNonReentrant(t, s2, "go-nonreentrant")

	const cycles = 50
	type result struct {
		seen []int // counter values read under the lock
		err  error
	}
	results := make(chan result, 2)
	if err := java.BeginCycles(cycles, counter); err != nil {
		t.Fatal(err)
	}
	for _, w := range []struct {
		s *session.Session
		l mutex.Locker
	}{{s1, fair}, {s2, nonReentrant}} {
		go func() {
			seen, err := interopCycles(ctx, w.s.Conn(), w.l, counter, cycles)
			results <- result{seen, err}
		}()
	}
	var goSeen []int
	for i := 0; i < 2; i++ {
		r := <-results
		if r.err != nil {
			t.Error(r.err)
		}
		goSeen = append(goSeen, r.seen...)
	}
	if err := java.WaitCycles(ctx); err != nil {
		t.Fatal(err)
	}
	if t.Failed() {
		return
	}
	data, _, err := ns.Conn(t).Get(counter)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(data), strconv.Itoa(3*cycles); got != want {
		t.Fatalf("counter = %s, want %s: increments were lost, the locks did not exclude each other", got, want)
	}
	// Not a requirement (timing decides), but say how much Java and Go
	// actually interleaved: Java's increments are the values Go never read.
	sort.Ints(goSeen)
	runs, prevJava := 0, false
	for v, i := 0, 0; v < 3*cycles; v++ {
		isGo := i < len(goSeen) && goSeen[i] == v
		if isGo {
			i++
		} else if !prevJava {
			runs++
		}
		prevJava = !isGo
	}
	t.Logf("counter %d; Curator's %d increments came in %d runs between Go's", 3*cycles, cycles, runs)
}

// interopCycles runs n rounds of lock, read counter, write counter+1 with
// version -1, unlock; it returns the values it read.
func interopCycles(ctx context.Context, conn *zk.Conn, l mutex.Locker, counter string, n int) ([]int, error) {
	var seen []int
	for i := 0; i < n; i++ {
		lease, err := l.Lock(ctx)
		if err != nil {
			return seen, fmt.Errorf("cycle %d: lock: %w", i, err)
		}
		data, _, err := conn.Get(counter)
		var v int
		if err == nil {
			v, err = strconv.Atoi(string(data))
		}
		if err == nil {
			seen = append(seen, v)
			_, err = conn.Set(counter, []byte(strconv.Itoa(v+1)), -1)
		}
		if uerr := lease.Release(ctx); err == nil && uerr != nil {
			err = fmt.Errorf("unlock: %w", uerr)
		}
		if err != nil {
			return seen, fmt.Errorf("cycle %d: %w", i, err)
		}
	}
	return seen, nil
}

// Each side's nodes queue behind the other's, in one FIFO order: Java holds,
// the fair and the non-reentrant Go locks queue behind it and get the lock
// only after Java releases, one at a time; then Java queues behind Go and
// gets it only after the last Go holder unlocks.
func TestCuratorMutexQueue(t *testing.T) {
	ctx := interopContext(t)
	ns := zktest.NewNamespace(t)
	conn := ns.Conn(t)
	full := ns.Path(interopLockPath)
	java := curatortest.StartMutex(t, ns.Servers(), full)
	s1, s2 := sessiontest.Connect(t, ns), sessiontest.Connect(t, ns)
	fair := interopMutex(t, s1, "go-fair")
	nonReentrant := interopNonReentrant(t, s2, "go-nonreentrant")

	// Java holds; the Go locks queue behind it: fair first, then the
	// non-reentrant one (each joins once the previous node is there).
	j1, err := java.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	fairH := interopLockAsync(t, ctx, fair)
	interopWaitQueue(t, ctx, fair, 2)
	nonReentrantH := interopLockAsync(t, ctx, nonReentrant)
	q := interopWaitQueue(t, ctx, fair, 3)
	interopCheckQueue(t, q, j1.Name, "go-fair", "go-nonreentrant")
	interopCheckJavaQueue(t, ctx, java, q)
	fairH.notAcquired(t)
	nonReentrantH.notAcquired(t)
	if _, err := fair.TryLock(ctx); !errors.Is(err, recipes.ErrBusy) {
		t.Fatalf("TryLock while Curator holds: %v, want ErrBusy", err)
	}

	// Java releases: the fair Go lock (next in line) gets it, the
	// non-reentrant one still waits.
	released := time.Now()
	if err := java.Release(ctx); err != nil {
		t.Fatal(err)
	}
	fairA := fairH.wait(t, ctx)
	if !fairA.at.After(released) || fairA.lease.Node() != q[1].Node {
		t.Fatalf("go-fair got node %s at %s; want node %s after Curator's release at %s",
			fairA.lease.Node(), interopTime(fairA.at), q[1].Node, interopTime(released))
	}
	nonReentrantH.notAcquired(t)

	// Java queues behind both Go nodes.
	if err := java.BeginAcquire(); err != nil {
		t.Fatal(err)
	}
	javaID := q[0].ID // Curator's default node data: the local address
	if javaID == "" {
		t.Errorf("Curator's node %s has no data (participant id)", q[0].Node)
	}
	q = interopWaitQueue(t, ctx, fair, 3)
	interopCheckQueue(t, q, fairA.lease.Node(), "go-nonreentrant", javaID)
	interopCheckJavaQueue(t, ctx, java, q)
	if _, err := nonReentrant.TryLock(ctx); !errors.Is(err, recipes.ErrBusy) {
		t.Fatalf("NonReentrant TryLock while go-fair holds: %v, want ErrBusy", err)
	}

	// go-fair unlocks (from its own goroutine: it is reentrant): the
	// non-reentrant lock gets it; Java still waits.
	unlocked := time.Now()
	fairH.unlock(t)
	nrA := nonReentrantH.wait(t, ctx)
	if !nrA.at.After(unlocked) || nrA.lease.Node() != q[1].Node {
		t.Fatalf("go-nonreentrant got node %s at %s; want node %s after go-fair's unlock at %s",
			nrA.lease.Node(), interopTime(nrA.at), q[1].Node, interopTime(unlocked))
	}
	for _, l := range java.Lines() {
		if l.Word() == "ACQUIRED" && l.At.After(j1.At) {
			t.Fatalf("Curator acquired while go-nonreentrant holds: %v", l)
		}
	}

	// go-nonreentrant's lease is unlocked from the test's goroutine (not the
	// one that locked): Curator gets the lock.
	unlocked = time.Now()
	if err := nrA.lease.Release(ctx); err != nil {
		t.Fatal(err)
	}
	j2, err := java.WaitAcquired(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if j2.Name != q[2].Node || !j2.At.After(unlocked) {
		t.Fatalf("Curator got node %s at %s; want node %s after go-nonreentrant's unlock at %s",
			j2.Name, interopTime(j2.At), q[2].Node, interopTime(unlocked))
	}
	if err := java.Release(ctx); err != nil {
		t.Fatal(err)
	}
	zktest.Eventually(t, 10*time.Second, func() bool {
		kids, _, err := conn.Children(full)
		return errors.Is(err, zk.ErrNoNode) || (err == nil && len(kids) == 0)
	}, "no lock node left under %s", full)
}

// interopContext bounds a whole interop test, the Java programs' start (up
// to curatortest.ReadyTimeout each on a loaded machine) included: generous,
// as a bound on something that should happen is not what these tests check.
func interopContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func interopMutex(t *testing.T, s *session.Session, id string) *mutex.Reentrant {
	t.Helper()
	m, err := mutex.NewReentrant(s, interopLockPath, mutex.WithID(id))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

func interopNonReentrant(t *testing.T, s *session.Session, id string) *mutex.Mutex {
	t.Helper()
	m, err := mutex.New(s, interopLockPath, mutex.WithID(id))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

func interopTime(x time.Time) string { return x.Format("15:04:05.000000") }

// interopWaitQueue waits until the lock has n contenders (as the Go side
// reads them, in queue order) and returns them.
func interopWaitQueue(t *testing.T, ctx context.Context, m *mutex.Reentrant, n int) []recipes.Participant {
	t.Helper()
	var ps []recipes.Participant
	zktest.Eventually(t, 15*time.Second, func() bool {
		var err error
		ps, err = m.Participants(ctx)
		return err == nil && len(ps) == n
	}, "%d contenders", n)
	return ps
}

// interopCheckQueue checks the queue: first the node named first, then nodes
// with the given ids; Curator's name format and growing sequence numbers.
func interopCheckQueue(t *testing.T, q []recipes.Participant, first string, ids ...string) {
	t.Helper()
	if len(q) != 1+len(ids) || q[0].Node != first {
		t.Fatalf("queue %+v, want %s first, then %v", q, first, ids)
	}
	// The sequence number is the node name's suffix (Participant has no Seq
	// any more).
	seqs := make([]int64, len(q))
	for i, p := range q {
		if !curatorLockNode.MatchString(p.Node) {
			t.Errorf("lock node %q does not have Curator's name format", p.Node)
		}
		seq, err := strconv.ParseInt(p.Node[strings.LastIndex(p.Node, "-")+1:], 10, 64)
		if err != nil {
			t.Errorf("node %s: no sequence number: %v", p.Node, err)
		}
		seqs[i] = seq
		if i > 0 && seqs[i] <= seqs[i-1] {
			t.Errorf("queue %+v: sequence numbers not growing", q)
		}
		if i > 0 && p.ID != ids[i-1] {
			t.Errorf("queue position %d: id %q, want %q", i, p.ID, ids[i-1])
		}
	}
}

// interopCheckJavaQueue checks that Curator sees the same queue.
func interopCheckJavaQueue(t *testing.T, ctx context.Context, java *curatortest.Mutex, q []recipes.Participant) {
	t.Helper()
	names, err := java.Participants(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, p := range q {
		want = append(want, p.Node)
	}
	if strings.Join(names, " ") != strings.Join(want, " ") {
		t.Fatalf("Curator's queue %v, Go's %v", names, want)
	}
}

// interopHolder runs one Lock in its own goroutine; for a reentrant Mutex
// the same goroutine unlocks when asked.
type interopHolder struct {
	acquired chan interopAcquired
	unlockC  chan struct{}
	unlocked chan error
}

type interopAcquired struct {
	lease *mutex.Lease
	err   error
	at    time.Time // when Lock returned
}

// interopLockAsync starts l.Lock in a goroutine. The goroutine ends when the
// lease is unlocked through unlock (for a Mutex) or at once after Lock (for
// other kinds, whose lease the test unlocks itself); t.Cleanup cancels the
// Lock if it still waits and waits for the goroutine.
func interopLockAsync(t *testing.T, ctx context.Context, l mutex.Locker) *interopHolder {
	ctx, cancel := context.WithCancel(ctx)
	h := &interopHolder{
		acquired: make(chan interopAcquired, 1),
		unlockC:  make(chan struct{}),
		unlocked: make(chan error, 1),
	}
	_, reentrant := l.(*mutex.Reentrant)
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		lease, err := l.Lock(ctx)
		h.acquired <- interopAcquired{lease, err, time.Now()}
		if err != nil || !reentrant {
			return
		}
		select {
		case <-h.unlockC:
		case <-ctx.Done():
		}
		h.unlocked <- lease.Release(context.WithoutCancel(ctx))
	}()
	return h
}

// notAcquired fails the test if Lock has returned.
func (h *interopHolder) notAcquired(t *testing.T) {
	t.Helper()
	select {
	case a := <-h.acquired:
		t.Fatalf("Lock returned (node %v, err %v) while another contender holds the lock", a.lease, a.err)
	default:
	}
}

// wait waits for Lock to return and fails the test on error.
func (h *interopHolder) wait(t *testing.T, ctx context.Context) interopAcquired {
	t.Helper()
	select {
	case a := <-h.acquired:
		if a.err != nil {
			t.Fatalf("Lock: %v", a.err)
		}
		return a
	case <-ctx.Done():
		t.Fatalf("Lock did not return: %v", ctx.Err())
	}
	return interopAcquired{}
}

// unlock asks the locking goroutine to unlock and waits for the result.
func (h *interopHolder) unlock(t *testing.T) {
	t.Helper()
	h.unlockC <- struct{}{}
	if err := <-h.unlocked; err != nil {
		t.Fatalf("Release: %v", err)
	}
}
