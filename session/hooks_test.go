package session_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/leader"
	"github.com/zkrecipes/zkrecipes/mutex"
	"github.com/zkrecipes/zkrecipes/recipes"
	"github.com/zkrecipes/zkrecipes/rwlock"
	"github.com/zkrecipes/zkrecipes/semaphore"
	"github.com/zkrecipes/zkrecipes/session"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// hookLog records what the hooks are told.
type hookLog struct {
	mu       sync.Mutex
	states   []session.State
	sessions []*session.Session
	requests []request
	retries  []error
	acquires []string // "kind/name: outcome"
	ends     []leaseEnd
}

type request struct {
	op  string
	d   time.Duration
	err error
}

type leaseEnd struct {
	r session.Recipe
	e session.LeaseEnd
}

func (h *hookLog) hooks() session.Hooks {
	return session.Hooks{
		State: func(s *session.Session, ev session.Event) {
			h.mu.Lock()
			defer h.mu.Unlock()
			h.states = append(h.states, ev.State)
			h.sessions = append(h.sessions, s)
		},
		Request: func(op string, d time.Duration, err error) {
			h.mu.Lock()
			defer h.mu.Unlock()
			h.requests = append(h.requests, request{op, d, err})
		},
		Retry: func(err error) {
			h.mu.Lock()
			defer h.mu.Unlock()
			h.retries = append(h.retries, err)
		},
		Acquire: func(ctx context.Context, r session.Recipe) (context.Context, func(session.AcquireEnd)) {
			return ctx, func(e session.AcquireEnd) {
				outcome := "acquired"
				if e.Err != nil {
					outcome = e.Err.Error()
				}
				h.mu.Lock()
				defer h.mu.Unlock()
				h.acquires = append(h.acquires, fmt.Sprintf("%s/%s/%d: %s", r.Kind, r.Name, r.Max, outcome))
			}
		},
		LeaseEnd: func(r session.Recipe, e session.LeaseEnd) {
			h.mu.Lock()
			defer h.mu.Unlock()
			h.ends = append(h.ends, leaseEnd{r, e})
		},
	}
}

func (h *hookLog) snapshot() hookLog {
	h.mu.Lock()
	defer h.mu.Unlock()
	return hookLog{
		states:   append([]session.State(nil), h.states...),
		sessions: append([]*session.Session(nil), h.sessions...),
		requests: append([]request(nil), h.requests...),
		retries:  append([]error(nil), h.retries...),
		acquires: append([]string(nil), h.acquires...),
		ends:     append([]leaseEnd(nil), h.ends...),
	}
}

func hookedSession(t *testing.T, servers []string, ns *zktest.Namespace, h *hookLog, opts ...session.Option) *session.Session {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	s, err := session.Connect(ctx, servers, append([]session.Option{session.WithNamespace(ns.Root), session.WithHooks(h.hooks())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestHooksStateInOrder: the State hook sees Connected, then Suspended and
// Reconnected around a cut, then Closed, in order, each with the Session
// that Connect returned.
func TestHooksStateInOrder(t *testing.T) {
	var h hookLog
	ns := zktest.NewNamespace(t)
	p := ns.Proxy(t)
	s := hookedSession(t, p.Servers(), ns, &h)
	p.Cut()
	zktest.Eventually(t, wait, func() bool {
		st := h.snapshot().states
		return len(st) >= 3 && st[len(st)-1] == session.Reconnected
	}, "the hook never saw the reconnect after the cut")
	s.Close()
	got := h.snapshot()
	want := []session.State{session.Connected, session.Suspended, session.Reconnected, session.Closed}
	if fmt.Sprint(got.states) != fmt.Sprint(want) {
		t.Fatalf("states %v, want %v", got.states, want)
	}
	for i, ps := range got.sessions {
		if ps != s {
			t.Fatalf("transition %d came with session %p, Connect returned %p", i, ps, s)
		}
	}
}

// TestHooksStateNotCalledForFailedConnect: a Connect that fails calls no
// State hook.
func TestHooksStateNotCalledForFailedConnect(t *testing.T) {
	var h hookLog
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if _, err := session.Connect(ctx, []string{deadAddr(t)}, session.WithHooks(h.hooks())); err == nil {
		t.Fatal("Connect to a dead address succeeded")
	}
	// A host that does not resolve fails inside go-zookeeper's Connect;
	// the hook's goroutine must not stay behind (TestMain checks leaks).
	if _, err := session.Connect(ctx, []string{"no-such-host.invalid:2181"}, session.WithHooks(h.hooks())); err == nil {
		t.Fatal("Connect to a host that does not resolve succeeded")
	}
	if st := h.snapshot().states; len(st) != 0 {
		t.Fatalf("the State hook saw %v for a session Connect never returned", st)
	}
}

// TestHooksRequestsAndRetries: every request is reported with its
// operation, its duration and the server's error; a create whose
// connection is dropped is reported unanswered (zk.ErrConnectionClosed),
// and the recipe's retry of it goes to the Retry hook.
func TestHooksRequestsAndRetries(t *testing.T) {
	var h hookLog
	ns := zktest.NewNamespace(t)
	p := ns.Proxy(t)
	s := hookedSession(t, p.Servers(), ns, &h)
	if _, _, err := s.Conn().Get(ns.Path("missing")); !errors.Is(err, zk.ErrNoNode) {
		t.Fatalf("get of a missing node: %v", err)
	}
	var dropped sync.Once
	p.OnRequest(func(r zktest.Request) zktest.Action {
		act := zktest.Forward
		if r.Op == zktest.OpCreate || r.Op == zktest.OpCreate2 {
			dropped.Do(func() { act = zktest.DropRequest })
		}
		return act
	})
	m, err := mutex.New(s, "/retried")
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	l, err := m.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	got := h.snapshot()
	var noNode, lost, creates int
	for _, r := range got.requests {
		if r.d < 0 {
			t.Errorf("request %v: negative duration", r)
		}
		switch {
		case r.op == "getData" && errors.Is(r.err, zk.ErrNoNode):
			noNode++
		case strings.HasPrefix(r.op, "create") && errors.Is(r.err, zk.ErrConnectionClosed):
			lost++
		case strings.HasPrefix(r.op, "create") && r.err == nil:
			creates++
		}
	}
	if noNode != 1 || lost != 1 || creates == 0 {
		t.Errorf("requests: %d getData NoNode (want 1), %d creates unanswered (want 1), %d creates (want some); all: %v", noNode, lost, creates, got.requests)
	}
	if len(got.retries) == 0 {
		t.Errorf("no retry reported after the dropped create")
	}
	for _, err := range got.retries {
		if !zkConnectionError(err) {
			t.Errorf("retry reported with %v, want a connection error", err)
		}
	}
}

func zkConnectionError(err error) bool {
	return errors.Is(err, zk.ErrConnectionClosed) || errors.Is(err, zk.ErrNoServer) || errors.Is(err, zk.ErrSessionMoved)
}

// TestHooksEveryRecipeKind: each recipe kind reports its acquires (kind,
// the WithName name, a semaphore's maximum, the outcome) and its lease ends
// with their causes, and gets the ctx the Acquire hook returned.
func TestHooksEveryRecipeKind(t *testing.T) {
	var h hookLog
	ns := zktest.NewNamespace(t)
	s := hookedSession(t, ns.Servers(), ns, &h)
	other := hookedSession(t, ns.Servers(), ns, &hookLog{})
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()

	m, err := mutex.New(s, "/m", mutex.WithName("orders"))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	l, err := m.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// A second Lock queues behind; its ctx ends: canceled.
	cctx, ccancel := context.WithTimeout(ctx, 200*time.Millisecond)
	if _, err := m.Lock(cctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("queued Lock: %v", err)
	}
	ccancel()
	if _, err := m.TryLock(ctx); !errors.Is(err, recipes.ErrBusy) {
		t.Fatalf("TryLock on a held lock: %v", err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}

	nf, err := mutex.NewNonFair(s, "/nf", mutex.WithName("nonfair"))
	if err != nil {
		t.Fatal(err)
	}
	defer nf.Close()
	nl, err := nf.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := nl.Release(ctx); err != nil {
		t.Fatal(err)
	}

	rw, err := rwlock.New(s, "/rw", rwlock.WithName("config"))
	if err != nil {
		t.Fatal(err)
	}
	defer rw.Close()
	rl, err := rw.RLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := rl.Release(ctx); err != nil {
		t.Fatal(err)
	}
	wl, err := rw.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// A third party deletes the write lease's node.
	if err := other.Conn().Delete(ns.Path("/rw/"+wl.Node()), -1); err != nil {
		t.Fatal(err)
	}
	select {
	case <-wl.Done():
	case <-time.After(wait):
		t.Fatal("the write lease did not end at its node's deletion")
	}

	sem, err := semaphore.New(s, "/sem", 3, semaphore.WithName("slots"))
	if err != nil {
		t.Fatal(err)
	}
	sl, err := sem.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sem.Close() // ends the lease: closed

	lt, err := leader.NewLatch(s, "/lead", leader.WithName("scheduler"))
	if err != nil {
		t.Fatal(err)
	}
	if err := lt.Start(); err != nil {
		t.Fatal(err)
	}
	term, err := lt.Await(ctx)
	if err != nil {
		t.Fatal(err)
	}
	lt.Close()
	<-term.Done()
	<-sl.Done()

	want := []string{
		"mutex/orders/0: acquired",
		"mutex/orders/0: " + "deadline",
		"mutex/orders/0: busy",
		"mutex/nonfair/0: acquired",
		"rwlock.read/config/0: acquired",
		"rwlock.write/config/0: acquired",
		"semaphore/slots/3: acquired",
		"leader/scheduler/0: acquired",
	}
	var got hookLog
	zktest.Eventually(t, wait, func() bool {
		got = h.snapshot()
		return len(got.ends) >= 6
	}, "lease ends not all reported")
	if len(got.acquires) != len(want) {
		t.Fatalf("acquires %q, want %d like %q", got.acquires, len(want), want)
	}
	for i, a := range got.acquires {
		w := want[i]
		if strings.HasSuffix(w, "deadline") {
			if !strings.HasPrefix(a, "mutex/orders/0: ") || !strings.Contains(a, context.DeadlineExceeded.Error()) {
				t.Errorf("acquire %d: %q, want the queued Lock's deadline", i, a)
			}
			continue
		}
		if strings.HasSuffix(w, "busy") {
			if !strings.Contains(a, recipes.ErrBusy.Error()) {
				t.Errorf("acquire %d: %q, want busy", i, a)
			}
			continue
		}
		if a != w {
			t.Errorf("acquire %d: %q, want %q", i, a, w)
		}
	}
	causes := map[string]error{
		"mutex/orders":        recipes.ErrReleased,
		"mutex/nonfair":       recipes.ErrReleased,
		"rwlock.read/config":  recipes.ErrReleased,
		"rwlock.write/config": recipes.ErrNodeDeleted,
		"semaphore/slots":     session.ErrClosed,
		"leader/scheduler":    session.ErrClosed,
	}
	if len(got.ends) != len(causes) {
		t.Fatalf("%d lease ends, want %d: %v", len(got.ends), len(causes), got.ends)
	}
	for _, e := range got.ends {
		key := e.r.Kind + "/" + e.r.Name
		want, ok := causes[key]
		if !ok || !errors.Is(e.e.Cause, want) {
			t.Errorf("lease end of %s: cause %v, want %v", key, e.e.Cause, want)
		}
		if e.e.Held <= 0 || e.e.Delay != 0 {
			t.Errorf("lease end of %s: held %v, delay %v; want held > 0, no delay", key, e.e.Held, e.e.Delay)
		}
		if e.r.Path == "" || !strings.HasPrefix(e.r.Path, "/") {
			t.Errorf("lease end of %s: path %q", key, e.r.Path)
		}
	}
}

// TestHooksAcquireCtx: the acquire goes on with the ctx the Acquire hook
// returns (a span's): a hook that returns a canceled one cancels it.
func TestHooksAcquireCtx(t *testing.T) {
	ns := zktest.NewNamespace(t)
	hooks := session.Hooks{
		Acquire: func(ctx context.Context, r session.Recipe) (context.Context, func(session.AcquireEnd)) {
			c, cancel := context.WithCancel(ctx)
			cancel()
			return c, nil
		},
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	s, err := session.Connect(ctx, ns.Servers(), session.WithNamespace(ns.Root), session.WithHooks(hooks))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	m, err := mutex.New(s, "/ctx")
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if _, err := m.Lock(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Lock under a hook that returns a canceled ctx: %v, want context.Canceled", err)
	}
}

// TestHooksGauges: PendingDeletes counts the delete of a lease's node that
// waits for the connection, and returns to 0 once it is done; Watches
// counts a waiter's watch.
func TestHooksGauges(t *testing.T) {
	ns := zktest.NewNamespace(t)
	p := ns.Proxy(t)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	s, err := session.Connect(ctx, p.Servers(), session.WithNamespace(ns.Root), session.WithSessionTimeout(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	holder := hookedSession(t, ns.Servers(), ns, &hookLog{})
	hm, err := mutex.New(holder, "/g")
	if err != nil {
		t.Fatal(err)
	}
	defer hm.Close()
	hl, err := hm.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	m, err := mutex.New(s, "/g")
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	w0 := s.Watches()
	got := make(chan error, 1)
	go func() {
		l, err := m.Lock(ctx)
		if err == nil {
			<-l.Done() // ended by the cut below
		}
		got <- err
	}()
	zktest.Eventually(t, wait, func() bool { return s.Watches() > w0 }, "a waiting Lock set no watch (Watches stayed %d)", w0)
	if err := hl.Release(ctx); err != nil {
		t.Fatal(err)
	}
	// The waiter holds now; refuse new connections and cut: its lease
	// ends, and the delete of its node waits for the connection.
	zktest.Eventually(t, wait, func() bool { return m.Held() }, "the waiter never held")
	p.Refuse(true)
	p.Cut()
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	zktest.Eventually(t, wait, func() bool { return s.PendingDeletes() >= 1 }, "no delete pending while the connection is down")
	p.Refuse(false)
	zktest.Eventually(t, wait, func() bool { return s.PendingDeletes() == 0 }, "the pending delete never finished (%d left)", s.PendingDeletes())
	if n := (*session.Session)(nil).PendingDeletes() + (*session.Session)(nil).Watches(); n != 0 {
		t.Errorf("a nil Session reports %d", n)
	}
}

// TestHooksAcquireCounts: AcquireN(3) is three acquires and three lease
// ends; a re-entry of a reentrant lock is no acquire; a downgrade's read
// lease is no acquire either (the write lease ends released).
func TestHooksAcquireCounts(t *testing.T) {
	var h hookLog
	ns := zktest.NewNamespace(t)
	s := hookedSession(t, ns.Servers(), ns, &h)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()

	sem, err := semaphore.New(s, "/sem", 5, semaphore.WithName("batch"))
	if err != nil {
		t.Fatal(err)
	}
	defer sem.Close()
	ls, err := sem.AcquireN(ctx, 3)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range ls {
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}

	re, err := mutex.NewReentrant(s, "/re", mutex.WithName("re"))
	if err != nil {
		t.Fatal(err)
	}
	defer re.Close()
	outer, err := re.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	inner, err := re.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_ = inner.Release(ctx)
	_ = outer.Release(ctx)

	rw, err := rwlock.New(s, "/rw", rwlock.WithName("down"))
	if err != nil {
		t.Fatal(err)
	}
	defer rw.Close()
	wl, err := rw.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rl, err := wl.Downgrade(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_ = rl.Release(ctx)

	var got hookLog
	zktest.Eventually(t, wait, func() bool {
		got = h.snapshot()
		return len(got.ends) >= 5
	}, "lease ends not all reported")
	want := []string{"semaphore/batch/5: acquired", "semaphore/batch/5: acquired", "semaphore/batch/5: acquired",
		"mutex/re/0: acquired", "rwlock.write/down/0: acquired"}
	if fmt.Sprint(got.acquires) != fmt.Sprint(want) {
		t.Fatalf("acquires %q, want %q", got.acquires, want)
	}
	if len(got.ends) != 5 {
		t.Fatalf("%d lease ends, want 5 (3 semaphore leases, the reentrant lock, the write lease): %v", len(got.ends), got.ends)
	}
	for _, e := range got.ends {
		if !errors.Is(e.e.Cause, recipes.ErrReleased) {
			t.Errorf("lease end of %s/%s: %v, want released", e.r.Kind, e.r.Name, e.e.Cause)
		}
	}
}

// TestHooksLossDelay: under SessionOnly a partitioned holder's lease ends
// when the heal shows that its session expired; the reported delay runs
// from the last answer heard before the partition, not from the reconnect
// that brought the news.
func TestHooksLossDelay(t *testing.T) {
	var h hookLog
	ns := zktest.NewNamespace(t)
	p := ns.Proxy(t)
	s := hookedSession(t, p.Servers(), ns, &h, session.WithLossPolicy(session.SessionOnly), session.WithSessionTimeout(4*time.Second))
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	m, err := mutex.New(s, "/d")
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	l, err := m.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	creds := p.Sessions()
	partitioned := time.Now()
	p.Partition()
	zktest.Eventually(t, wait, func() bool { return s.State() == session.Suspended }, "the partition was never noticed")
	if err := zktest.ExpireSession(ctx, ns.Servers(), creds[len(creds)-1]); err != nil {
		t.Fatal(err)
	}
	p.Heal()
	select {
	case <-l.Done():
	case <-time.After(wait):
		t.Fatal("the lease never ended")
	}
	ended := time.Now()
	if !errors.Is(l.Err(), session.ErrLost) {
		t.Fatalf("lease ended with %v, want ErrLost", l.Err())
	}
	var got hookLog
	zktest.Eventually(t, wait, func() bool { got = h.snapshot(); return len(got.ends) == 1 }, "no lease end reported")
	e := got.ends[0].e
	if min := ended.Sub(partitioned) - 100*time.Millisecond; e.Delay < min {
		t.Fatalf("delay %v, want at least %v (the time from the partition to the end)", e.Delay, min)
	}
	t.Logf("partition to lease end %v, reported delay %v", ended.Sub(partitioned), e.Delay)
}
