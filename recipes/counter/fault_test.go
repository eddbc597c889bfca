package counter_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/internal/testkit/sessiontest"
	"github.com/zkrecipes/zkrecipes/mutex"
	"github.com/zkrecipes/zkrecipes/recipes"
	"github.com/zkrecipes/zkrecipes/recipes/counter"
	"github.com/zkrecipes/zkrecipes/session"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// firstSet returns a proxy hook that applies act to the first setData
// request on the counter's node (and counts it in hit), then forwards.
func firstSet(ns *zktest.Namespace, hit *atomic.Int32, act zktest.Action) func(zktest.Request) zktest.Action {
	full := ns.Path(cpath)
	return func(r zktest.Request) zktest.Action {
		if zktest.OpName(r.Op) == "setData" && r.Path == full && hit.Add(1) == 1 {
			return act
		}
		return zktest.Forward
	}
}

// The server applies the increment but its reply is lost: Add says
// ErrUnknownOutcome and returns the value its write was conditional on;
// the documented retry (TrySet with that value) finds the write applied and
// does not apply it again: the counter moved by exactly one, under both
// loss policies.
func TestUnknownOutcomeSwallowedReply(t *testing.T) {
	for _, pol := range []session.LossPolicy{session.Standard, session.SessionOnly} {
		t.Run(pol.String(), func(t *testing.T) {
			ns := zktest.NewNamespace(t)
			ctx := ctxT(t)
			s, p := sessiontest.ConnectProxy(t, ns, session.WithLossPolicy(pol))
			c := newCounter(t, s)
			before, err := c.Add(ctx, 10)
			if err != nil {
				t.Fatal(err)
			}
			var hit atomic.Int32
			p.OnRequest(firstSet(ns, &hit, zktest.SwallowReply))
			v, err := c.Increment(ctx)
			if !errors.Is(err, counter.ErrUnknownOutcome) || v != before {
				t.Fatalf("Increment with its reply swallowed = %+v, %v; want ErrUnknownOutcome and %+v", v, err, before)
			}
			if hit.Load() == 0 {
				t.Fatal("the set was never seen")
			}
			cur, ok, err := c.TrySet(ctx, v, v.Value+1)
			if err != nil || ok || cur.Value != 11 || cur.Version != before.Version+1 {
				t.Fatalf("the retry TrySet = %+v, %v, %v; want false: the write was applied once", cur, ok, err)
			}
			if g, _ := c.Get(ctx); g.Value != 11 {
				t.Fatalf("value %d, want 11", g.Value)
			}
		})
	}
}

// The set is dropped before the server sees it: Add sends it again on the
// reconnected session and succeeds: applied once, no unknown outcome.
func TestDroppedSetIsRetried(t *testing.T) {
	ns := zktest.NewNamespace(t)
	ctx := ctxT(t)
	s, p := sessiontest.ConnectProxy(t, ns)
	c := newCounter(t, s)
	if _, err := c.Add(ctx, 10); err != nil {
		t.Fatal(err)
	}
	var hit atomic.Int32
	p.OnRequest(firstSet(ns, &hit, zktest.DropRequest))
	v, err := c.Increment(ctx)
	if err != nil || v.Value != 11 || hit.Load() < 2 {
		t.Fatalf("Increment with its set dropped once = %+v, %v (%d sets); want 11", v, err, hit.Load())
	}
	if g, _ := c.Get(ctx); g.Value != 11 {
		t.Fatalf("value %d, want 11", g.Value)
	}
}

// The increment reaches the server, then the client is partitioned until
// its session expires: Add goes on on the new session, finds the version
// moved and says ErrUnknownOutcome; the documented retry does not apply it
// again.
func TestSessionExpiresDuringAdd(t *testing.T) {
	ns := zktest.NewNamespace(t)
	ctx := ctxT(t)
	s, p := sessiontest.ConnectProxy(t, ns)
	rec := sessiontest.Record(t, s)
	c := newCounter(t, s)
	if _, err := c.Add(ctx, 10); err != nil {
		t.Fatal(err)
	}
	var hit atomic.Int32
	p.OnRequest(firstSet(ns, &hit, zktest.SwallowReply))
	type res struct {
		v   counter.Value[int64]
		err error
	}
	done := make(chan res, 1)
	go func() {
		v, err := c.Increment(ctx)
		done <- res{v, err}
	}()
	rec.Wait(t, wait, session.Suspended)
	p.Partition()
	rec.Wait(t, wait, session.Lost)
	select {
	case r := <-done:
		t.Fatalf("Increment returned during the partition: %+v, %v", r.v, r.err)
	default:
	}
	p.Heal()
	r := sessiontest.Recv(t, done, wait, "Increment after the session's loss")
	if !errors.Is(r.err, counter.ErrUnknownOutcome) {
		t.Fatalf("Increment = %+v, %v; want ErrUnknownOutcome", r.v, r.err)
	}
	if _, ok, err := c.TrySet(ctx, r.v, r.v.Value+1); err != nil || ok {
		t.Fatalf("the retry TrySet = %v, %v; want false", ok, err)
	}
	if g, _ := c.Get(ctx); g.Value != 11 {
		t.Fatalf("value %d, want 11", g.Value)
	}
}

// Four sessions increment through the documented at-most-once procedure
// while one of them has its connection cut five times: the total is at
// least the increments known applied and at most those plus the unknown
// ones. Nothing is applied twice.
func TestCutsDuringContention(t *testing.T) {
	const sessions, each = 4, 200
	ns := zktest.NewNamespace(t)
	ctx := ctxT(t)
	var known, maybe atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, sessions)
	s0, p := sessiontest.ConnectProxy(t, ns)
	rec := sessiontest.Record(t, s0)
	for i := 0; i < sessions; i++ {
		s := s0
		if i > 0 {
			s = sessiontest.Connect(t, ns)
		}
		c := newCounter(t, s)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < each; j++ {
				ok, err := addOnce(ctx, c, 1)
				if err != nil {
					errs <- err
					return
				}
				if ok {
					known.Add(1)
				} else {
					maybe.Add(1)
				}
			}
		}()
	}
	for i := 0; i < 5; i++ {
		p.Cut()
		rec.Wait(t, wait, session.Suspended)
		rec.Wait(t, wait, session.Reconnected)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	g, err := newCounter(t, sessiontest.Connect(t, ns)).Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("total %d: %d known, %d unknown", g.Value, known.Load(), maybe.Load())
	if g.Value < known.Load() || g.Value > known.Load()+maybe.Load() {
		t.Fatalf("total %d outside [%d, %d]", g.Value, known.Load(), known.Load()+maybe.Load())
	}
}

// Close while an Add waits for a partitioned connection: the Add returns
// ErrClosed at once.
func TestCloseWhileWaiting(t *testing.T) {
	ns := zktest.NewNamespace(t)
	ctx := ctxT(t)
	s, p := sessiontest.ConnectProxy(t, ns, session.WithSessionTimeout(10*time.Second))
	rec := sessiontest.Record(t, s)
	c := newCounter(t, s)
	if _, err := c.Increment(ctx); err != nil {
		t.Fatal(err)
	}
	p.Partition()
	defer p.Heal()
	done := make(chan error, 1)
	go func() {
		_, err := c.Increment(ctx)
		done <- err
	}()
	rec.Wait(t, wait, session.Suspended)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := sessiontest.Recv(t, done, wait, "Increment at Close"); !errors.Is(err, session.ErrClosed) {
		t.Fatalf("Increment at Close = %v, want ErrClosed", err)
	}
}

// bumpFirstSet returns a hook that, at the first set of the counter, writes
// the node from another client first: the set loses the race.
func bumpFirstSet(t *testing.T, ns *zktest.Namespace, raw *zk.Conn, to []byte) func(zktest.Request) zktest.Action {
	full := ns.Path(cpath)
	var once sync.Once
	return func(r zktest.Request) zktest.Action {
		if zktest.OpName(r.Op) == "setData" && r.Path == full {
			once.Do(func() {
				if _, err := raw.Set(full, to, -1); err != nil {
					t.Errorf("bump: %v", err)
				}
			})
		}
		return zktest.Forward
	}
}

// A lost race with WithPromotion(lock, 1) takes the fair mutex at the lock
// path (Curator's InterProcessMutex layout, so package mutex excludes it):
// while another process holds it the Add waits, and it completes, exactly
// once, after the release; the lock node goes afterwards.
// The same when the BackOff stops before the promotion's count of lost
// races.
func TestPromotionToLock(t *testing.T) {
	t.Run("after 1", func(t *testing.T) { testPromotion(t, counter.WithPromotion(lockPath, 1)) })
	t.Run("backoff stops", func(t *testing.T) {
		testPromotion(t, counter.WithPromotion(lockPath, 100),
			counter.WithRetry(func() backoff.BackOff { return &backoff.StopBackOff{} }))
	})
}

const lockPath = "/counters/a-lock"

func testPromotion(t *testing.T, opts ...counter.Option) {
	ns := zktest.NewNamespace(t)
	raw := ns.Conn(t)
	ctx := ctxT(t)
	s, p := sessiontest.ConnectProxy(t, ns)
	c := newCounter(t, s, opts...)
	if _, err := c.Add(ctx, 10); err != nil {
		t.Fatal(err)
	}
	m, err := mutex.New(sessiontest.Connect(t, ns), lockPath)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	lease, err := m.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	p.OnRequest(bumpFirstSet(t, ns, raw, []byte{0, 0, 0, 0, 0, 0, 0, 20}))
	done := make(chan error, 1)
	go func() {
		_, err := c.Increment(ctx)
		done <- err
	}()
	zktest.Eventually(t, wait, func() bool {
		k, _, err := raw.Children(ns.Path(lockPath))
		return err == nil && len(k) == 2
	}, "the promoted Add queues on the lock")
	select {
	case err := <-done:
		t.Fatalf("Add returned while the lock was held: %v", err)
	default:
	}
	if err := lease.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := sessiontest.Recv(t, done, wait, "the promoted Add"); err != nil {
		t.Fatal(err)
	}
	if g, _ := c.Get(ctx); g.Value != 21 {
		t.Fatalf("value %d, want 21", g.Value)
	}
	zktest.Eventually(t, wait, func() bool {
		k, _, err := raw.Children(ns.Path(lockPath))
		return errors.Is(err, zk.ErrNoNode) || err == nil && len(k) == 0
	}, "the lock node goes")
}

// Without promotion, a BackOff that stops ends the call at the first lost
// race with recipes.ErrBusy, and nothing is written.
func TestRetryStops(t *testing.T) {
	ns := zktest.NewNamespace(t)
	raw := ns.Conn(t)
	ctx := ctxT(t)
	s, p := sessiontest.ConnectProxy(t, ns)
	c := newCounter(t, s, counter.WithRetry(func() backoff.BackOff { return &backoff.StopBackOff{} }))
	if _, err := c.Add(ctx, 10); err != nil {
		t.Fatal(err)
	}
	p.OnRequest(bumpFirstSet(t, ns, raw, []byte{0, 0, 0, 0, 0, 0, 0, 20}))
	if _, err := c.Increment(ctx); !errors.Is(err, recipes.ErrBusy) {
		t.Fatalf("Increment after a lost race = %v, want ErrBusy", err)
	}
	if g, _ := c.Get(ctx); g.Value != 20 {
		t.Fatalf("value %d, want 20 (the other writer's)", g.Value)
	}
	// A ctx that ends is the bound otherwise.
	short, cancel := context.WithTimeout(ctx, time.Nanosecond)
	defer cancel()
	<-short.Done()
	if _, err := c.Increment(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Increment with an ended ctx = %v", err)
	}
}

// ctx ends while the write is on its way to the server (the proxy holds
// it): Add returns at once with ErrUnknownOutcome and ctx's error; the
// write then lands, and the documented retry does not apply it again.
func TestUnknownOutcomeCtxEnds(t *testing.T) {
	ns := zktest.NewNamespace(t)
	ctx := ctxT(t)
	s, p := sessiontest.ConnectProxy(t, ns)
	c := newCounter(t, s)
	before, err := c.Add(ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	held, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	full := ns.Path(cpath)
	p.OnRequest(func(r zktest.Request) zktest.Action {
		if zktest.OpName(r.Op) == "setData" && r.Path == full {
			once.Do(func() {
				close(held)
				<-release
			})
		}
		return zktest.Forward
	})
	defer func() {
		select {
		case <-release:
		default:
			close(release)
		}
	}()
	actx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	var got counter.Value[int64]
	go func() {
		v, err := c.Increment(actx)
		got = v
		done <- err
	}()
	select {
	case <-held:
	case <-time.After(wait):
		t.Fatal("the set never reached the proxy")
	}
	cancel()
	err = sessiontest.Recv(t, done, wait, "Increment at cancel")
	if !errors.Is(err, counter.ErrUnknownOutcome) || !errors.Is(err, context.Canceled) || got != before {
		t.Fatalf("Increment at cancel = %+v, %v; want ErrUnknownOutcome, context.Canceled and %+v", got, err, before)
	}
	close(release) // the held write reaches the server now
	zktest.Eventually(t, wait, func() bool {
		v, err := c.Get(ctx)
		return err == nil && v.Value == 11
	}, "the late write lands")
	if _, ok, err := c.TrySet(ctx, got, got.Value+1); err != nil || ok {
		t.Fatalf("the retry TrySet = %v, %v; want false", ok, err)
	}
	if g, _ := c.Get(ctx); g.Value != 11 {
		t.Fatalf("value %d, want 11", g.Value)
	}
}

// bumpSets returns a hook that, at each of the first n sets of the counter,
// writes the node from another client first (100+i at the i-th): those
// sets lose the race.
func bumpSets(t *testing.T, ns *zktest.Namespace, raw *zk.Conn, n int32) func(zktest.Request) zktest.Action {
	full := ns.Path(cpath)
	var hit atomic.Int32
	return func(r zktest.Request) zktest.Action {
		if zktest.OpName(r.Op) == "setData" && r.Path == full {
			if i := hit.Add(1); i <= n {
				if _, err := raw.Set(full, []byte{0, 0, 0, 0, 0, 0, 0, byte(100 + i)}, -1); err != nil {
					t.Errorf("bump: %v", err)
				}
			}
		}
		return zktest.Forward
	}
}

// Under the promotion lock a call goes on until it succeeds, even when the
// BackOff it got there stops while a writer without the lock keeps winning:
// it does not fail with ErrBusy.
func TestPromotedOutlastsBackOff(t *testing.T) {
	ns := zktest.NewNamespace(t)
	raw := ns.Conn(t)
	ctx := ctxT(t)
	s, p := sessiontest.ConnectProxy(t, ns)
	c := newCounter(t, s, counter.WithPromotion(lockPath, 1),
		counter.WithRetry(func() backoff.BackOff {
			return backoff.WithMaxRetries(backoff.NewConstantBackOff(time.Millisecond), 2)
		}))
	if _, err := c.Add(ctx, 10); err != nil {
		t.Fatal(err)
	}
	p.OnRequest(bumpSets(t, ns, raw, 6)) // 1 lost race before the lock, 5 under it
	v, err := c.Increment(ctx)
	if err != nil {
		t.Fatalf("promoted Increment while others win 6 races: %v", err)
	}
	if v.Value != 107 {
		t.Fatalf("Increment wrote %d, want 107 (after the sixth bump, 106)", v.Value)
	}
}

// The connection drops, and stays down, just as a promoted Add deletes its
// lock node: the Add still returns within its cleanup bound (5 s), not
// after the session timeout, and the session deletes the lock node once
// the connection is back.
func TestPromotionReleaseBounded(t *testing.T) {
	ns := zktest.NewNamespace(t)
	raw := ns.Conn(t)
	ctx := ctxT(t)
	s, p := sessiontest.ConnectProxy(t, ns, session.WithSessionTimeout(40*time.Second))
	c := newCounter(t, s, counter.WithPromotion(lockPath, 1))
	if _, err := c.Add(ctx, 10); err != nil {
		t.Fatal(err)
	}
	lockDir := ns.Path(lockPath) + "/"
	var dropped atomic.Int32
	bump := bumpFirstSet(t, ns, raw, []byte{0, 0, 0, 0, 0, 0, 0, 20})
	p.OnRequest(func(r zktest.Request) zktest.Action {
		if zktest.OpName(r.Op) == "delete" && strings.HasPrefix(r.Path, lockDir) && dropped.Add(1) == 1 {
			p.Partition()
			return zktest.DropRequest
		}
		return bump(r)
	})
	defer p.Heal()
	done := make(chan error, 1)
	go func() {
		_, err := c.Increment(ctx)
		done <- err
	}()
	// Past the 5 s bound with room for a loaded machine, well short of the
	// 40 s after which the session would be declared lost.
	if err := sessiontest.Recv(t, done, 20*time.Second, "the promoted Increment whose lock release is cut"); err != nil {
		t.Fatalf("Increment = %v", err)
	}
	if dropped.Load() == 0 {
		t.Fatal("the lock node's delete was never seen")
	}
	p.Heal()
	zktest.Eventually(t, wait, func() bool {
		k, _, err := raw.Children(ns.Path(lockPath))
		return errors.Is(err, zk.ErrNoNode) || err == nil && len(k) == 0
	}, "the lock node goes once the connection is back")
	if g, err := c.Get(ctx); err != nil || g.Value != 21 {
		t.Fatalf("Get = %+v, %v; want 21", g, err)
	}
}
