package zkotel

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/zkrecipes/zkrecipes/recipes"
	"github.com/zkrecipes/zkrecipes/session"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// isTarget matches target through an Is method only.
type isTarget struct{ target error }

func (e isTarget) Error() string        { return "is " + e.target.Error() }
func (e isTarget) Is(target error) bool { return target == e.target }

// TestClassifyIsErrorsIs: the one walk of classify names every error as
// the errors.Is of each sentinel in turn does: wrapped, joined, matched by
// an Is method, several sentinels at once.
func TestClassifyIsErrorsIs(t *testing.T) {
	errs := []error{
		errors.New("other"),
		recipes.ErrReleased,
		fmt.Errorf("mutex %q: %w", "/a", recipes.ErrReleased),
		fmt.Errorf("x: %w", fmt.Errorf("y: %w", session.ErrSuspended)),
		fmt.Errorf("%w; then %w", session.ErrSuspended, session.ErrLost),
		errors.Join(errors.New("a"), fmt.Errorf("b: %w", session.ErrClosed)),
		isTarget{recipes.ErrNodeDeleted},
		fmt.Errorf("w: %w", isTarget{session.ErrLost}),
		fmt.Errorf("busy: %w", recipes.ErrBusy),
		fmt.Errorf("%w: %w", context.Canceled, context.DeadlineExceeded),
		fmt.Errorf("get: %w", zk.ErrNoNode),
		fmt.Errorf("%w", zk.ErrNoServer),
		errors.Join(zk.ErrBadVersion, zk.ErrNoNode),
	}
	for _, c := range []*classifier{&outcomes, &causes, &errorTypes} {
		for _, err := range errs {
			want := c.other
			for i, target := range c.targets {
				if errors.Is(err, target) {
					want = c.names[i]
					break
				}
			}
			if got := c.classify(err); got != want {
				t.Errorf("classify(%v) = %q, errors.Is says %q", err, got, want)
			}
		}
	}
	if got := acquireOutcome(nil); got != "acquired" {
		t.Errorf("acquireOutcome(nil) = %q", got)
	}
	if got := errorType(nil); got != "" {
		t.Errorf("errorType(nil) = %q", got)
	}
}

// meteredHooks returns the adapter's hooks on an SDK meter provider (with
// opts) and its reader; the provider shuts down with the test.
func meteredHooks(t *testing.T, opts ...sdkmetric.Option) (session.Hooks, *sdkmetric.ManualReader) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(append(opts, sdkmetric.WithReader(reader))...)
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	h, err := Hooks(WithMeterProvider(mp))
	if err != nil {
		t.Fatal(err)
	}
	return h, reader
}

// requestCount returns how many request durations reader collects.
func requestCount(t *testing.T, reader *sdkmetric.ManualReader) uint64 {
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Error(err)
		return 0
	}
	var n uint64
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != "zkrecipes.request.duration" {
				continue
			}
			for _, dp := range m.Data.(metricdata.Histogram[float64]).DataPoints {
				n += dp.Count
			}
		}
	}
	return n
}

// TestCollectionIncludesPendingMeasurements: measurements queued for a batch
// (fewer than flushAt, so none was flushed by a hook) are in the next
// collection, and counted once.
func TestCollectionIncludesPendingMeasurements(t *testing.T) {
	h, reader := meteredHooks(t)
	for i := 0; i < flushAt/2; i++ {
		h.Request("getData", time.Millisecond, nil)
	}
	if got := requestCount(t, reader); got != flushAt/2 {
		t.Fatalf("collected %d requests after %d hooks, want all of them", got, flushAt/2)
	}
	for i := 0; i < flushAt+3; i++ {
		h.Request("create", time.Millisecond, zk.ErrNodeExists)
	}
	if got, want := requestCount(t, reader), uint64(flushAt/2+flushAt+3); got != want {
		t.Fatalf("collected %d requests after %d hooks (cumulative), want %d", got, want, want)
	}
}

// TestCollectionIncludesMeasurementsOfConcurrentHooks: while hooks run on
// several goroutines (filling and flushing batches), every collection
// includes at least the measurements whose hooks had returned before it
// began, and the last one all of them.
func TestCollectionIncludesMeasurementsOfConcurrentHooks(t *testing.T) {
	h, reader := meteredHooks(t)
	const goroutines, each = 8, 5000
	var returned atomic.Int64
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				h.Request("getData", time.Millisecond, nil)
				returned.Add(1)
			}
		}()
	}
	collected := make(chan error, 1)
	go func() {
		defer close(collected)
		for {
			select {
			case <-stop:
				return
			default:
			}
			before := uint64(returned.Load())
			if got := requestCount(t, reader); got < before {
				collected <- fmt.Errorf("collected %d requests, but %d hooks had returned before the collection began", got, before)
				return
			}
		}
	}()
	wg.Wait()
	close(stop)
	if err := <-collected; err != nil {
		t.Fatal(err)
	}
	if got := requestCount(t, reader); got != goroutines*each {
		t.Fatalf("collected %d requests after all %d hooks returned", got, goroutines*each)
	}
}

// TestMeasurementsFlushedWithoutCollectionCallback: with views that drop
// every gauge of the adapter, the meter never calls its collection
// callback; queued measurements still reach the meter within flushAfter.
func TestMeasurementsFlushedWithoutCollectionCallback(t *testing.T) {
	drop := func(name string) sdkmetric.View {
		return sdkmetric.NewView(sdkmetric.Instrument{Name: name}, sdkmetric.Stream{Aggregation: sdkmetric.AggregationDrop{}})
	}
	h, reader := meteredHooks(t, sdkmetric.WithView(drop("zkrecipes.session.*"), drop("zkrecipes.lease.active")))
	for i := 0; i < 10; i++ {
		h.Request("getData", time.Millisecond, nil)
	}
	zktest.Eventually(t, 10*flushAfter, func() bool { return requestCount(t, reader) == 10 },
		"the 10 requests were not collected within %v of their hooks", 10*flushAfter)
}
