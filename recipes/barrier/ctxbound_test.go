package barrier_test

import (
	"context"
	"testing"

	"github.com/zkrecipes/zkrecipes/internal/testkit/sessiontest"
	"github.com/zkrecipes/zkrecipes/recipes/barrier"
	"github.com/zkrecipes/zkrecipes/session"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// Every blocking call of both barriers returns within its ctx plus a few
// milliseconds while the proxy is partitioned (the session is not even
// suspended meanwhile), and no member node of ours is left once the
// partition heals.
func TestCtxBoundsBarrier(t *testing.T) {
	for _, tc := range []struct {
		name string
		call func(ctx context.Context, b *barrier.Barrier, d *barrier.DoubleBarrier) error
	}{
		{"Set", func(ctx context.Context, b *barrier.Barrier, _ *barrier.DoubleBarrier) error { return b.Set(ctx) }},
		{"Remove", func(ctx context.Context, b *barrier.Barrier, _ *barrier.DoubleBarrier) error { return b.Remove(ctx) }},
		{"Wait", func(ctx context.Context, b *barrier.Barrier, _ *barrier.DoubleBarrier) error { return b.Wait(ctx) }},
		{"Enter", func(ctx context.Context, _ *barrier.Barrier, d *barrier.DoubleBarrier) error { return d.Enter(ctx) }},
		{"Leave", func(ctx context.Context, _ *barrier.Barrier, d *barrier.DoubleBarrier) error { return d.Leave(ctx) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := zktest.NewNamespace(t)
			raw := ns.Conn(t)
			ctx := ctxT(t)
			s, p := sessiontest.ConnectProxy(t, ns, session.WithSessionTimeout(sessiontest.BoundSession))
			rec := sessiontest.Record(t, s)
			b, err := barrier.New(s, bpath)
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			d := newDouble(t, s, 2)
			// Another member, so that Leave has someone to wait for.
			other := newDouble(t, sessiontest.Connect(t, ns), 2)
			if tc.name == "Leave" {
				entered := async(func() error { return d.Enter(ctx) })
				if err := other.Enter(ctx); err != nil {
					t.Fatal(err)
				}
				if err := sessiontest.Recv(t, entered, wait, "Enter"); err != nil {
					t.Fatal(err)
				}
			}
			if tc.name == "Wait" {
				if err := b.Set(ctx); err != nil {
					t.Fatal(err)
				}
			}
			p.Partition()
			sessiontest.MeasureBound(t, "barrier."+tc.name, p.Heal, func(ctx context.Context) error {
				return tc.call(ctx, b, d)
			}, sessiontest.IsDeadline)
			p.Heal()
			rec.Wait(t, wait, session.Reconnected)
			if tc.name == "Enter" {
				waitMembers(t, raw, ns, 0)
			}
		})
	}
}
