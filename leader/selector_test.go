package leader_test

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/internal/testkit/sessiontest"
	"github.com/zkrecipes/zkrecipes/leader"
	"github.com/zkrecipes/zkrecipes/recipes"
	"github.com/zkrecipes/zkrecipes/session"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// lockNode is Curator's LeaderSelector (InterProcessMutex) node name.
var lockNode = regexp.MustCompile(`^_c_[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}-lock-\d{10}$`)

// callLog records the callback runs of selectors.
type callLog struct {
	mu    sync.Mutex
	calls []call
	more  chan struct{}
	bad   []string
}

type call struct {
	id         string
	start, end time.Time
	term       *leader.Term
	cause      error // context.Cause of the callback's ctx when it returned, if done
}

func newCallLog() *callLog { return &callLog{more: make(chan struct{})} }

func (c *callLog) add(cl call) {
	c.mu.Lock()
	c.calls = append(c.calls, cl)
	close(c.more)
	c.more = make(chan struct{})
	c.mu.Unlock()
}

func (c *callLog) problem(format string, args ...any) {
	c.mu.Lock()
	c.bad = append(c.bad, fmt.Sprintf(format, args...))
	c.mu.Unlock()
}

func (c *callLog) snapshot() []call {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]call(nil), c.calls...)
}

// waitCalls waits until cond holds on the calls so far.
func (c *callLog) waitCalls(t testing.TB, what string, cond func([]call) bool) []call {
	t.Helper()
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	for {
		c.mu.Lock()
		calls := append([]call(nil), c.calls...)
		more := c.more
		c.mu.Unlock()
		if cond(calls) {
			return calls
		}
		select {
		case <-more:
		case <-deadline.C:
			t.Fatalf("%s: not within %v; calls %+v", what, wait, calls)
		}
	}
}

// check fails the test on overlapping calls or recorded problems.
func (c *callLog) check(t testing.TB) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, b := range c.bad {
		t.Error(b)
	}
	for i := range c.calls {
		for j := range c.calls {
			a, b := c.calls[i], c.calls[j]
			if i != j && !a.start.After(b.start) && b.start.Before(a.end) {
				t.Errorf("callbacks overlap: %s [%v, %v] and %s [%v, %v]", a.id, a.start, a.end, b.id, b.start, b.end)
			}
		}
	}
}

// holdFor returns a callback that leads for d (or until its ctx ends) and
// records the run.
func holdFor(log *callLog, id string, d time.Duration) func(context.Context) error {
	return func(ctx context.Context) error {
		start := time.Now()
		term, ok := leader.TermFromContext(ctx)
		if !ok {
			log.problem("%s: no term in the callback's context", id)
		} else if leader.TermID(term) != id || !(lockNode.MatchString(term.Node()) || latchNode.MatchString(term.Node())) {
			log.problem("%s: term id %q node %q", id, leader.TermID(term), term.Node())
		}
		tm := time.NewTimer(d)
		defer tm.Stop()
		select {
		case <-tm.C:
		case <-ctx.Done():
		}
		log.add(call{id: id, start: start, end: time.Now(), term: term, cause: context.Cause(ctx)})
		return ctx.Err()
	}
}

func newSelector(t testing.TB, s *session.Session, id string, lead func(context.Context) error, opts ...leader.Option) *leader.Selector {
	t.Helper()
	sel, err := leader.NewSelector(s, electionPath, lead, append([]leader.Option{leader.WithID(id)}, opts...)...)
	if err != nil {
		t.Fatalf("NewSelector: %v", err)
	}
	t.Cleanup(func() { sel.Close() })
	return sel
}

// Three selectors with requeue take turns, never overlapping, with Curator's
// LeaderSelector node layout. (Strict rotation is not asserted: under load a
// requeue's create can land after the next holder has already requeued.)
func TestSelectorTakesTurns(t *testing.T) {
	ns := zktest.NewNamespace(t)
	log := newCallLog()
	ids := []string{"s0", "s1", "s2"}
	var sels []*leader.Selector
	for _, id := range ids {
		sel := newSelector(t, sessiontest.Connect(t, ns), id, holdFor(log, id, 5*time.Millisecond), leader.WithRequeue(true))
		sels = append(sels, sel)
	}
	for _, sel := range sels {
		if err := sel.Start(); err != nil {
			t.Fatal(err)
		}
	}
	log.waitCalls(t, "each selector leads three times", func(calls []call) bool {
		n := map[string]int{}
		for _, c := range calls {
			n[c.id]++
		}
		return n["s0"] >= 3 && n["s1"] >= 3 && n["s2"] >= 3
	})
	for _, sel := range sels {
		if err := sel.Close(); err != nil {
			t.Fatal(err)
		}
	}
	calls := log.snapshot()
	for i := 1; i < len(calls); i++ {
		if calls[i].term.Token() <= calls[i-1].term.Token() {
			t.Errorf("token did not grow: %d then %d", calls[i-1].term.Token(), calls[i].term.Token())
		}
	}
	log.check(t)
	// Those closed while queued (or requeuing) leave their node to the
	// session's guaranteed-delete queue: wait for it.
	conn := ns.Conn(t)
	var kids []string
	zktest.Eventually(t, wait, func() bool {
		kids = children(t, conn, ns)
		return len(kids) == 0
	}, "nodes left after Close: %v", &kids)
}

// Without requeue the selector leads once; Requeue enters it again.
func TestSelectorRequeue(t *testing.T) {
	ns := zktest.NewNamespace(t)
	log := newCallLog()
	block := make(chan struct{})
	var n int
	var mu sync.Mutex
	sel := newSelector(t, sessiontest.Connect(t, ns), "r", func(ctx context.Context) error {
		mu.Lock()
		n++
		k := n
		mu.Unlock()
		if k == 2 {
			select {
			case <-block:
			case <-ctx.Done():
			}
		}
		log.add(call{id: "r", start: time.Now(), end: time.Now()})
		return nil
	})
	if _, err := sel.Requeue(); !errors.Is(err, leader.ErrNotStarted) {
		t.Errorf("Requeue before Start: %v", err)
	}
	if err := sel.Start(); err != nil {
		t.Fatal(err)
	}
	log.waitCalls(t, "first run", func(c []call) bool { return len(c) == 1 })
	zktest.Eventually(t, wait, func() bool { return !sel.IsLeader() }, "leadership given up")
	if ok, err := sel.Requeue(); !ok || err != nil {
		t.Fatalf("Requeue = %v, %v", ok, err)
	}
	zktest.Eventually(t, wait, sel.IsLeader, "leads again")
	if ok, err := sel.Requeue(); ok || err != nil {
		t.Errorf("Requeue while leading = %v, %v; want false, nil", ok, err)
	}
	close(block)
	log.waitCalls(t, "second run", func(c []call) bool { return len(c) == 2 })
	zktest.Eventually(t, wait, func() bool { return len(children(t, ns.Conn(t), ns)) == 0 }, "node deleted after the callback returned")
	if err := sel.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := sel.Requeue(); !errors.Is(err, session.ErrClosed) {
		t.Errorf("Requeue after Close: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if n != 2 {
		t.Errorf("%d runs, want 2", n)
	}
}

// Close during a term cancels the callback's ctx with session.ErrClosed, waits for
// it and deletes the node; Close of a queued selector deletes its node.
func TestSelectorClose(t *testing.T) {
	ns := zktest.NewNamespace(t)
	conn := ns.Conn(t)
	log := newCallLog()
	a := newSelector(t, sessiontest.Connect(t, ns), "a", holdFor(log, "a", time.Hour))
	b := newSelector(t, sessiontest.Connect(t, ns), "b", holdFor(log, "b", time.Hour))
	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	zktest.Eventually(t, wait, a.IsLeader, "a leads")
	if err := b.Start(); err != nil {
		t.Fatal(err)
	}
	zktest.Eventually(t, wait, func() bool { return len(children(t, conn, ns)) == 2 }, "b queued")
	if err := b.Close(); err != nil { // while queued
		t.Fatal(err)
	}
	// Its queued node goes through the session's queue (Close waits for it
	// only briefly): wait for it.
	zktest.Eventually(t, wait, func() bool { return len(children(t, conn, ns)) == 1 }, "children after closing the queued selector")
	if !a.IsLeader() {
		t.Fatal("a disturbed")
	}
	if err := a.Close(); err != nil { // while leading
		t.Fatal(err)
	}
	calls := log.snapshot()
	if len(calls) != 1 || !errors.Is(calls[0].cause, session.ErrClosed) {
		t.Fatalf("calls %+v, want one ended by ErrClosed", calls)
	}
	if a.IsLeader() {
		t.Error("leader after Close")
	}
	if kids := children(t, conn, ns); len(kids) != 0 {
		t.Fatalf("children after Close: %v", kids)
	}
	if err := a.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if err := a.Start(); !errors.Is(err, session.ErrClosed) {
		t.Errorf("Start after Close: %v", err)
	}
}

// End-at-disconnect policy: a cut cancels the callback's ctx with
// ErrSuspended; with requeue the selector leads again once the connection is
// back. A callback error does not stop the selector.
func TestSelectorLoss(t *testing.T) {
	ns := zktest.NewNamespace(t)
	log := newCallLog()
	s, p := sessiontest.ConnectProxy(t, ns, session.WithLossPolicy(session.EndAtDisconnect))
	var mu sync.Mutex
	runs := 0
	sel := newSelector(t, s, "l", func(ctx context.Context) error {
		mu.Lock()
		runs++
		k := runs
		mu.Unlock()
		if k == 1 {
			return errors.New("first run fails at once")
		}
		return holdFor(log, "l", time.Hour)(ctx)
	}, leader.WithRequeue(true))
	if err := sel.Start(); err != nil {
		t.Fatal(err)
	}
	zktest.Eventually(t, wait, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return runs == 2 && sel.IsLeader()
	}, "second run leads")
	p.Cut()
	calls := log.waitCalls(t, "the cut ends the run", func(c []call) bool { return len(c) == 1 })
	if !errors.Is(calls[0].cause, session.ErrSuspended) {
		t.Errorf("cause %v, want ErrSuspended", calls[0].cause)
	}
	zktest.Eventually(t, wait, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return runs == 3 && sel.IsLeader()
	}, "leads again after the cut")
	log.check(t)
}

// A Selector and a Latch see the same participants through Participants.
func TestSelectorParticipants(t *testing.T) {
	ns := zktest.NewNamespace(t)
	log := newCallLog()
	ctx := ctxT(t)
	a := newSelector(t, sessiontest.Connect(t, ns), "a", holdFor(log, "a", time.Hour))
	sb := sessiontest.Connect(t, ns)
	b := newSelector(t, sb, "b", holdFor(log, "b", time.Hour))
	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	zktest.Eventually(t, wait, a.IsLeader, "a leads")
	if err := b.Start(); err != nil {
		t.Fatal(err)
	}
	var ps []recipes.Participant
	zktest.Eventually(t, wait, func() bool {
		var err error
		ps, err = leader.Participants(ctx, sb, electionPath)
		return err == nil && len(ps) == 2
	}, "two participants")
	if ps[0].ID != "a" || !ps[0].Holds || ps[1].ID != "b" || ps[1].Holds || !lockNode.MatchString(ps[0].Node) {
		t.Errorf("participants %+v", ps)
	}
	if l, _, err := leader.Leader(ctx, sb, electionPath); err != nil || l.ID != "a" {
		t.Errorf("Leader = %+v, %v", l, err)
	}
	obs, err := leader.Participants(ctx, sessiontest.Connect(t, ns), electionPath)
	if err != nil || len(obs) != 2 || obs[0] != ps[0] || obs[1] != ps[1] {
		t.Errorf("observer's participants %+v, %v", obs, err)
	}
	if leader.SelectorID(b) != "b" {
		t.Errorf("ID %q", leader.SelectorID(b))
	}
}

func TestSelectorBadInput(t *testing.T) {
	ns := zktest.NewNamespace(t)
	s := sessiontest.Connect(t, ns)
	nop := func(context.Context) error { return nil }
	if _, err := leader.NewSelector(s, electionPath, nil); !errors.Is(err, session.ErrBadArgument) {
		t.Errorf("nil callback: %v", err)
	}
	if _, err := leader.NewSelector(nil, electionPath, nop); !errors.Is(err, session.ErrBadArgument) {
		t.Errorf("nil session: %v", err)
	}
	if _, err := leader.NewSelector(s, "bad/", nop); !errors.Is(err, session.ErrBadArgument) {
		t.Errorf("bad path: %v", err)
	}
	if _, err := leader.NewSelector(s, electionPath, nop, leader.WithID("")); !errors.Is(err, session.ErrBadArgument) {
		t.Errorf("empty id: %v", err)
	}
	sel := newSelector(t, s, "x", nop)
	if err := sel.Start(); err != nil {
		t.Fatal(err)
	}
	if err := sel.Start(); !errors.Is(err, leader.ErrStarted) {
		t.Errorf("second Start: %v", err)
	}
	if err := sel.Close(); err != nil {
		t.Fatal(err)
	}
	// Close may catch the selector while it campaigns: then its node goes
	// through the session's guaranteed-delete queue. Wait for it.
	conn := ns.Conn(t)
	var kids []string
	zktest.Eventually(t, wait, func() bool {
		kids = children(t, conn, ns)
		return len(kids) == 0
	}, "nodes left: %v", &kids)
}

// A third party deletes the leading selector's node: the callback's ctx is
// canceled with recipes.ErrNodeDeleted and the next selector leads.
func TestSelectorThirdPartyDelete(t *testing.T) {
	ns := zktest.NewNamespace(t)
	conn := ns.Conn(t)
	log := newCallLog()
	sa := sessiontest.Connect(t, ns)
	a := newSelector(t, sa, "a", holdFor(log, "a", time.Hour))
	b := newSelector(t, sessiontest.Connect(t, ns), "b", holdFor(log, "b", time.Hour))
	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	zktest.Eventually(t, wait, a.IsLeader, "a leads")
	if err := b.Start(); err != nil {
		t.Fatal(err)
	}
	var kids []string
	zktest.Eventually(t, wait, func() bool { kids = children(t, conn, ns); return len(kids) == 2 }, "b queued")
	ps, err := leader.Participants(context.Background(), sa, electionPath)
	if err != nil || len(ps) != 2 {
		t.Fatalf("participants %v, %v", ps, err)
	}
	if err := conn.Delete(ns.Path(electionPath)+"/"+ps[0].Node, -1); err != nil {
		t.Fatal(err)
	}
	calls := log.waitCalls(t, "a's callback ends", func(c []call) bool { return len(c) == 1 })
	if !errors.Is(calls[0].cause, recipes.ErrNodeDeleted) {
		t.Errorf("cause %v, want ErrNodeDeleted", calls[0].cause)
	}
	zktest.Eventually(t, wait, b.IsLeader, "b leads")
}

// Closing the session ends the callback (session.ErrClosed) and the
// selector's election; Requeue then reports the session's end.
func TestSelectorSessionClosed(t *testing.T) {
	ns := zktest.NewNamespace(t)
	s := sessiontest.Connect(t, ns)
	log := newCallLog()
	sel := newSelector(t, s, "c", holdFor(log, "c", time.Hour), leader.WithRequeue(true))
	if err := sel.Start(); err != nil {
		t.Fatal(err)
	}
	zktest.Eventually(t, wait, sel.IsLeader, "leads")
	s.Close()
	calls := log.waitCalls(t, "callback ends", func(c []call) bool { return len(c) == 1 })
	if !errors.Is(calls[0].cause, session.ErrClosed) {
		t.Errorf("cause %v, want session.ErrClosed", calls[0].cause)
	}
	zktest.Eventually(t, wait, func() bool {
		_, err := sel.Requeue()
		return errors.Is(err, session.ErrClosed)
	}, "Requeue reports the closed session")
	if err := sel.Close(); err != nil {
		t.Fatal(err)
	}
}
