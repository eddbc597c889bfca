package zkotel_test

import (
	"context"
	"os"
	"os/exec"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/embedded"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/zkrecipes/zkrecipes/mutex"
	"github.com/zkrecipes/zkrecipes/recipes"
	"github.com/zkrecipes/zkrecipes/session"
	"github.com/zkrecipes/zkrecipes/session/zkotel"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// countingProvider is a tracer provider whose spans cost nothing: Start
// counts the call and returns its ctx and one shared non-recording span.
type countingProvider struct {
	embedded.TracerProvider
	starts atomic.Int64
}

func (p *countingProvider) Tracer(string, ...trace.TracerOption) trace.Tracer {
	return &countingTracer{p: p}
}

type countingTracer struct {
	embedded.Tracer
	p *countingProvider
}

// freeSpan is the span every countingTracer.Start returns (boxed once).
var freeSpan trace.Span = noop.Span{}

func (t *countingTracer) Start(ctx context.Context, _ string, _ ...trace.SpanStartOption) (context.Context, trace.Span) {
	t.p.starts.Add(1)
	return ctx, freeSpan
}

// TestNoopTracerStartsNoSpans: with a no-op tracer provider (package
// trace/noop, the trace package's older one, or the global provider while
// none is set) the adapter starts no span, so an uncontended lock cycle on
// ZooKeeper allocates fewer objects than with a tracer whose spans cost
// nothing, which sees two starts per cycle (the acquire and the lease).
// Allocations are the whole process's, averaged over the cycles.
func TestNoopTracerStartsNoSpans(t *testing.T) {
	if ty := reflect.TypeOf(otel.GetTracerProvider()); ty.Kind() != reflect.Pointer || ty.Elem().PkgPath() != "go.opentelemetry.io/otel/internal/global" {
		t.Fatalf("a global tracer provider is set (%v): this test needs the default", ty)
	}
	ns := zktest.NewNamespace(t)
	const runs = 200
	cycles := func(t *testing.T, tp trace.TracerProvider) float64 {
		t.Helper()
		reader := sdkmetric.NewManualReader()
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
		t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
		opts := []zkotel.Option{zkotel.WithMeterProvider(mp)}
		if tp != nil {
			opts = append(opts, zkotel.WithTracerProvider(tp))
		}
		h, err := zkotel.Hooks(opts...)
		if err != nil {
			t.Fatal(err)
		}
		s := connect(t, ns.Servers(), ns, session.WithHooks(h))
		m, err := mutex.New(s, "/"+t.Name(), mutex.WithName("noop"))
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		var cycleErr error
		cycle := func() {
			l, err := m.Lock(ctx)
			if err == nil {
				err = l.Release(ctx)
			}
			if err != nil && cycleErr == nil {
				cycleErr = err
			}
		}
		for i := 0; i < 20; i++ { // the directory, the attribute sets, the request workers
			cycle()
		}
		allocs := testing.AllocsPerRun(runs, cycle)
		if cycleErr != nil {
			t.Fatal(cycleErr)
		}
		return allocs
	}
	counting := &countingProvider{}
	var free float64
	t.Run("counting", func(t *testing.T) {
		free = cycles(t, counting)
		// AllocsPerRun runs the cycle once more ahead of the measured runs.
		if got, want := counting.starts.Load(), int64(2*(20+runs+1)); got != want {
			t.Errorf("%d spans started in %d lock cycles, want 2 per cycle", got, 20+runs+1)
		}
		t.Logf("%.0f allocations per lock cycle with spans that cost nothing", free)
	})
	if t.Failed() {
		return
	}
	for _, v := range []struct {
		name string
		tp   trace.TracerProvider
	}{
		{"noop", noop.NewTracerProvider()},
		{"trace.NewNoopTracerProvider", trace.NewNoopTracerProvider()}, //nolint:staticcheck // the older no-op provider
		{"global", nil},
	} {
		t.Run(v.name, func(t *testing.T) {
			got := cycles(t, v.tp)
			t.Logf("%.0f allocations per lock cycle (%.0f with spans that cost nothing)", got, free)
			if got > free {
				t.Errorf("%.0f allocations per lock cycle with a no-op tracer provider, %.0f with a tracer whose spans cost nothing: spans were started", got, free)
			}
		})
	}
}

// TestSpansFollowTheGlobalProvider: hooks made while no global tracer
// provider is set start no span, start them once a provider is set
// (otel.SetTracerProvider, as a service that sets up tracing after its
// sessions does), and start none again once the global one is a no-op. It
// runs in a child process: a global provider, once set, stays for the
// process's life.
func TestSpansFollowTheGlobalProvider(t *testing.T) {
	const child = "ZKOTEL_TEST_GLOBAL_PROVIDER"
	if os.Getenv(child) == "" {
		cmd := exec.Command(os.Args[0], "-test.run", "^TestSpansFollowTheGlobalProvider$", "-test.count=1", "-test.v")
		cmd.Env = append(os.Environ(), child+"=1")
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "--- PASS: TestSpansFollowTheGlobalProvider") {
			t.Fatalf("the child process: %v\n%s", err, out)
		}
		return
	}
	h, err := zkotel.Hooks(zkotel.WithMeterProvider(metricnoop.NewMeterProvider()))
	if err != nil {
		t.Fatal(err)
	}
	rc := session.Recipe{Kind: "mutex", Name: "global", Path: "/global"}
	lock := func() {
		_, end := h.Acquire(context.Background(), rc)
		end(session.AcquireEnd{})
		h.LeaseEnd(rc, session.LeaseEnd{Held: time.Millisecond, Cause: recipes.ErrReleased})
	}
	spans := tracetest.NewSpanRecorder()
	lock()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	defer tp.Shutdown(context.Background())
	otel.SetTracerProvider(tp)
	lock()
	if got := len(spans.Started()); got != 2 {
		t.Fatalf("%d spans started by a lock before and one after the global provider was set, want the 2 of the second", got)
	}
	otel.SetTracerProvider(noop.NewTracerProvider())
	lock()
	if got := len(spans.Started()); got != 2 {
		t.Fatalf("%d spans started in all, the last lock's with a no-op global provider: want none of its", got)
	}
}
