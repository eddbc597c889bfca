package barrier_test

import (
	"context"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/internal/testkit/sessiontest"
	"github.com/zkrecipes/zkrecipes/recipes/barrier"
	"github.com/zkrecipes/zkrecipes/session"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// TestWriteOutcome: a barrier's Set and Remove whose answer is lost say
// recipes.ErrUnknownOutcome (and the server did apply the write); made
// while the connection is down, they wait for it within ctx, return ctx's
// error, and send nothing.
func TestWriteOutcome(t *testing.T) {
	const bpath = "/barriers/outcome"
	setup := func(set bool, op string, call func(context.Context, *barrier.Barrier) error) func(*testing.T, *zktest.Namespace) sessiontest.OutcomeWrite {
		return func(t *testing.T, ns *zktest.Namespace) sessiontest.OutcomeWrite {
			s, p := sessiontest.ConnectProxy(t, ns, session.WithSessionTimeout(10*time.Second))
			b, err := barrier.New(s, bpath)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { b.Close() })
			if set {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				if err := b.Set(ctx); err != nil {
					t.Fatal(err)
				}
			}
			raw := ns.Conn(t)
			full := ns.Path(bpath)
			return sessiontest.OutcomeWrite{
				Session: s,
				Proxy:   p,
				Request: func(r zktest.Request) bool { return zktest.OpName(r.Op) == op && r.Path == full },
				Call:    func(ctx context.Context) error { return call(ctx, b) },
				Applied: func(t *testing.T) bool {
					ok, _, err := raw.Exists(full)
					if err != nil {
						t.Fatal(err)
					}
					return ok != set // Set applied: the node is there; Remove: it is gone
				},
			}
		}
	}
	sessiontest.CheckOutcomes(t,
		sessiontest.OutcomeCase{Name: "Set", Setup: setup(false, "create",
			func(ctx context.Context, b *barrier.Barrier) error { return b.Set(ctx) })},
		sessiontest.OutcomeCase{Name: "Remove", Setup: setup(true, "delete",
			func(ctx context.Context, b *barrier.Barrier) error { return b.Remove(ctx) })},
	)
}
