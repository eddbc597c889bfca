package zkotel_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/zkrecipes/zkrecipes/leader"
	"github.com/zkrecipes/zkrecipes/mutex"
	"github.com/zkrecipes/zkrecipes/recipes"
	"github.com/zkrecipes/zkrecipes/session"
	"github.com/zkrecipes/zkrecipes/session/zkotel"
	"github.com/zkrecipes/zkrecipes/zktest"
)

func TestMain(m *testing.M) { zktest.Main(m) }

const wait = 30 * time.Second

// otelKit is an in-memory meter and span recorder, and the hooks on them.
type otelKit struct {
	reader *sdkmetric.ManualReader
	spans  *tracetest.SpanRecorder
	hooks  session.Hooks
}

func newKit(t *testing.T) *otelKit {
	t.Helper()
	k := &otelKit{reader: sdkmetric.NewManualReader(), spans: tracetest.NewSpanRecorder()}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(k.reader))
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(k.spans))
	t.Cleanup(func() {
		_ = mp.Shutdown(context.Background())
		_ = tp.Shutdown(context.Background())
	})
	h, err := zkotel.Hooks(zkotel.WithMeterProvider(mp), zkotel.WithTracerProvider(tp))
	if err != nil {
		t.Fatal(err)
	}
	k.hooks = h
	return k
}

// collect reads every metric.
func (k *otelKit) collect(t *testing.T) map[string]metricdata.Aggregation {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := k.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string]metricdata.Aggregation{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			out[m.Name] = m.Data
		}
	}
	return out
}

// attrsMatch reports whether a data point's attributes include want.
func attrsMatch(set attribute.Set, want map[string]string) bool {
	for k, v := range want {
		got, ok := set.Value(attribute.Key(k))
		if !ok || got.AsString() != v {
			return false
		}
	}
	return true
}

// histCount sums the counts of the histogram points matching want, and
// returns the largest max among them.
func histCount(t *testing.T, ms map[string]metricdata.Aggregation, name string, want map[string]string) (n uint64, maxv float64) {
	t.Helper()
	h, ok := ms[name].(metricdata.Histogram[float64])
	if !ok {
		return 0, 0
	}
	for _, p := range h.DataPoints {
		if attrsMatch(p.Attributes, want) {
			n += p.Count
			if m, ok := p.Max.Value(); ok && m > maxv {
				maxv = m
			}
		}
	}
	return n, maxv
}

// sumOf sums the int64 sum points matching want; the metric must exist.
func sumOf(t *testing.T, ms map[string]metricdata.Aggregation, name string, want map[string]string) int64 {
	t.Helper()
	s, ok := ms[name].(metricdata.Sum[int64])
	if !ok {
		t.Fatalf("no int64 sum named %s among %d metrics", name, len(ms))
	}
	var n int64
	for _, p := range s.DataPoints {
		if attrsMatch(p.Attributes, want) {
			n += p.Value
		}
	}
	return n
}

func connect(t *testing.T, servers []string, ns *zktest.Namespace, opts ...session.Option) *session.Session {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	s, err := session.Connect(ctx, servers, append([]session.Option{session.WithNamespace(ns.Root)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestPartitionRecordsSuspensionAndLoss: a holder partitioned from
// ZooKeeper records one Suspended transition, a lease that ended with cause
// suspended and its delay (from the last answer heard to the holder told,
// under the session timeout), and a lease span with that cause; after the
// session expires, Lost and the suspension's duration (outcome lost).
func TestPartitionRecordsSuspensionAndLoss(t *testing.T) {
	k := newKit(t)
	ns := zktest.NewNamespace(t)
	p := ns.Proxy(t)
	sess := connect(t, p.Servers(), ns, session.WithHooks(k.hooks), session.WithSessionTimeout(2*time.Second))
	m, err := mutex.New(sess, "/jobs/report", mutex.WithName("report"))
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
	if n := sumOf(t, k.collect(t), "zkrecipes.lease.active", map[string]string{"zkrecipes.kind": "mutex", "zkrecipes.name": "report"}); n != 1 {
		t.Fatalf("leases held %d while the lock is held, want 1", n)
	}
	p.Partition()
	zktest.Eventually(t, wait, func() bool {
		g, ok := k.collect(t)["zkrecipes.session.suspended.age"].(metricdata.Gauge[float64])
		return ok && len(g.DataPoints) == 1 && g.DataPoints[0].Value > 0
	}, "the suspension's age gauge never rose while partitioned")
	select {
	case <-l.Done():
	case <-time.After(wait):
		t.Fatal("the lease did not end after the partition")
	}
	if !errors.Is(l.Err(), session.ErrSuspended) {
		t.Fatalf("lease ended with %v, want ErrSuspended", l.Err())
	}
	timeout := sess.SessionTimeout()
	var ms map[string]metricdata.Aggregation
	// The lease ends as the session is suspended; the State hook hears of
	// the transition on its own goroutine, a moment later.
	zktest.Eventually(t, wait, func() bool {
		ms = k.collect(t)
		n, _ := histCount(t, ms, "zkrecipes.lease.loss.delay", map[string]string{"zkrecipes.kind": "mutex", "zkrecipes.name": "report", "zkrecipes.outcome": "suspended"})
		s, _ := ms["zkrecipes.session.transitions"].(metricdata.Sum[int64])
		suspended := false
		for _, p := range s.DataPoints {
			suspended = suspended || attrsMatch(p.Attributes, map[string]string{"zkrecipes.state": "Suspended"})
		}
		return n == 1 && suspended
	}, "no loss delay or no Suspended transition recorded for the suspended lease")
	if g, ok := ms["zkrecipes.session.timeout"].(metricdata.Gauge[float64]); !ok || len(g.DataPoints) != 1 || g.DataPoints[0].Value != timeout.Seconds() {
		t.Errorf("session timeout gauge %+v, want %v", ms["zkrecipes.session.timeout"], timeout.Seconds())
	}
	_, delay := histCount(t, ms, "zkrecipes.lease.loss.delay", map[string]string{"zkrecipes.outcome": "suspended"})
	if delay <= 0 || delay >= timeout.Seconds() {
		t.Errorf("loss delay %.3fs, want within (0, %v)", delay, timeout)
	}
	if n, _ := histCount(t, ms, "zkrecipes.lease.duration", map[string]string{"zkrecipes.kind": "mutex", "zkrecipes.outcome": "suspended"}); n != 1 {
		t.Errorf("%d lease durations with outcome suspended, want 1", n)
	}
	if n := sumOf(t, ms, "zkrecipes.session.transitions", map[string]string{"zkrecipes.state": "Suspended"}); n != 1 {
		t.Errorf("%d Suspended transitions, want 1", n)
	}
	if n := sumOf(t, ms, "zkrecipes.lease.active", map[string]string{"zkrecipes.kind": "mutex"}); n != 0 {
		t.Errorf("leases held %d after the loss, want 0", n)
	}
	var leaseSpan sdktrace.ReadOnlySpan
	for _, s := range k.spans.Ended() {
		if s.Name() == "zkrecipes.lease mutex" {
			leaseSpan = s
		}
	}
	if leaseSpan == nil {
		t.Fatal("no lease span")
	}
	attrs := map[string]string{}
	for _, a := range leaseSpan.Attributes() {
		attrs[string(a.Key)] = a.Value.Emit()
	}
	if attrs["zkrecipes.cause"] != "suspended" || attrs["zkrecipes.path"] != "/jobs/report" || attrs["zkrecipes.loss_delay_s"] == "" {
		t.Errorf("lease span attributes %v: want cause suspended, the path and the loss delay", attrs)
	}

	// Past the session timeout the session is lost: the suspension ends
	// as lost.
	zktest.Eventually(t, wait, func() bool { return sess.State() == session.Lost || sess.State() == session.Connected }, "the session was never lost")
	zktest.Eventually(t, wait, func() bool {
		ms = k.collect(t)
		n, _ := histCount(t, ms, "zkrecipes.session.suspended.duration", map[string]string{"zkrecipes.outcome": "lost"})
		return n == 1
	}, "no suspension ending as lost recorded")
	p.Heal()
}

// TestFailoverRecordsLeadership: two latches on one election, each on its
// own session sharing one set of hooks; the leader's session closes, and
// the other takes over: one leadership lost and one gained are recorded
// with it (two gained in all), and the handoff of the new leader.
func TestFailoverRecordsLeadership(t *testing.T) {
	k := newKit(t)
	ns := zktest.NewNamespace(t)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	s1 := connect(t, ns.Servers(), ns, session.WithHooks(k.hooks))
	s2 := connect(t, ns.Servers(), ns, session.WithHooks(k.hooks))
	l1, err := leader.NewLatch(s1, "/election", leader.WithName("scheduler"))
	if err != nil {
		t.Fatal(err)
	}
	defer l1.Close()
	if err := l1.Start(); err != nil {
		t.Fatal(err)
	}
	if _, err := l1.Await(ctx); err != nil {
		t.Fatal(err)
	}
	l2, err := leader.NewLatch(s2, "/election", leader.WithName("scheduler"))
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	if err := l2.Start(); err != nil {
		t.Fatal(err)
	}
	// l2 waits behind l1 (its node is in the election) before l1 goes.
	zktest.Eventually(t, wait, func() bool {
		ps, err := leader.Participants(ctx, s2, "/election")
		return err == nil && len(ps) == 2
	}, "the second latch never entered the election")
	ms := k.collect(t)
	if g := sumOf(t, ms, "zkrecipes.leader.changes", map[string]string{"zkrecipes.name": "scheduler", "zkrecipes.outcome": "gained"}); g != 1 {
		t.Fatalf("%d leaderships gained before the failover, want 1", g)
	}
	s1.Close()
	if _, err := l2.Await(ctx); err != nil {
		t.Fatal(err)
	}
	zktest.Eventually(t, wait, func() bool {
		ms = k.collect(t)
		return sumOf(t, ms, "zkrecipes.leader.changes", map[string]string{"zkrecipes.outcome": "lost"}) == 1 &&
			sumOf(t, ms, "zkrecipes.leader.changes", map[string]string{"zkrecipes.outcome": "gained"}) == 2
	}, "the failover did not record one leadership lost and one gained")
	if n, _ := histCount(t, ms, "zkrecipes.lease.duration", map[string]string{"zkrecipes.kind": "leader", "zkrecipes.outcome": "closed"}); n != 1 {
		t.Errorf("%d terms ended by the close, want 1", n)
	}
	if n, _ := histCount(t, ms, "zkrecipes.acquire.handoff.duration", map[string]string{"zkrecipes.kind": "leader"}); n != 1 {
		t.Errorf("%d leader handoffs, want 1", n)
	}
}

// TestCountsMatchContendedRun: 4 sessions take a mutex 25 times each; the
// acquisitions, lease ends and held gauge recorded equal what the run saw.
func TestCountsMatchContendedRun(t *testing.T) {
	k := newKit(t)
	ns := zktest.NewNamespace(t)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	const sessions, rounds = 4, 25
	var mu sync.Mutex
	acquired, busy := 0, 0
	errs := make(chan error, sessions)
	var wg sync.WaitGroup
	for i := 0; i < sessions; i++ {
		s := connect(t, ns.Servers(), ns, session.WithHooks(k.hooks))
		m, err := mutex.New(s, "/counted", mutex.WithName("counted"))
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := 0; r < rounds; r++ {
				l, err := m.TryLock(ctx)
				if errors.Is(err, recipes.ErrBusy) {
					mu.Lock()
					busy++
					mu.Unlock()
					l, err = m.Lock(ctx)
				}
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				acquired++
				mu.Unlock()
				if err := l.Release(ctx); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	var ms map[string]metricdata.Aggregation
	var got, ended, busyGot uint64
	zktest.Eventually(t, wait, func() bool {
		ms = k.collect(t)
		got, _ = histCount(t, ms, "zkrecipes.acquire.duration", map[string]string{"zkrecipes.name": "counted", "zkrecipes.outcome": "acquired"})
		busyGot, _ = histCount(t, ms, "zkrecipes.acquire.duration", map[string]string{"zkrecipes.name": "counted", "zkrecipes.outcome": "busy"})
		ended, _ = histCount(t, ms, "zkrecipes.lease.duration", map[string]string{"zkrecipes.name": "counted", "zkrecipes.outcome": "released"})
		return ended == uint64(acquired)
	}, "lease ends recorded never reached the %d releases", acquired)
	if got != uint64(acquired) || busyGot != uint64(busy) {
		t.Errorf("recorded %d acquired and %d busy, the run saw %d and %d", got, busyGot, acquired, busy)
	}
	if h := sumOf(t, ms, "zkrecipes.lease.active", map[string]string{"zkrecipes.name": "counted"}); h != 0 {
		t.Errorf("leases held %d after every release, want 0", h)
	}
	if n, _ := histCount(t, ms, "zkrecipes.request.duration", map[string]string{"zkrecipes.op": "create"}); n < uint64(acquired) {
		t.Errorf("%d creates recorded for %d acquisitions", n, acquired)
	}
	t.Logf("%d acquisitions (%d after a busy TryLock) recorded as %d acquired and %d busy", acquired, busy, got, busyGot)
}
