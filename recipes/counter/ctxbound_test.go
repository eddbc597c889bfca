package counter_test

import (
	"context"
	"testing"

	"github.com/zkrecipes/zkrecipes/internal/testkit/sessiontest"
	"github.com/zkrecipes/zkrecipes/recipes/counter"
	"github.com/zkrecipes/zkrecipes/session"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// Every call of a counter returns within its ctx plus a few milliseconds
// while the proxy is partitioned (the session is not even suspended
// meanwhile).
func TestCtxBoundsCounter(t *testing.T) {
	for _, tc := range []struct {
		name string
		call func(ctx context.Context, c *counter.Counter[int64]) error
	}{
		{"Get", func(ctx context.Context, c *counter.Counter[int64]) error { _, err := c.Get(ctx); return err }},
		{"Add", func(ctx context.Context, c *counter.Counter[int64]) error { _, err := c.Add(ctx, 2); return err }},
		{"CompareAndSet", func(ctx context.Context, c *counter.Counter[int64]) error {
			_, _, err := c.CompareAndSet(ctx, 1, 2)
			return err
		}},
		{"TrySet", func(ctx context.Context, c *counter.Counter[int64]) error {
			_, _, err := c.TrySet(ctx, counter.Value[int64]{Value: 1, Version: 0}, 2)
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := zktest.NewNamespace(t)
			ctx := ctxT(t)
			s, p := sessiontest.ConnectProxy(t, ns, session.WithSessionTimeout(sessiontest.BoundSession))
			c := newCounter(t, s)
			if _, err := c.Increment(ctx); err != nil {
				t.Fatal(err)
			}
			p.Partition()
			sessiontest.MeasureBound(t, "counter."+tc.name, p.Heal, func(ctx context.Context) error {
				return tc.call(ctx, c)
			}, sessiontest.IsDeadline)
			p.Heal()
		})
	}
}
