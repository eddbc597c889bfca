package leader_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/zkrecipes/zkrecipes/internal/testkit/sessiontest"
	"github.com/zkrecipes/zkrecipes/leader"
	"github.com/zkrecipes/zkrecipes/recipes"
	"github.com/zkrecipes/zkrecipes/session"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// The rule for work (Run) and callbacks (Selector): a term ends when work
// returns, panics, is resigned or leadership is lost; the node goes after
// work returned; then the participant campaigns again, after a pause when the
// term was short; work errors and panics never stop it.

// ruleKind is a way to take part under the rule: Run, or a Selector with
// WithRequeue(true). join starts a participant (stopped in t.Cleanup) and
// returns a func that reports, without blocking, why it stopped
// campaigning, or nil while it goes on.
type ruleKind struct {
	name string
	join func(t *testing.T, s *session.Session, id string, work func(context.Context) error, opts ...leader.Option) (stopped func() error)
}

var ruleKinds = []ruleKind{
	{"Run", joinRun},
	{"Selector", func(t *testing.T, s *session.Session, id string, work func(context.Context) error, opts ...leader.Option) func() error {
		sel := newSelector(t, s, id, work, append([]leader.Option{leader.WithRequeue(true)}, opts...)...)
		if err := sel.Start(); err != nil {
			t.Fatalf("Start: %v", err)
		}
		return func() error {
			select {
			case <-sel.Done():
				return fmt.Errorf("selector %s stopped: %v", id, sel.Err())
			default:
				return nil
			}
		}
	}},
}

// joinRun calls Run in a goroutine; t.Cleanup cancels it and waits for it.
func joinRun(t *testing.T, s *session.Session, id string, work func(context.Context) error, opts ...leader.Option) func() error {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	var err error
	go func() {
		defer close(done)
		err = leader.Run(ctx, s, electionPath, work, append([]leader.Option{leader.WithID(id)}, opts...)...)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(wait):
			t.Errorf("Run %s did not return after cancel", id)
		}
	})
	return func() error {
		select {
		case <-done:
			return fmt.Errorf("Run %s returned %v", id, err)
		default:
			return nil
		}
	}
}

// observed returns a logger whose entries (info and above) the test can read.
func observed() (*zap.Logger, *observer.ObservedLogs) {
	core, logs := observer.New(zapcore.InfoLevel)
	return zap.New(core), logs
}

// instant returns work that records its term and returns err at once.
func instant(log *callLog, id string, err error) func(context.Context) error {
	return func(ctx context.Context) error {
		term, _ := leader.TermFromContext(ctx)
		now := time.Now()
		log.add(call{id: id, start: now, end: now, term: term})
		return err
	}
}

// counts returns the number of calls per participant id.
func counts(calls []call) map[string]int {
	n := map[string]int{}
	for _, c := range calls {
		n[c.id]++
	}
	return n
}

// checkRunning fails the test for each participant that stopped campaigning.
func checkRunning(t *testing.T, stopped ...func() error) {
	t.Helper()
	for _, s := range stopped {
		if err := s(); err != nil {
			t.Error(err)
		}
	}
}

// checkTokensGrow checks that the calls' terms came in token order.
func checkTokensGrow(t *testing.T, calls []call) {
	t.Helper()
	for i := 1; i < len(calls); i++ {
		if calls[i].term.Token() <= calls[i-1].term.Token() {
			t.Errorf("call %d (%s) token %d after %d", i, calls[i].id, calls[i].term.Token(), calls[i-1].term.Token())
		}
	}
}

// Work that fails at once does not stop the campaign: two participants whose
// work always fails take turns, each leading again after the other, and
// neither stops; every failure is logged at error level.
func TestRuleWorkFails(t *testing.T) {
	for _, k := range ruleKinds {
		t.Run(k.name, func(t *testing.T) {
			ns := zktest.NewNamespace(t)
			log := newCallLog()
			lg, logs := observed()
			boom := errors.New("boom")
			a := k.join(t, sessiontest.Connect(t, ns), "a", instant(log, "a", boom), leader.WithLogger(lg))
			b := k.join(t, sessiontest.Connect(t, ns), "b", instant(log, "b", boom))
			calls := log.waitCalls(t, "a and b lead three times each", func(c []call) bool {
				n := counts(c)
				return n["a"] >= 3 && n["b"] >= 3
			})
			checkRunning(t, a, b)
			// Leadership came back: a led after b had led, and b after a.
			seen := map[string]bool{}
			back := map[string]bool{}
			for _, c := range calls {
				other := map[string]string{"a": "b", "b": "a"}[c.id]
				if seen[other] {
					back[c.id] = true
				}
				seen[c.id] = true
			}
			if !back["a"] || !back["b"] {
				t.Errorf("leadership did not alternate: %v", ids(calls))
			}
			checkTokensGrow(t, calls)
			log.check(t)
			// Each failure is logged once work has returned, after it was
			// recorded above.
			var failed []observer.LoggedEntry
			zktest.Eventually(t, wait, func() bool {
				failed = logs.FilterMessage("leader work failed").All()
				return len(failed) >= 3
			}, "a's 3+ failures logged as \"leader work failed\"")
			for _, e := range failed {
				if e.Level != zapcore.ErrorLevel || e.ContextMap()["error"] != "boom" {
					t.Errorf("entry %v %q %v, want error level with error boom", e.Level, e.Message, e.ContextMap())
				}
			}
			t.Logf("%d terms: %v", len(calls), ids(calls))
		})
	}
}

func ids(calls []call) string {
	var b strings.Builder
	for _, c := range calls {
		b.WriteString(c.id)
	}
	return b.String()
}

// Work that returns nil at once does not spin: over a 2 s window the terms
// are bounded by the pause after short terms (100 ms doubling: about 5, at
// most 10 allowed), where there were hundreds without it; and the
// participant still goes on leading.
func TestRuleNoSpin(t *testing.T) {
	for _, k := range ruleKinds {
		t.Run(k.name, func(t *testing.T) {
			ns := zktest.NewNamespace(t)
			log := newCallLog()
			stopped := k.join(t, sessiontest.Connect(t, ns), "n", instant(log, "n", nil))
			first := log.waitCalls(t, "first term", func(c []call) bool { return len(c) >= 1 })[0]
			const window = 2 * time.Second
			// Not a synchronisation: this is the window over which terms are
			// counted.
			<-time.After(time.Until(first.start.Add(window)))
			n := 0
			for _, c := range log.snapshot() {
				if c.start.Before(first.start.Add(window)) {
					n++
				}
			}
			t.Logf("%d terms in the first %v", n, window)
			if n > 10 {
				t.Errorf("%d terms in %v: the campaign spins", n, window)
			}
			log.waitCalls(t, "more terms after the window", func(c []call) bool { return len(c) > n })
			checkRunning(t, stopped)
		})
	}
}

// Work that panics does not crash the process: the panic is recovered, the
// term's Err matches ErrPanicked and carries the value, it is logged at
// error level with its stack, the node goes, another participant leads, and
// the panicking participant stays in the election.
func TestRulePanic(t *testing.T) {
	for _, k := range ruleKinds {
		t.Run(k.name, func(t *testing.T) {
			ns := zktest.NewNamespace(t)
			conn := ns.Conn(t)
			lg, logs := observed()
			aTerms := make(chan *leader.Term, 1)
			a := k.join(t, sessiontest.Connect(t, ns), "a", func(ctx context.Context) error {
				term, _ := leader.TermFromContext(ctx)
				select {
				case aTerms <- term:
				default:
				}
				panic("boom from a")
			}, leader.WithLogger(lg))
			var ta *leader.Term
			select {
			case ta = <-aTerms:
			case <-time.After(wait):
				t.Fatal("a never led")
			}
			bTerms := make(chan *leader.Term, 1)
			sb := sessiontest.Connect(t, ns)
			b := k.join(t, sb, "b", func(ctx context.Context) error {
				term, _ := leader.TermFromContext(ctx)
				select {
				case bTerms <- term:
				default:
				}
				<-ctx.Done()
				return ctx.Err()
			})
			var tb *leader.Term
			select {
			case tb = <-bTerms:
			case <-time.After(wait):
				t.Fatal("b never led after a's work panicked")
			}
			// b leads only once a's node is gone, after a's first term ended.
			err := ta.Err()
			if !errors.Is(err, leader.ErrPanicked) || !strings.Contains(fmt.Sprint(err), "boom from a") {
				t.Errorf("a's term Err = %v, want ErrPanicked with the panic value", err)
			}
			if ok, _, zerr := conn.Exists(leader.TermPath(ta)); zerr != nil || ok {
				t.Errorf("a's node %s after the panic: exists %v (%v)", ta.Node(), ok, zerr)
			}
			if tb.Token() <= ta.Token() {
				t.Errorf("b's token %d not above a's %d", tb.Token(), ta.Token())
			}
			panics := logs.FilterMessage("leader work panicked").All()
			if len(panics) == 0 {
				t.Fatal("the panic was not logged")
			}
			e := panics[0]
			cm := e.ContextMap()
			if e.Level != zapcore.ErrorLevel || cm["panic"] != "boom from a" ||
				!strings.Contains(fmt.Sprint(cm["stack"]), "runrule_test.go") {
				t.Errorf("panic entry %v %v, want error level, the value and a stack through the work", e.Level, cm)
			}
			// a is queued behind b, not gone.
			ctx := ctxT(t)
			zktest.Eventually(t, wait, func() bool {
				ps, err := leader.Participants(ctx, sb, electionPath)
				return err == nil && len(ps) == 2 && ps[0].ID == "b" && ps[1].ID == "a"
			}, "a queued behind b")
			checkRunning(t, a, b)
		})
	}
}

// WithRequeue(false): Run returns after its single term with the work's
// error unchanged; a panic comes back as an error matching ErrPanicked that
// wraps an error value; after Term.Resign, nil. No node is left.
func TestRuleRunOnce(t *testing.T) {
	ns := zktest.NewNamespace(t)
	s := sessiontest.Connect(t, ns)
	ctx := ctxT(t)
	boom := errors.New("boom")
	calls := 0
	err := leader.Run(ctx, s, electionPath, func(context.Context) error {
		calls++
		return boom
	}, leader.WithRequeue(false))
	if err != boom || calls != 1 {
		t.Errorf("Run = %v after %d calls, want the work's error after 1", err, calls)
	}
	errValue := errors.New("value")
	err = leader.Run(ctx, s, electionPath, func(context.Context) error { panic(errValue) }, leader.WithRequeue(false))
	if !errors.Is(err, leader.ErrPanicked) || !errors.Is(err, errValue) {
		t.Errorf("Run with a panic = %v, want ErrPanicked wrapping the value", err)
	}
	t.Logf("panic error: %v", err)
	var cause error
	err = leader.Run(ctx, s, electionPath, func(ctx context.Context) error {
		term, _ := leader.TermFromContext(ctx)
		term.Resign()
		<-ctx.Done()
		cause = context.Cause(ctx)
		return ctx.Err()
	}, leader.WithRequeue(false))
	if err != nil || !errors.Is(cause, recipes.ErrReleased) {
		t.Errorf("Run after Term.Resign = %v (work's cause %v), want nil (ErrReleased)", err, cause)
	}
	if kids := children(t, ns.Conn(t), ns); len(kids) != 0 {
		t.Errorf("nodes left: %v", kids)
	}
}

// Term.Resign from the work (Run) or the callback (Selector) ends the term:
// the work's ctx is canceled with recipes.ErrReleased, the other participant leads,
// then leadership comes back when that one resigns too. A work that returns
// its ctx's error after a resign is not logged as a failure.
func TestRuleTermResign(t *testing.T) {
	for _, k := range ruleKinds {
		t.Run(k.name, func(t *testing.T) {
			ns := zktest.NewNamespace(t)
			ctx := ctxT(t)
			lg, logs := observed()
			type lead struct {
				term  *leader.Term
				cause chan error // the cause of the work's ctx, once it returns
			}
			leads := map[string]chan lead{"a": make(chan lead, 4), "b": make(chan lead, 4)}
			work := func(id string) func(context.Context) error {
				return func(ctx context.Context) error {
					term, _ := leader.TermFromContext(ctx)
					l := lead{term: term, cause: make(chan error, 1)}
					select {
					case leads[id] <- l:
					default:
					}
					<-ctx.Done()
					l.cause <- context.Cause(ctx)
					return ctx.Err()
				}
			}
			next := func(id string) lead {
				t.Helper()
				select {
				case l := <-leads[id]:
					return l
				case <-time.After(wait):
					t.Fatalf("%s did not lead", id)
				}
				return lead{}
			}
			sb := sessiontest.Connect(t, ns)
			a := k.join(t, sessiontest.Connect(t, ns), "a", work("a"), leader.WithLogger(lg))
			la := next("a")
			b := k.join(t, sb, "b", work("b"))
			zktest.Eventually(t, wait, func() bool {
				ps, err := leader.Participants(ctx, sb, electionPath)
				return err == nil && len(ps) == 2 && ps[0].ID == "a" && ps[1].ID == "b"
			}, "b queued behind a")

			la.term.Resign()
			lb := next("b")
			if cause := <-la.cause; !errors.Is(cause, recipes.ErrReleased) {
				t.Errorf("a's work ctx cause %v, want ErrReleased", cause)
			}
			if err := la.term.Err(); !errors.Is(err, recipes.ErrReleased) {
				t.Errorf("a's term Err %v, want ErrReleased", err)
			}
			// a campaigns again after the pause that follows its short term.
			zktest.Eventually(t, wait, func() bool {
				ps, err := leader.Participants(ctx, sb, electionPath)
				return err == nil && len(ps) == 2 && ps[0].ID == "b" && ps[1].ID == "a"
			}, "a queued behind b")
			lb.term.Resign()
			la2 := next("a")
			if la2.term.Token() <= lb.term.Token() {
				t.Errorf("a's new token %d not above b's %d", la2.term.Token(), lb.term.Token())
			}
			if cause := <-lb.cause; !errors.Is(cause, recipes.ErrReleased) {
				t.Errorf("b's work ctx cause %v, want ErrReleased", cause)
			}
			checkRunning(t, a, b)
			if failed := logs.FilterMessage("leader work failed").All(); len(failed) != 0 {
				t.Errorf("a's resigned work logged as a failure: %v", failed[0].ContextMap())
			}
		})
	}
}

// Latch.Resign hands leadership to the other latch and returns once its node
// is deleted; the latch stays in the election (at the back) and leads again
// when the other one resigns (here through Term.Resign on a latch's term).
// Resign when not leading is a no-op.
func TestLatchResign(t *testing.T) {
	ns := zktest.NewNamespace(t)
	conn := ns.Conn(t)
	ctx := ctxT(t)
	sa := sessiontest.Connect(t, ns)
	a := startLatch(t, sa, "a")
	ta := await(t, a)
	b := startLatch(t, sessiontest.Connect(t, ns), "b")
	waitChildren(t, conn, ns, 2)
	if err := b.Resign(ctx); err != nil {
		t.Errorf("Resign of a latch that does not lead = %v", err)
	}
	if err := a.Resign(ctx); err != nil {
		t.Fatalf("Resign = %v", err)
	}
	if err := ta.Err(); !errors.Is(err, recipes.ErrReleased) {
		t.Errorf("a's term Err %v, want ErrReleased", err)
	}
	if ok, _, err := conn.Exists(leader.TermPath(ta)); err != nil || ok {
		t.Errorf("a's node %s after Resign returned: exists %v (%v)", ta.Node(), ok, err)
	}
	tb := await(t, b)
	if err := a.Err(); err != nil {
		t.Errorf("a left the election: %v", err)
	}
	zktest.Eventually(t, wait, func() bool {
		ps, err := leader.Participants(ctx, sa, electionPath)
		return err == nil && len(ps) == 2 && ps[0].ID == "b" && ps[1].ID == "a"
	}, "a back in the election behind b")
	if a.IsLeader() {
		t.Error("a leads after Resign while b does")
	}
	tb.Resign()
	ta2 := await(t, a)
	if ta2 == ta || ta2.Token() <= tb.Token() {
		t.Errorf("a's new term %s token %d, b's %d", ta2.Node(), ta2.Token(), tb.Token())
	}
	a.Close()
	if err := a.Resign(ctx); !errors.Is(err, session.ErrClosed) {
		t.Errorf("Resign after Close = %v, want ErrClosed", err)
	}
}

// Selector.Resign ends the callback's term (cause recipes.ErrReleased), returns once
// its node is deleted, and hands leadership to the other selector. With
// WithRequeue(true) the selector comes back and leads again after the other
// resigns; without it, it stays out until Requeue.
func TestSelectorResign(t *testing.T) {
	for _, requeue := range []bool{true, false} {
		t.Run(fmt.Sprintf("requeue=%v", requeue), func(t *testing.T) {
			ns := zktest.NewNamespace(t)
			conn := ns.Conn(t)
			ctx := ctxT(t)
			var mu sync.Mutex
			causes := map[string][]error{}
			hold := func(id string) func(context.Context) error {
				return func(ctx context.Context) error {
					<-ctx.Done()
					mu.Lock()
					causes[id] = append(causes[id], context.Cause(ctx))
					mu.Unlock()
					return ctx.Err()
				}
			}
			sa := sessiontest.Connect(t, ns)
			a := newSelector(t, sa, "a", hold("a"), leader.WithRequeue(requeue))
			b := newSelector(t, sessiontest.Connect(t, ns), "b", hold("b"), leader.WithRequeue(true))
			if err := a.Start(); err != nil {
				t.Fatal(err)
			}
			zktest.Eventually(t, wait, a.IsLeader, "a leads")
			if err := b.Start(); err != nil {
				t.Fatal(err)
			}
			var aNode string
			zktest.Eventually(t, wait, func() bool {
				ps, err := leader.Participants(ctx, sa, electionPath)
				if err != nil || len(ps) != 2 || ps[0].ID != "a" {
					return false
				}
				aNode = ps[0].Node
				return true
			}, "b queued behind a")
			if err := b.Resign(ctx); err != nil {
				t.Errorf("Resign of a selector that does not lead = %v", err)
			}
			if err := a.Resign(ctx); err != nil {
				t.Fatalf("Resign = %v", err)
			}
			mu.Lock()
			ca := append([]error(nil), causes["a"]...)
			mu.Unlock()
			if len(ca) != 1 || !errors.Is(ca[0], recipes.ErrReleased) {
				t.Errorf("a's callback causes %v, want one ErrReleased (Resign waits for the callback)", ca)
			}
			if ok, _, err := conn.Exists(ns.Path(electionPath) + "/" + aNode); err != nil || ok {
				t.Errorf("a's node %s after Resign returned: exists %v (%v)", aNode, ok, err)
			}
			zktest.Eventually(t, wait, b.IsLeader, "b leads after a resigned")
			if !requeue {
				// Not queued: Requeue queues it (Resign left it out).
				if ok, err := a.Requeue(); !ok || err != nil {
					t.Errorf("Requeue after Resign = %v, %v; want true (not queued)", ok, err)
				}
			}
			zktest.Eventually(t, wait, func() bool {
				ps, err := leader.Participants(ctx, sa, electionPath)
				return err == nil && len(ps) == 2 && ps[0].ID == "b" && ps[1].ID == "a"
			}, "a back in the election behind b")
			if err := b.Resign(ctx); err != nil {
				t.Fatalf("b.Resign = %v", err)
			}
			zktest.Eventually(t, wait, a.IsLeader, "a leads again")
			if err := a.Err(); err != nil {
				t.Errorf("a stopped: %v", err)
			}
			a.Close()
			if err := a.Resign(ctx); !errors.Is(err, session.ErrClosed) {
				t.Errorf("Resign after Close = %v, want ErrClosed", err)
			}
		})
	}
}

// Resign refuses a nil ctx (without resigning), and Term.Resign on a nil
// term does nothing.
func TestResignNilInputs(t *testing.T) {
	ns := zktest.NewNamespace(t)
	s := sessiontest.Connect(t, ns)
	l := startLatch(t, s, "l")
	term := await(t, l)
	sel := newSelector(t, s, "sel", func(ctx context.Context) error { <-ctx.Done(); return nil })
	if err := sel.Start(); err != nil {
		t.Fatal(err)
	}
	if err := l.Resign(nilCtx); !errors.Is(err, session.ErrBadArgument) || !strings.Contains(err.Error(), "nil context") {
		t.Errorf("Latch.Resign(nil) = %v", err)
	}
	if err := sel.Resign(nilCtx); !errors.Is(err, session.ErrBadArgument) || !strings.Contains(err.Error(), "nil context") {
		t.Errorf("Selector.Resign(nil) = %v", err)
	}
	if err := term.Err(); err != nil || !l.IsLeader() {
		t.Errorf("the latch's term ended (%v) after a refused Resign", err)
	}
	var nilTerm *leader.Term
	if p, _ := sessiontest.CatchPanic(func() error { nilTerm.Resign(); return nil }); p != nil {
		t.Errorf("Resign of a nil term panicked: %v", p)
	}
}
