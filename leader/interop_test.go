package leader_test

// Interoperability with Apache Curator 5.4's LeaderLatch: a Java
// participant (internal/curatortest's CuratorLatch program) and Go latches on
// one election path. The Java side gets the full server path (the Go
// sessions' namespace root plus the election path).

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/internal/testkit/curatortest"
	"github.com/zkrecipes/zkrecipes/internal/testkit/sessiontest"
	"github.com/zkrecipes/zkrecipes/leader"
	"github.com/zkrecipes/zkrecipes/recipes"
	"github.com/zkrecipes/zkrecipes/session"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// interopPath is the election path of the interop tests, inside each test's
// namespace.
const interopPath = "/curator-election"

// curatorLatchNode is the name of a LeaderLatch node, Curator's or ours.
var curatorLatchNode = regexp.MustCompile(`^_c_[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}-latch-[0-9]{10}$`)

// A Go leader hands over to Java and Java to Go, on one path, with the same
// participants and leader seen from both sides and never two leaders.
func TestCuratorLatchInterop(t *testing.T) {
	ctx := interopContext(t)
	ns := zktest.NewNamespace(t)
	conn := ns.Conn(t)
	full := ns.Path(interopPath)
	rec := newInteropRecorder(t)

	java := curatortest.StartLatch(t, ns.Servers(), full, "java-1")
	s1, s2 := sessiontest.Connect(t, ns), sessiontest.Connect(t, ns)

	// Queue: go-1 (leads), java-1, go-2. Each joins once the previous one's
	// node is there, so the order is known.
	g1 := interopNewLatch(t, rec, s1, "go-1")
	term1 := interopAwait(t, ctx, g1)
	if err := java.Start(ctx); err != nil {
		t.Fatal(err)
	}
	interopWaitIDs(t, ctx, s1, "go-1", "java-1")
	g2 := interopNewLatch(t, rec, s2, "go-2")
	interopWaitIDs(t, ctx, s1, "go-1", "java-1", "go-2")

	// Both sides' nodes have Curator's name format.
	kids, _, err := conn.Children(full)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range kids {
		if !curatorLatchNode.MatchString(k) {
			t.Errorf("latch node %q does not have Curator's format", k)
		}
	}
	// Java sees the Go participants' ids and the Go leader.
	interopJavaSees(t, ctx, java, "go-1", "go-1", "java-1", "go-2")
	if p, _, err := leader.Leader(ctx, s2, interopPath); err != nil || p.ID != "go-1" {
		t.Fatalf("Leader = %+v, %v; want go-1", p, err)
	}
	interopOneLeader(t, ctx, java, "go-1", g1, g2)

	// Go -> Java: go-1 closes, java-1 (next in line) leads, go-2 does not.
	if err := g1.Close(); err != nil {
		t.Fatalf("go-1 Close: %v", err)
	}
	if !errors.Is(term1.Err(), session.ErrClosed) {
		t.Errorf("go-1's term ended with %v, want ErrClosed", term1.Err())
	}
	javaLeader, err := java.WaitLeader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	javaTerm := interopInterval{start: javaLeader.At}
	interopOneLeader(t, ctx, java, "java-1", g2)
	interopGoSees(t, ctx, s2, "java-1", "java-1", "go-2")
	interopJavaSees(t, ctx, java, "java-1", "java-1", "go-2")

	// Java -> Go: java-1 closes its latch, go-2 leads.
	javaTerm.end = time.Now()
	if err := java.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := java.WaitNotLeader(ctx); err != nil {
		t.Fatal(err)
	}
	term2 := interopAwait(t, ctx, g2)
	if !term2.Started().After(javaTerm.end) {
		t.Errorf("go-2 led at %s, before java-1 was asked to close at %s",
			term2.Started().Format("15:04:05.000000"), javaTerm.end.Format("15:04:05.000000"))
	}
	interopOneLeader(t, ctx, java, "go-2", g2)
	interopGoSees(t, ctx, s2, "go-2", "go-2")
	interopJavaSees(t, ctx, java, "go-2", "go-2")

	if tr := java.Transitions(); len(tr) != 2 || tr[0].Word() != "LEADER" || tr[1].Word() != "NOTLEADER" {
		t.Errorf("java-1's transitions %v, want LEADER then NOTLEADER", tr)
	}
	rec.settle(t, term1, term2)
	rec.check(t, javaTerm)
}

// The Java leader's process dies: once its session expires a Go latch leads,
// never before. The Java client asks for a short session timeout, the wait
// for its expiry.
func TestCuratorLatchInteropJavaDies(t *testing.T) {
	ctx := interopContext(t)
	ns := zktest.NewNamespace(t)
	full := ns.Path(interopPath)
	rec := newInteropRecorder(t)

	java := curatortest.StartLatch(t, ns.Servers(), full, "java-1", curatortest.WithSessionTimeout(curatortest.ShortSessionTimeout))
	if err := java.Start(ctx); err != nil {
		t.Fatal(err)
	}
	line, err := java.WaitLeader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	javaTerm := interopInterval{start: line.At}
	s1, s2 := sessiontest.Connect(t, ns), sessiontest.Connect(t, ns)
	g1 := interopNewLatch(t, rec, s1, "go-1")
	interopWaitIDs(t, ctx, s1, "java-1", "go-1")
	g2 := interopNewLatch(t, rec, s2, "go-2")
	interopWaitIDs(t, ctx, s1, "java-1", "go-1", "go-2")
	interopGoSees(t, ctx, s2, "java-1", "java-1", "go-1", "go-2")
	interopJavaSees(t, ctx, java, "java-1", "java-1", "go-1", "go-2")
	interopOneLeader(t, ctx, java, "java-1", g1, g2)

	javaTerm.end = time.Now()
	java.Kill() // no close: its node goes when the server expires the session
	term := interopAwait(t, ctx, g1)
	if !term.Started().After(javaTerm.end) {
		t.Errorf("go-1 led at %s, before java-1 was killed at %s",
			term.Started().Format("15:04:05.000000"), javaTerm.end.Format("15:04:05.000000"))
	}
	if g2.IsLeader() {
		t.Errorf("go-2 leads together with go-1")
	}
	interopGoSees(t, ctx, s2, "go-1", "go-1", "go-2")
	rec.settle(t, term)
	rec.check(t, javaTerm)
}

// interopContext bounds a whole interop test, the Java programs' start (up
// to curatortest.ReadyTimeout each on a loaded machine) and a Curator
// session's expiry included: generous, as a bound on something that should
// happen is not what these tests check.
func interopContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// interopNewLatch creates and starts a Go latch with the given id on
// interopPath, has rec follow it, and closes it in t.Cleanup.
func interopNewLatch(t *testing.T, rec *interopRecorder, s *session.Session, id string) *leader.Latch {
	t.Helper()
	l, err := leader.NewLatch(s, interopPath, leader.WithID(id))
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	rec.follow(t, l)
	return l
}

func interopAwait(t *testing.T, ctx context.Context, l *leader.Latch) *leader.Term {
	t.Helper()
	term, err := l.Await(ctx)
	if err != nil {
		t.Fatalf("%s: Await: %v", leader.LatchID(l), err)
	}
	return term
}

// interopWaitIDs waits until the Go side (a Go latch's session s) reads the
// participants ids, in order.
func interopWaitIDs(t *testing.T, ctx context.Context, s *session.Session, ids ...string) {
	t.Helper()
	var got []string
	zktest.Eventually(t, 15*time.Second, func() bool {
		ps, err := leader.Participants(ctx, s, interopPath)
		if err != nil {
			return false
		}
		got = got[:0]
		for _, p := range ps {
			got = append(got, p.ID)
		}
		return strings.Join(got, " ") == strings.Join(ids, " ")
	}, "participants %v, want %v", &got, ids)
}

// interopGoSees checks the Go side's participants (in order) and leader, as
// a Go latch's session s reads them.
func interopGoSees(t *testing.T, ctx context.Context, s *session.Session, leaderID string, ids ...string) {
	t.Helper()
	ps, err := leader.Participants(ctx, s, interopPath)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for i, p := range ps {
		got = append(got, p.ID)
		if p.Holds != (i == 0) {
			t.Errorf("Go participant %d %+v: IsLeader %v", i, p, p.Holds)
		}
	}
	if strings.Join(got, " ") != strings.Join(ids, " ") {
		t.Errorf("Go participants %v, want %v", got, ids)
	}
	p, _, err := leader.Leader(ctx, s, interopPath)
	if err != nil || p.ID != leaderID {
		t.Errorf("Go Leader = %+v, %v; want %s", p, err, leaderID)
	}
}

// interopJavaSees checks the Java side's participants (in order) and leader.
func interopJavaSees(t *testing.T, ctx context.Context, java *curatortest.Latch, leaderID string, ids ...string) {
	t.Helper()
	ld, got, err := java.Participants(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if ld != leaderID || strings.Join(got, " ") != strings.Join(ids, " ") {
		t.Errorf("Curator sees leader %q of %v, want %q of %v", ld, got, leaderID, ids)
	}
}

// interopOneLeader samples both sides at a settled moment: exactly one
// participant says it leads, and it is want.
func interopOneLeader(t *testing.T, ctx context.Context, java *curatortest.Latch, want string, gos ...*leader.Latch) {
	t.Helper()
	var leaders []string
	javaLeads, _, err := java.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if javaLeads {
		leaders = append(leaders, java.ID)
	}
	for _, g := range gos {
		if g.IsLeader() {
			leaders = append(leaders, leader.LatchID(g))
		}
	}
	if len(leaders) != 1 || leaders[0] != want {
		t.Fatalf("leaders %v, want exactly %s", leaders, want)
	}
}

// interopInterval is when the Java participant led, as bounded by what the
// test saw: from reading its LEADER line (it led from a little earlier) to
// the moment the test asked it to close or killed it (it led at most until
// then, as Curator deletes the node on close).
type interopInterval struct{ start, end time.Time }

// interopRecorder records every term of the Go latches it follows (Changes
// delivers every event): start is Term.Started, end the moment the latch saw
// the term end (before it deletes its node).
type interopRecorder struct {
	mu    sync.Mutex
	terms []*interopTerm
	wg    sync.WaitGroup
}

type interopTerm struct {
	id         string
	term       *leader.Term
	start, end time.Time // end zero while open
}

func newInteropRecorder(t *testing.T) *interopRecorder {
	r := &interopRecorder{}
	t.Cleanup(r.wg.Wait)
	return r
}

func (r *interopRecorder) follow(t *testing.T, l *leader.Latch) {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	ch := l.Changes(ctx)
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		for ev := range ch {
			if ev.Term == nil {
				continue
			}
			r.mu.Lock()
			if ev.Leader {
				r.terms = append(r.terms, &interopTerm{id: leader.LatchID(l), term: ev.Term, start: ev.Term.Started()})
			} else {
				for _, rt := range r.terms {
					if rt.term == ev.Term {
						rt.end = ev.At
					}
				}
			}
			r.mu.Unlock()
		}
	}()
}

// settle waits until the recorder has seen the start of every term in want,
// and the end of every recorded term that has ended (the follower goroutines
// record events some time after they happen): an ended term not yet seen to
// end would count as open, and overlap whatever came after it.
func (r *interopRecorder) settle(t *testing.T, want ...*leader.Term) {
	t.Helper()
	zktest.Eventually(t, 15*time.Second, func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		seen := map[*leader.Term]bool{}
		for _, rt := range r.terms {
			seen[rt.term] = true
			select {
			case <-rt.term.Done():
				if rt.end.IsZero() {
					return false
				}
			default:
			}
		}
		for _, w := range want {
			if !seen[w] {
				return false
			}
		}
		return true
	}, "the recorder did not catch up with the terms")
}

// check fails the test if two Go terms overlap, or a Go term overlaps the
// Java participant's leadership. A Go term ends (is seen to end) before its
// node is deleted, and Java can lead only after that and prints LEADER after
// it leads; Go leads only after Java's node is deleted, which is after the
// test asked Java to close. So any overlap is a real double leadership.
func (r *interopRecorder) check(t *testing.T, java ...interopInterval) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	now := time.Now()
	type iv struct {
		who        string
		start, end time.Time
	}
	var all []iv
	for _, rt := range r.terms {
		end := rt.end
		if end.IsZero() {
			end = now
		}
		all = append(all, iv{rt.id + " " + rt.term.Node(), rt.start, end})
	}
	for _, j := range java {
		all = append(all, iv{"curator", j.start, j.end})
	}
	f := func(x time.Time) string { return x.Format("15:04:05.000000") }
	for i := range all {
		for k := i + 1; k < len(all); k++ {
			a, b := all[i], all[k]
			if a.start.Before(b.end) && b.start.Before(a.end) {
				t.Errorf("two leaders: %s [%s, %s] and %s [%s, %s]", a.who, f(a.start), f(a.end), b.who, f(b.start), f(b.end))
			}
		}
	}
	if len(r.terms) == 0 {
		t.Error("no Go term recorded")
	}
	t.Logf("terms: %s", func() string {
		var b strings.Builder
		for _, x := range all {
			fmt.Fprintf(&b, "\n  %s [%s, %s]", x.who, f(x.start), f(x.end))
		}
		return b.String()
	}())
}

// curatorSelectorNode is the name of a LeaderSelector node (Curator's
// InterProcessMutex layout), Curator's or a Go Selector's.
var curatorSelectorNode = regexp.MustCompile(`^_c_[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}-lock-[0-9]{10}$`)

// A Go Selector and Curator's InterProcessMutex (what LeaderSelector runs on)
// on one path exclude each other in both orders: while Java holds the mutex
// the Go node queues behind it and the callback does not run; once Java
// releases, the callback runs; while the callback runs, Java's acquire does
// not succeed, and it succeeds once the callback has returned and the Go node
// is gone. Each side sees the other's node in the queue. A Selector with any
// other node layout (the latch- marker, say) would lead at once beside Java's
// lock- node and be ignored by Curator's mutex, so it would fail here.
func TestCuratorMutexExcludesSelector(t *testing.T) {
	ctx := interopContext(t)
	ns := zktest.NewNamespace(t)
	full := ns.Path(interopPath)
	java := curatortest.StartMutex(t, ns.Servers(), full)
	s := sessiontest.Connect(t, ns)

	// Java holds first.
	j1, err := java.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}

	// The callback reports each term it starts and blocks until the test
	// releases it (or its term ends); it must not fail the test itself.
	started := make(chan *leader.Term, 4)
	release := make(chan struct{})
	returned := make(chan time.Time, 4)
	sel, err := leader.NewSelector(s, interopPath, func(ctx context.Context) error {
		term, _ := leader.TermFromContext(ctx)
		started <- term
		select {
		case <-release:
		case <-ctx.Done():
		}
		returned <- time.Now()
		return nil
	}, leader.WithID("go-selector"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sel.Close() })
	if err := sel.Start(); err != nil {
		t.Fatal(err)
	}

	// The Go node queues behind Java's: both are listed, Java's first and
	// holding, each with Kind "lock", in Curator's name format.
	q := interopWaitSelectorQueue(t, ctx, s, 2)
	javaID := q[0].ID // Curator's default node data: the local address
	if q[0].Node != j1.Name || !q[0].Holds || q[0].Kind != "lock" || javaID == "" {
		t.Errorf("first participant %+v, want Curator's node %s holding, Kind lock, with an id", q[0], j1.Name)
	}
	goNode := q[1].Node
	if q[1].ID != "go-selector" || q[1].Holds || q[1].Kind != "lock" {
		t.Errorf("second participant %+v, want go-selector waiting, Kind lock", q[1])
	}
	interopCheckSelectorNodes(t, q)
	interopJavaQueue(t, ctx, java, j1.Name, goNode)
	// A bounded wait: the callback must not start while Java holds.
	notYet := time.NewTimer(500 * time.Millisecond)
	select {
	case term := <-started:
		notYet.Stop()
		t.Fatalf("the selector's callback started (node %s) while Curator holds the mutex (node %s)", term.Node(), j1.Name)
	case <-notYet.C:
	}
	if sel.IsLeader() {
		t.Fatal("the selector says it leads while Curator holds the mutex")
	}

	// Java releases: the callback starts, on the queued Go node.
	released := time.Now()
	if err := java.Release(ctx); err != nil {
		t.Fatal(err)
	}
	var term *leader.Term
	select {
	case term = <-started:
	case <-ctx.Done():
		t.Fatalf("the selector's callback did not start after Curator released: %v", ctx.Err())
	}
	if term == nil || term.Node() != goNode || !term.Started().After(released) {
		t.Fatalf("callback's term %v; want node %s, started after Curator's release at %s", term, goNode, selectorTime(released))
	}

	// While the callback runs, Java cannot acquire: a timed acquire gives
	// up, and an untimed one queues behind the Go node and waits.
	q = interopWaitSelectorQueue(t, ctx, s, 1)
	if q[0].Node != goNode || !q[0].Holds {
		t.Fatalf("participants %+v, want only go-selector's %s, holding", q, goNode)
	}
	if q[0].Kind != "lock" {
		t.Errorf("the leading selector's participant has Kind %q, want lock", q[0].Kind)
	}
	if n, ok, err := java.TryAcquire(ctx, 300*time.Millisecond); err != nil || ok {
		t.Fatalf("Curator's acquire(300 ms) while the Go selector leads = %+v, %v, %v; want a timeout", n, ok, err)
	}
	if err := java.BeginAcquire(); err != nil {
		t.Fatal(err)
	}
	q = interopWaitSelectorQueue(t, ctx, s, 2)
	if q[0].Node != goNode || !q[0].Holds || q[1].ID != javaID || q[1].Holds {
		t.Fatalf("participants %+v, want go-selector's %s holding, then Curator's node (id %s) waiting", q, goNode, javaID)
	}
	if q[1].Kind != "lock" {
		t.Errorf("Curator's participant %+v has Kind %q, want lock", q[1], q[1].Kind)
	}
	interopCheckSelectorNodes(t, q)
	javaNode := q[1].Node
	interopJavaQueue(t, ctx, java, goNode, javaNode)
	wctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	l, err := java.WaitAcquired(wctx)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Curator acquired (%v, %v) while the Go selector's callback runs", l, err)
	}
	if !sel.IsLeader() || ended(term) {
		t.Fatal("the selector's term ended while its callback runs")
	}

	// The callback returns: the term ends, the Go node is deleted, and then
	// Java acquires.
	close(release)
	var back time.Time
	select {
	case back = <-returned:
	case <-ctx.Done():
		t.Fatalf("the callback did not return: %v", ctx.Err())
	}
	j2, err := java.WaitAcquired(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if j2.Name != javaNode || !j2.At.After(back) {
		t.Fatalf("Curator acquired node %s at %s; want node %s after the callback returned at %s",
			j2.Name, selectorTime(j2.At), javaNode, selectorTime(back))
	}
	waitClosed(t, term.Done(), "the selector's term ends after its callback returned")
	if !errors.Is(term.Err(), recipes.ErrReleased) {
		t.Errorf("the term ended with %v, want ErrReleased", term.Err())
	}
	q = interopWaitSelectorQueue(t, ctx, s, 1)
	if q[0].Node != javaNode || !q[0].Holds {
		t.Fatalf("participants %+v after the callback returned, want only Curator's %s, holding", q, javaNode)
	}
	if len(started) != 0 {
		t.Fatal("the callback ran again (the selector requeued without WithRequeue)")
	}
	if err := java.Release(ctx); err != nil {
		t.Fatal(err)
	}
	interopWaitSelectorQueue(t, ctx, s, 0)
}

// interopWaitSelectorQueue waits until the election at interopPath has n
// participants, as leader.Participants reads them, and returns them.
func interopWaitSelectorQueue(t *testing.T, ctx context.Context, s *session.Session, n int) []recipes.Participant {
	t.Helper()
	var ps []recipes.Participant
	var lastErr error
	last := selectorLastRead(func() string { return fmt.Sprintf("%+v (error %v)", ps, lastErr) })
	zktest.Eventually(t, 15*time.Second, func() bool {
		ps, lastErr = leader.Participants(ctx, s, interopPath)
		return lastErr == nil && len(ps) == n
	}, "%d participants; last read %v", n, last)
	return ps
}

// selectorLastRead formats what a wait last read, when its message is built.
type selectorLastRead func() string

func (f selectorLastRead) String() string { return f() }

// interopCheckSelectorNodes checks that the participants' nodes have
// Curator's InterProcessMutex name format.
func interopCheckSelectorNodes(t *testing.T, ps []recipes.Participant) {
	t.Helper()
	for _, p := range ps {
		if !curatorSelectorNode.MatchString(p.Node) {
			t.Errorf("node %q does not have Curator's InterProcessMutex name format", p.Node)
		}
	}
}

// interopJavaQueue checks that Curator's mutex sees the nodes in this order.
func interopJavaQueue(t *testing.T, ctx context.Context, java *curatortest.Mutex, nodes ...string) {
	t.Helper()
	got, err := java.Participants(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(got, " ") != strings.Join(nodes, " ") {
		t.Fatalf("Curator's queue %v, want %v", got, nodes)
	}
}

func selectorTime(x time.Time) string { return x.Format("15:04:05.000000") }
