package leader_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/internal/testkit/sessiontest"
	"github.com/zkrecipes/zkrecipes/leader"
	"github.com/zkrecipes/zkrecipes/session"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// runner is one Run in a goroutine.
type runner struct {
	id     string
	cancel context.CancelFunc
	done   chan error
}

func startRun(t testing.TB, s *session.Session, id string, work func(context.Context) error, opts ...leader.Option) *runner {
	ctx, cancel := context.WithCancel(context.Background())
	r := &runner{id: id, cancel: cancel, done: make(chan error, 1)}
	go func() {
		r.done <- leader.Run(ctx, s, electionPath, work, append([]leader.Option{leader.WithID(id)}, opts...)...)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-r.done:
		case <-time.After(wait):
			t.Errorf("Run %s did not return after cancel", id)
		}
	})
	return r
}

func (r *runner) result(t testing.TB) error {
	t.Helper()
	select {
	case err := <-r.done:
		r.done <- err // keep it for the cleanup
		return err
	case <-time.After(wait):
		t.Fatalf("Run %s did not return", r.id)
	}
	return nil
}

// Three Run workers: the leader's ctx ends, its work returns before another
// worker's work begins, and Run returns the ctx error.
func TestRunFailover(t *testing.T) {
	ns := zktest.NewNamespace(t)
	log := newCallLog()
	var mu sync.Mutex
	active := map[string]bool{}
	var runners []*runner
	for _, id := range []string{"w0", "w1", "w2"} {
		id := id
		runners = append(runners, startRun(t, sessiontest.Connect(t, ns), id, func(ctx context.Context) error {
			mu.Lock()
			active[id] = true
			mu.Unlock()
			err := holdFor(log, id, time.Hour)(ctx)
			mu.Lock()
			active[id] = false
			mu.Unlock()
			return err
		}))
	}
	leading := func() []string {
		mu.Lock()
		defer mu.Unlock()
		var out []string
		for id, on := range active {
			if on {
				out = append(out, id)
			}
		}
		return out
	}
	byID := map[string]*runner{}
	for _, r := range runners {
		byID[r.id] = r
	}
	for round := 0; round < 2; round++ {
		var cur string
		zktest.Eventually(t, wait, func() bool {
			l := leading()
			if len(l) == 1 {
				cur = l[0]
			}
			return len(l) == 1
		}, "one worker leads")
		r := byID[cur]
		r.cancel()
		if err := r.result(t); !errors.Is(err, context.Canceled) {
			t.Errorf("Run returned %v, want context.Canceled", err)
		}
		log.waitCalls(t, "next worker leads", func(c []call) bool { return len(c) == round+1 })
		zktest.Eventually(t, wait, func() bool {
			l := leading()
			return len(l) == 1 && l[0] != cur
		}, "another worker leads")
	}
	log.check(t)
	for _, c := range log.snapshot() {
		if !errors.Is(c.cause, context.Canceled) {
			t.Errorf("work of %s ended with %v, want context.Canceled", c.id, c.cause)
		}
	}
}

// With WithRequeue(false), work returning an error while it leads makes Run
// return that error after the single term and leaves no node; work returning
// nil makes it return nil. (With the default requeue a work error never
// stops Run: see runrule_test.go.)
func TestRunReturns(t *testing.T) {
	ns := zktest.NewNamespace(t)
	s := sessiontest.Connect(t, ns)
	boom := errors.New("boom")
	r := startRun(t, s, "e", func(ctx context.Context) error {
		if _, ok := leader.TermFromContext(ctx); !ok {
			t.Error("no term in work's ctx")
		}
		return boom
	}, leader.WithRequeue(false))
	if err := r.result(t); err != boom {
		t.Errorf("Run = %v, want the work's error", err)
	}
	calls := 0
	r = startRun(t, s, "n", func(ctx context.Context) error { calls++; return nil }, leader.WithRequeue(false))
	if err := r.result(t); err != nil {
		t.Errorf("Run = %v, want nil", err)
	}
	if calls != 1 {
		t.Errorf("%d calls, want 1", calls)
	}
	if kids := children(t, ns.Conn(t), ns); len(kids) != 0 {
		t.Errorf("nodes left: %v", kids)
	}
}

// Work that returns nil is called again (requeue is Run's default), after
// the pause that follows a short term.
func TestRunRequeuesAfterReturn(t *testing.T) {
	ns := zktest.NewNamespace(t)
	s := sessiontest.Connect(t, ns)
	calls := make(chan struct{}, 10)
	r := startRun(t, s, "again", func(ctx context.Context) error {
		calls <- struct{}{}
		if len(calls) == 3 {
			<-ctx.Done()
		}
		return nil
	})
	for i := 0; i < 3; i++ {
		select {
		case <-calls:
		case <-time.After(wait):
			t.Fatalf("call %d missing", i+1)
		}
	}
	r.cancel()
	if err := r.result(t); !errors.Is(err, context.Canceled) {
		t.Errorf("Run = %v", err)
	}
}

// End-at-disconnect policy: a cut cancels work's ctx with ErrSuspended; Run
// campaigns again and calls work once the connection is back. With
// WithRequeue(false) Run returns the loss.
func TestRunLoss(t *testing.T) {
	ns := zktest.NewNamespace(t)
	log := newCallLog()
	s, p := sessiontest.ConnectProxy(t, ns, session.WithLossPolicy(session.EndAtDisconnect))
	var mu sync.Mutex
	runs := 0
	startRun(t, s, "l", func(ctx context.Context) error {
		mu.Lock()
		runs++
		mu.Unlock()
		return holdFor(log, "l", time.Hour)(ctx)
	})
	zktest.Eventually(t, wait, func() bool { mu.Lock(); defer mu.Unlock(); return runs == 1 }, "first run")
	p.Cut()
	calls := log.waitCalls(t, "the cut ends the work", func(c []call) bool { return len(c) == 1 })
	if !errors.Is(calls[0].cause, session.ErrSuspended) {
		t.Errorf("cause %v, want ErrSuspended", calls[0].cause)
	}
	zktest.Eventually(t, wait, func() bool { mu.Lock(); defer mu.Unlock(); return runs == 2 }, "work again after the cut")

	s2, p2 := sessiontest.ConnectProxy(t, ns, session.WithLossPolicy(session.EndAtDisconnect))
	started := make(chan struct{})
	r := startRun(t, s2, "once", func(ctx context.Context) error {
		close(started)
		<-ctx.Done()
		return ctx.Err()
	}, leader.WithRequeue(false), leader.WithID("once"))
	// Wait until "once" is queued behind "l" and has decided so: its node is
	// second and its session watches l's node. Only then does the check below
	// mean something.
	ctx := ctxT(t)
	zktest.Eventually(t, wait, func() bool {
		ps, err := leader.Participants(ctx, s2, electionPath)
		if err != nil || len(ps) != 2 || ps[0].ID != "l" || ps[1].ID != "once" {
			return false
		}
		return sessiontest.Watches(t, ns.Server.Addr(), s2.SessionID())[ns.Path(electionPath)+"/"+ps[0].Node]
	}, "once queued behind l, watching l's node")
	if calls := log.snapshot(); len(calls) != 1 {
		t.Fatalf("l's work ended again: %+v", calls)
	}
	select {
	case <-started:
		t.Fatal("once led while l leads")
	default:
	}
	// End l's run so "once" gets its turn.
	p.Partition() // l's session will expire; once leads
	select {
	case <-started:
	case <-time.After(wait):
		t.Fatal("once never led")
	}
	p2.Cut()
	if err := r.result(t); !errors.Is(err, session.ErrSuspended) {
		t.Errorf("Run = %v, want ErrSuspended", err)
	}
	p.Heal()
}

func TestRunBadInput(t *testing.T) {
	ns := zktest.NewNamespace(t)
	s := sessiontest.Connect(t, ns)
	ctx := context.Background()
	nop := func(context.Context) error { return nil }
	if err := leader.Run(ctx, s, electionPath, nil); !errors.Is(err, session.ErrBadArgument) {
		t.Errorf("nil work: %v", err)
	}
	if err := leader.Run(ctx, nil, electionPath, nop); !errors.Is(err, session.ErrBadArgument) {
		t.Errorf("nil session: %v", err)
	}
	if err := leader.Run(ctx, s, "/a/../b", nop); !errors.Is(err, session.ErrBadArgument) {
		t.Errorf("bad path: %v", err)
	}
	if err := leader.Run(ctx, s, electionPath, nop, leader.WithLogger(nil)); !errors.Is(err, session.ErrBadArgument) {
		t.Errorf("nil logger: %v", err)
	}
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	if err := leader.Run(canceled, s, electionPath, nop); !errors.Is(err, context.Canceled) {
		t.Errorf("canceled ctx: %v", err)
	}
	if kids := children(t, ns.Conn(t), ns); len(kids) != 0 {
		t.Errorf("nodes left: %v", kids)
	}
}

// A Run queued behind the leader returns ctx's error when ctx ends and
// leaves no node behind.
func TestRunCancelWhileQueued(t *testing.T) {
	ns := zktest.NewNamespace(t)
	conn := ns.Conn(t)
	log := newCallLog()
	startRun(t, sessiontest.Connect(t, ns), "first", holdFor(log, "first", time.Hour))
	zktest.Eventually(t, wait, func() bool { return len(children(t, conn, ns)) == 1 }, "first leads")
	r := startRun(t, sessiontest.Connect(t, ns), "queued", func(ctx context.Context) error {
		t.Error("queued worker led")
		return nil
	})
	zktest.Eventually(t, wait, func() bool { return len(children(t, conn, ns)) == 2 }, "second queued")
	r.cancel()
	if err := r.result(t); !errors.Is(err, context.Canceled) {
		t.Errorf("Run = %v, want context.Canceled", err)
	}
	// The canceled campaign's node goes through the session's
	// guaranteed-delete queue (Run waits for it only within its ctx + 10 ms):
	// wait for it.
	var kids []string
	zktest.Eventually(t, wait, func() bool {
		kids = children(t, conn, ns)
		return len(kids) == 1
	}, "children after canceling the queued Run: %v", &kids)
}

// Closing the session under Run cancels work's ctx with session.ErrClosed
// and makes Run return an error matching it.
func TestRunSessionClosed(t *testing.T) {
	ns := zktest.NewNamespace(t)
	s := sessiontest.Connect(t, ns)
	log := newCallLog()
	// Wait for the work itself, not for the node: between the create and the
	// call of work, closing the session ends the campaign and work never runs.
	working := make(chan struct{})
	var once sync.Once
	hold := holdFor(log, "c", time.Hour)
	r := startRun(t, s, "c", func(ctx context.Context) error {
		once.Do(func() { close(working) })
		return hold(ctx)
	})
	waitClosed(t, working, "work started")
	s.Close()
	if err := r.result(t); !errors.Is(err, session.ErrClosed) {
		t.Errorf("Run = %v, want session.ErrClosed", err)
	}
	calls := log.snapshot()
	if len(calls) != 1 || !errors.Is(calls[0].cause, session.ErrClosed) {
		t.Errorf("calls %+v, want one ended by session.ErrClosed", calls)
	}
}
