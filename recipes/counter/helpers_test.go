package counter_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/recipes/counter"
	"github.com/zkrecipes/zkrecipes/session"
)

const cpath = "/counters/a"

// wait is how long a test waits for something that should happen promptly.
const wait = 30 * time.Second

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func newCounter(t testing.TB, s *session.Session, opts ...counter.Option) *counter.Counter[int64] {
	t.Helper()
	c, err := counter.New(s, cpath, opts...)
	if err != nil {
		t.Fatalf("counter.New: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// addOnce adds delta as the package documents for an at-most-once change:
// Add, and after ErrUnknownOutcome, TrySet with the Value Add returned
// (again after each ErrUnknownOutcome). It returns whether the change is
// known to be applied by this call (false: TrySet found a write since, which
// may have been this change).
func addOnce(ctx context.Context, c *counter.Counter[int64], delta int64) (known bool, err error) {
	v, err := c.Add(ctx, delta)
	for errors.Is(err, counter.ErrUnknownOutcome) {
		var ok bool
		v, ok, err = c.TrySet(ctx, v, v.Value+delta)
		if err == nil {
			return ok, nil
		}
	}
	return err == nil, err
}
