package zkotel

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/zkrecipes/zkrecipes/recipes"
	"github.com/zkrecipes/zkrecipes/session"
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

// TestCollectionIncludesPendingMeasurements: measurements queued for a batch
// (fewer than flushAt, so none was flushed by a hook) are in the next
// collection, and counted once.
func TestCollectionIncludesPendingMeasurements(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer func() { _ = mp.Shutdown(context.Background()) }()
	h, err := Hooks(WithMeterProvider(mp))
	if err != nil {
		t.Fatal(err)
	}
	count := func() uint64 {
		var rm metricdata.ResourceMetrics
		if err := reader.Collect(context.Background(), &rm); err != nil {
			t.Fatal(err)
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
	for i := 0; i < flushAt/2; i++ {
		h.Request("getData", time.Millisecond, nil)
	}
	if got := count(); got != flushAt/2 {
		t.Fatalf("collected %d requests after %d hooks, want all of them", got, flushAt/2)
	}
	for i := 0; i < flushAt+3; i++ {
		h.Request("create", time.Millisecond, zk.ErrNodeExists)
	}
	if got, want := count(), uint64(flushAt/2+flushAt+3); got != want {
		t.Fatalf("collected %d requests after %d hooks (cumulative), want %d", got, want, want)
	}
}
