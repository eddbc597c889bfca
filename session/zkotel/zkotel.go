package zkotel

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/zkrecipes/zkrecipes/recipes"
	"github.com/zkrecipes/zkrecipes/session"
)

// scope is the instrumentation scope of the meter and the tracer.
const scope = "github.com/zkrecipes/zkrecipes/session/zkotel"

// Option configures Hooks.
type Option func(*config)

type config struct {
	mp metric.MeterProvider
	tp trace.TracerProvider
}

// WithMeterProvider sets the meter provider (default: otel.GetMeterProvider()).
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(c *config) { c.mp = mp }
}

// WithTracerProvider sets the tracer provider (default:
// otel.GetTracerProvider()). On a no-op provider the adapter starts no span.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(c *config) { c.tp = tp }
}

// Hooks returns session hooks that record the metrics and spans listed in
// the package documentation. Pass them to session.Connect with
// session.WithHooks. Call it once per meter provider and give the value to
// every session: each call registers the session gauges' callback with the
// meter for the provider's life, and two values on one provider would each
// report only their own sessions under the same names. The error is the
// meter's, if it refuses an instrument.
func Hooks(opts ...Option) (session.Hooks, error) {
	c := config{}
	for _, o := range opts {
		if o != nil {
			o(&c)
		}
	}
	if c.mp == nil {
		c.mp = otel.GetMeterProvider()
	}
	if c.tp == nil {
		c.tp = otel.GetTracerProvider()
	}
	r, err := newRecorder(c)
	if err != nil {
		return session.Hooks{}, err
	}
	return session.Hooks{
		State:    r.state,
		Request:  r.request,
		Retry:    r.retry,
		Acquire:  r.acquire,
		LeaseEnd: r.leaseEnd,
	}, nil
}

// Buckets, in seconds: requests take from a tenth of a millisecond; waits
// and holds up to minutes.
var (
	requestBuckets = []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}
	waitBuckets    = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 1800}
)

type recorder struct {
	tracing tracing

	transitions    metric.Int64Counter
	suspended      metric.Float64Histogram
	requests       metric.Float64Histogram
	retries        metric.Int64Counter
	acquireWait    metric.Float64Histogram
	handoff        metric.Float64Histogram
	held           metric.Float64Histogram
	endDelay       metric.Float64Histogram
	leases         metric.Int64ObservableUpDownCounter
	semaphoreMax   metric.Int64Gauge
	leaderChanges  metric.Int64Counter
	sessionGauges  metric.Registration
	pendingDeletes metric.Int64ObservableGauge
	watches        metric.Int64ObservableGauge
	suspendedFor   metric.Float64ObservableGauge
	timeout        metric.Float64ObservableGauge

	attrs sync.Map // attrKey → *opts

	// Histogram measurements of requests, acquires, handoffs and lease
	// durations wait in pending until it holds flushAt of them, a second
	// has passed (flushTimer) or a collection begins (observe): recording
	// them in a batch finds the meter's structures in the CPU's cache,
	// where one at a time, between a recipe's own work, cost several times
	// more. flushMu makes a collection wait for a batch being recorded, so
	// that it includes every measurement whose hook returned before it
	// began; spare is the other buffer (flushMu).
	pendingMu  sync.Mutex
	pending    []measurement
	flushTimer *time.Timer // armed while pending is not empty (pendingMu)
	flushMu    sync.Mutex
	spare      []measurement

	mu       sync.Mutex
	sessions map[*session.Session]*sessionState
}

// measurement is a histogram value that waits for the next flush.
type measurement struct {
	h metric.Float64Histogram
	k attrKey
	v float64
}

// flushAt is how many measurements wait before the hook that adds the
// last one records them all; flushAfter is how long the first of them waits
// at most.
const (
	flushAt    = 128
	flushAfter = time.Second
)

// record adds a measurement of h to the pending batch, and records the batch
// if it is full.
func (r *recorder) record(h metric.Float64Histogram, k attrKey, v float64) {
	r.pendingMu.Lock()
	r.pending = append(r.pending, measurement{h, k, v})
	full := len(r.pending) >= flushAt
	if len(r.pending) == 1 {
		if r.flushTimer == nil {
			r.flushTimer = time.AfterFunc(flushAfter, r.flush)
		} else {
			r.flushTimer.Reset(flushAfter)
		}
	}
	r.pendingMu.Unlock()
	if full {
		r.flush()
	}
}

// flush records the pending measurements.
func (r *recorder) flush() {
	r.flushMu.Lock()
	defer r.flushMu.Unlock()
	r.pendingMu.Lock()
	batch := r.pending
	r.pending = r.spare[:0]
	if r.flushTimer != nil {
		r.flushTimer.Stop()
	}
	r.pendingMu.Unlock()
	bg := context.Background()
	for i := range batch {
		m := &batch[i]
		m.h.Record(bg, m.v, r.opt(m.k).rec...)
	}
	clear(batch)
	r.spare = batch
}

// sessionState is what the recorder keeps of one session.
type sessionState struct {
	suspendedAt time.Time // zero unless Suspended
}

func newRecorder(c config) (*recorder, error) {
	m := c.mp.Meter(scope)
	r := &recorder{tracing: newTracing(c.tp), sessions: map[*session.Session]*sessionState{}}
	var errs []error
	add := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	var err error
	r.transitions, err = m.Int64Counter("zkrecipes.session.transitions", metric.WithUnit("{transition}"),
		metric.WithDescription("Session state transitions, by state entered."))
	add(err)
	r.suspended, err = m.Float64Histogram("zkrecipes.session.suspended.duration", metric.WithUnit("s"),
		metric.WithDescription("Time a session spent suspended, by how the suspension ended: reconnected (the time to reconnect), lost or closed."),
		metric.WithExplicitBucketBoundaries(waitBuckets...))
	add(err)
	r.requests, err = m.Float64Histogram("zkrecipes.request.duration", metric.WithUnit("s"),
		metric.WithDescription("ZooKeeper requests, by operation and error, from write to answer."),
		metric.WithExplicitBucketBoundaries(requestBuckets...))
	add(err)
	r.retries, err = m.Int64Counter("zkrecipes.request.retries", metric.WithUnit("{retry}"),
		metric.WithDescription("Recipe requests sent again after a connection error."))
	add(err)
	r.acquireWait, err = m.Float64Histogram("zkrecipes.acquire.duration", metric.WithUnit("s"),
		metric.WithDescription("Time acquires waited, by recipe kind, name and outcome (acquired, busy, canceled, deadline, error)."),
		metric.WithExplicitBucketBoundaries(waitBuckets...))
	add(err)
	r.handoff, err = m.Float64Histogram("zkrecipes.acquire.handoff.duration", metric.WithUnit("s"),
		metric.WithDescription("For acquires that held on the deletion notice of the node they waited on: the time from that notice to the grant (a leader's part of a failover)."),
		metric.WithExplicitBucketBoundaries(requestBuckets...))
	add(err)
	r.held, err = m.Float64Histogram("zkrecipes.lease.duration", metric.WithUnit("s"),
		metric.WithDescription("Time leases were held (a leader's term length), by recipe kind, name and how the lease ended (released, deleted, suspended, lost, closed)."),
		metric.WithExplicitBucketBoundaries(waitBuckets...))
	add(err)
	r.endDelay, err = m.Float64Histogram("zkrecipes.lease.loss.delay", metric.WithUnit("s"),
		metric.WithDescription("For leases ended by a suspension or a session loss: the time from the last answer heard from ZooKeeper to the holder being told."),
		metric.WithExplicitBucketBoundaries(waitBuckets...))
	add(err)
	r.leases, err = m.Int64ObservableUpDownCounter("zkrecipes.lease.active", metric.WithUnit("{lease}"),
		metric.WithDescription("Leases held now by this process, by recipe kind and name."))
	add(err)
	r.semaphoreMax, err = m.Int64Gauge("zkrecipes.semaphore.max",
		metric.WithDescription("The fixed maximum of a semaphore's leases, by name, as of its last acquire."))
	add(err)
	r.leaderChanges, err = m.Int64Counter("zkrecipes.leader.changes", metric.WithUnit("{change}"),
		metric.WithDescription("Leadership gained and lost by this process, by election name and change (gained, lost)."))
	add(err)
	r.pendingDeletes, err = m.Int64ObservableGauge("zkrecipes.session.pending_deletes", metric.WithUnit("{delete}"),
		metric.WithDescription("Deletes the session's guaranteed-delete queue holds."))
	add(err)
	r.watches, err = m.Int64ObservableGauge("zkrecipes.session.watches", metric.WithUnit("{watch}"),
		metric.WithDescription("Watches the session's recipes have set and not yet seen fire."))
	add(err)
	r.suspendedFor, err = m.Float64ObservableGauge("zkrecipes.session.suspended.age", metric.WithUnit("s"),
		metric.WithDescription("How long the longest-suspended open session has been suspended now (0 when none is)."))
	add(err)
	r.timeout, err = m.Float64ObservableGauge("zkrecipes.session.timeout", metric.WithUnit("s"),
		metric.WithDescription("The shortest negotiated session timeout among the open sessions."))
	add(err)
	if len(errs) > 0 {
		return nil, fmt.Errorf("zkotel: %w", errors.Join(errs...))
	}
	r.sessionGauges, err = m.RegisterCallback(r.observe, r.pendingDeletes, r.watches, r.suspendedFor, r.timeout, r.leases)
	if err != nil {
		return nil, fmt.Errorf("zkotel: %w", err)
	}
	return r, nil
}

// observe reports the gauges of every open session, and the leases held
// (counted by the hooks, without a call into the meter per lease).
func (r *recorder) observe(_ context.Context, o metric.Observer) error {
	r.flush()
	r.attrs.Range(func(_, v any) bool {
		if a := v.(*opts); a.leases.Load() {
			o.ObserveInt64(r.leases, a.active.Load(), a.obs...)
		}
		return true
	})
	now := time.Now()
	var longest time.Duration
	r.mu.Lock()
	ss := make([]*session.Session, 0, len(r.sessions))
	for s, st := range r.sessions {
		ss = append(ss, s)
		if !st.suspendedAt.IsZero() {
			longest = max(longest, now.Sub(st.suspendedAt))
		}
	}
	r.mu.Unlock()
	var pending, watches int64
	var timeout time.Duration
	for _, s := range ss {
		pending += int64(s.PendingDeletes())
		watches += int64(s.Watches())
		if t := s.SessionTimeout(); t > 0 && (timeout == 0 || t < timeout) {
			timeout = t
		}
	}
	o.ObserveInt64(r.pendingDeletes, pending)
	o.ObserveInt64(r.watches, watches)
	o.ObserveFloat64(r.suspendedFor, longest.Seconds())
	if timeout > 0 {
		o.ObserveFloat64(r.timeout, timeout.Seconds())
	}
	return nil
}

func (r *recorder) state(s *session.Session, ev session.Event) {
	st := ev.State.String()
	r.transitions.Add(context.Background(), 1, r.opt(attrKey{state: st}).add...)
	r.mu.Lock()
	ss := r.sessions[s]
	if ss == nil && ev.State != session.Closed {
		ss = &sessionState{}
		r.sessions[s] = ss
	}
	var was time.Time
	if ss != nil {
		was = ss.suspendedAt
		ss.suspendedAt = time.Time{}
		if ev.State == session.Suspended {
			ss.suspendedAt = ev.At
		}
	}
	if ev.State == session.Closed {
		delete(r.sessions, s)
	}
	r.mu.Unlock()
	if !was.IsZero() && ev.State != session.Suspended {
		end := map[session.State]string{session.Reconnected: "reconnected", session.Lost: "lost", session.Closed: "closed"}[ev.State]
		if end == "" {
			end = st
		}
		r.suspended.Record(context.Background(), ev.At.Sub(was).Seconds(), r.opt(attrKey{outcome: end}).rec...)
	}
}

func (r *recorder) request(op string, d time.Duration, err error) {
	r.record(r.requests, attrKey{op: op, errType: errorType(err)}, d.Seconds())
}

func (r *recorder) retry(err error) {
	r.retries.Add(context.Background(), 1, r.opt(attrKey{errType: errorType(err)}).add...)
}

func (r *recorder) acquire(ctx context.Context, rc session.Recipe) (context.Context, func(session.AcquireEnd)) {
	start := time.Now()
	var span trace.Span // nil: no span (a no-op tracer provider)
	if tr := r.tracing.tracer(); tr != nil {
		ctx, span = tr.Start(ctx, acquireSpan(rc.Kind), internalSpan...)
		if span.IsRecording() {
			span.SetAttributes(spanAttrs(rc)...)
		}
	}
	return ctx, func(e session.AcquireEnd) {
		outcome := acquireOutcome(e.Err)
		bg := context.Background()
		r.record(r.acquireWait, attrKey{kind: rc.Kind, name: rc.Name, outcome: outcome}, time.Since(start).Seconds())
		rec := span != nil && span.IsRecording()
		if rec {
			span.SetAttributes(attribute.String("zkrecipes.outcome", outcome))
		}
		if e.Err == nil {
			r.leaseActive(rc, 1)
			if e.Handoff > 0 {
				r.record(r.handoff, attrKey{kind: rc.Kind, name: rc.Name}, e.Handoff.Seconds())
				if rec {
					span.SetAttributes(attribute.Float64("zkrecipes.handoff_s", e.Handoff.Seconds()))
				}
			}
			if rc.Kind == "semaphore" && rc.Max > 0 {
				r.semaphoreMax.Record(bg, int64(rc.Max), r.opt(attrKey{name: rc.Name}).rec...)
			}
			if rc.Kind == "leader" {
				r.leaderChanges.Add(bg, 1, r.opt(attrKey{name: rc.Name, outcome: "gained"}).add...)
			}
		} else if outcome == "error" && rec {
			span.RecordError(e.Err)
			span.SetStatus(codes.Error, e.Err.Error())
		}
		if span != nil {
			span.End()
		}
	}
}

func (r *recorder) leaseEnd(rc session.Recipe, e session.LeaseEnd) {
	bg := context.Background()
	cause := leaseCause(e.Cause)
	r.leaseActive(rc, -1)
	r.record(r.held, attrKey{kind: rc.Kind, name: rc.Name, outcome: cause}, e.Held.Seconds())
	if cause == "suspended" || cause == "lost" {
		r.endDelay.Record(bg, e.Delay.Seconds(), r.opt(attrKey{kind: rc.Kind, name: rc.Name, outcome: cause}).rec...)
	}
	if rc.Kind == "leader" {
		r.leaderChanges.Add(bg, 1, r.opt(attrKey{name: rc.Name, outcome: "lost"}).add...)
	}
	tr := r.tracing.tracer()
	if tr == nil {
		return
	}
	now := time.Now()
	_, span := tr.Start(bg, leaseSpan(rc.Kind), trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithTimestamp(now.Add(-e.Held)))
	if !span.IsRecording() {
		span.End()
		return
	}
	span.SetAttributes(spanAttrs(rc)...)
	span.SetAttributes(attribute.String("zkrecipes.cause", cause), attribute.Float64("zkrecipes.held_s", e.Held.Seconds()))
	if e.Delay > 0 {
		span.SetAttributes(attribute.Float64("zkrecipes.loss_delay_s", e.Delay.Seconds()))
	}
	if cause != "released" && cause != "closed" {
		span.SetStatus(codes.Error, e.Cause.Error())
	}
	span.End(trace.WithTimestamp(now))
}

// tracing is the adapter's tracer, or none when the tracer provider is a
// no-op. Starting a span on a no-op provider still costs a context and a
// span value, per acquire and per lease: on one, no span is started.
type tracing struct {
	tr trace.Tracer // nil: a no-op provider
	// placeholder is the type of the global provider's placeholder when the
	// tracer is its: the global provider makes no span until one is set
	// (otel.SetTracerProvider), and then its tracers follow that one.
	placeholder reflect.Type
}

// globalPkg is the package of the global tracer provider's placeholder,
// which otel.GetTracerProvider returns until a provider is set.
const globalPkg = "go.opentelemetry.io/otel/internal/global"

// oldNoop is the type of the no-op provider of the trace package (replaced
// by package trace/noop, and still a no-op).
var oldNoop = reflect.TypeOf(trace.NewNoopTracerProvider()) //nolint:staticcheck // recognised, not used

func newTracing(tp trace.TracerProvider) tracing {
	if isNoop(tp) {
		return tracing{}
	}
	t := tracing{tr: tp.Tracer(scope)}
	if ty := reflect.TypeOf(tp); ty != nil && ty.Kind() == reflect.Pointer && ty.Elem().PkgPath() == globalPkg {
		t.placeholder = ty
	}
	return t
}

// isNoop reports whether tp is one of OpenTelemetry's no-op providers.
func isNoop(tp trace.TracerProvider) bool {
	switch tp.(type) {
	case noop.TracerProvider, *noop.TracerProvider:
		return true
	}
	return reflect.TypeOf(tp) == oldNoop
}

// tracer returns the tracer to start spans with now, or nil if the provider
// makes none: a no-op provider, or the global placeholder while no provider
// has been set (or a no-op one was).
func (t *tracing) tracer() trace.Tracer {
	if t.placeholder != nil {
		if g := otel.GetTracerProvider(); reflect.TypeOf(g) == t.placeholder || isNoop(g) {
			return nil
		}
	}
	return t.tr
}

// leaseActive counts a lease of rc's kind and name taken (1) or ended (-1)
// for the lease.active gauge.
func (r *recorder) leaseActive(rc session.Recipe, n int64) {
	a := r.opt(attrKey{kind: rc.Kind, name: rc.Name})
	a.active.Add(n)
	if !a.leases.Load() {
		a.leases.Store(true)
	}
}

// attrKey is a metric attribute set: only the non-empty fields are set
// (name also when kind is).
type attrKey struct {
	kind, name, outcome, op, errType, state string
}

// opts are the options of one attribute set, as each instrument kind takes
// them: made once, so that recording allocates nothing for them.
type opts struct {
	rec []metric.RecordOption
	add []metric.AddOption
	obs []metric.ObserveOption

	// The lease.active gauge of a kind and name: leases held now, and
	// whether any was ever counted (only those sets are reported).
	active atomic.Int64
	leases atomic.Bool
}

// opt returns the options for k, made once per key.
func (r *recorder) opt(k attrKey) *opts {
	if o, ok := r.attrs.Load(k); ok {
		return o.(*opts)
	}
	var kv []attribute.KeyValue
	add := func(key, v string, always bool) {
		if v != "" || always {
			kv = append(kv, attribute.String(key, v))
		}
	}
	add("zkrecipes.kind", k.kind, false)
	add("zkrecipes.name", k.name, k.kind != "")
	add("zkrecipes.op", k.op, false)
	add("error.type", k.errType, false)
	add("zkrecipes.state", k.state, false)
	add("zkrecipes.outcome", k.outcome, false)
	set := metric.WithAttributeSet(attribute.NewSet(kv...))
	o, _ := r.attrs.LoadOrStore(k, &opts{rec: []metric.RecordOption{set}, add: []metric.AddOption{set}, obs: []metric.ObserveOption{set}})
	return o.(*opts)
}

// internalSpan is the start option of an acquire's span, made once.
var internalSpan = []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindInternal)}

// acquireSpan and leaseSpan name a kind's spans (constants for the known
// kinds: no allocation per span).
func acquireSpan(kind string) string {
	switch kind {
	case "mutex":
		return "zkrecipes.acquire mutex"
	case "rwlock.read":
		return "zkrecipes.acquire rwlock.read"
	case "rwlock.write":
		return "zkrecipes.acquire rwlock.write"
	case "semaphore":
		return "zkrecipes.acquire semaphore"
	case "leader":
		return "zkrecipes.acquire leader"
	}
	return "zkrecipes.acquire " + kind
}

func leaseSpan(kind string) string {
	switch kind {
	case "mutex":
		return "zkrecipes.lease mutex"
	case "rwlock.read":
		return "zkrecipes.lease rwlock.read"
	case "rwlock.write":
		return "zkrecipes.lease rwlock.write"
	case "semaphore":
		return "zkrecipes.lease semaphore"
	case "leader":
		return "zkrecipes.lease leader"
	}
	return "zkrecipes.lease " + kind
}

// spanAttrs are a recipe's span attributes: the path belongs here, never in
// a metric.
func spanAttrs(rc session.Recipe) []attribute.KeyValue {
	kv := []attribute.KeyValue{
		attribute.String("zkrecipes.kind", rc.Kind),
		attribute.String("zkrecipes.name", rc.Name),
		attribute.String("zkrecipes.path", rc.Path),
	}
	if rc.Max > 0 {
		kv = append(kv, attribute.Int("zkrecipes.max", rc.Max))
	}
	return kv
}

// acquireOutcome classifies an acquire's error.
func acquireOutcome(err error) string {
	if err == nil {
		return "acquired"
	}
	return outcomes.classify(err)
}

// leaseCause classifies why a lease ended.
func leaseCause(err error) string { return causes.classify(err) }

// errorType names a request's error as ZooKeeper's KeeperException codes
// do ("" for success).
func errorType(err error) string {
	if err == nil {
		return ""
	}
	return errorTypes.classify(err)
}

// A classifier names an error by the first of its sentinels the error
// matches (errors.Is), or by other.
type classifier struct {
	targets []error
	names   []string
	other   string
}

var (
	outcomes = classifier{
		targets: []error{recipes.ErrBusy, context.Canceled, context.DeadlineExceeded},
		names:   []string{"busy", "canceled", "deadline"},
		other:   "error",
	}
	causes = classifier{
		targets: []error{recipes.ErrReleased, recipes.ErrNodeDeleted, session.ErrClosed, session.ErrLost, session.ErrSuspended},
		names:   []string{"released", "deleted", "closed", "lost", "suspended"},
		other:   "error",
	}
	errorTypes = classifier{
		targets: []error{zk.ErrNoNode, zk.ErrNodeExists, zk.ErrBadVersion, zk.ErrNotEmpty, zk.ErrNoAuth,
			zk.ErrSessionExpired, zk.ErrConnectionClosed, zk.ErrClosing, zk.ErrSessionMoved,
			zk.ErrNoChildrenForEphemerals, zk.ErrInvalidACL, zk.ErrAuthFailed, zk.ErrNoServer},
		names: []string{"NONODE", "NODEEXISTS", "BADVERSION", "NOTEMPTY", "NOAUTH",
			"SESSIONEXPIRED", "CONNECTIONLOSS", "CLOSING", "SESSIONMOVED",
			"NOCHILDRENFOREPHEMERALS", "INVALIDACL", "AUTHFAILED", "CONNECTIONLOSS"},
		other: "other",
	}
)

func init() {
	for _, c := range []*classifier{&outcomes, &causes, &errorTypes} {
		if len(c.targets) > 64 || len(c.targets) != len(c.names) {
			panic("zkotel: a classifier has more than 64 targets or a name missing")
		}
	}
}

// classify returns the name of the first target err matches. It walks err's
// tree once for all the targets, as errors.Is would for each (== on the
// sentinels, which are comparable, and Is methods).
func (c *classifier) classify(err error) string {
	m := c.matches(err)
	for i := range c.targets {
		if m&(1<<i) != 0 {
			return c.names[i]
		}
	}
	return c.other
}

// matches returns the set of targets err matches, bit i for target i (at
// most 64 targets: see init).
func (c *classifier) matches(err error) uint64 {
	var m uint64
	for err != nil {
		is, hasIs := err.(interface{ Is(error) bool })
		for i, t := range c.targets {
			if err == t || (hasIs && is.Is(t)) {
				m |= 1 << i
			}
		}
		switch u := err.(type) {
		case interface{ Unwrap() error }:
			err = u.Unwrap()
		case interface{ Unwrap() []error }:
			for _, e := range u.Unwrap() {
				m |= c.matches(e)
			}
			return m
		default:
			return m
		}
	}
	return m
}
