package counter_test

import (
	"context"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/internal/testkit/sessiontest"
	"github.com/zkrecipes/zkrecipes/session"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// TestWriteOutcome: an increment whose answer is lost says
// recipes.ErrUnknownOutcome (and the server did apply it); one made while
// the connection is down waits for it within ctx, returns ctx's error, and
// sends nothing.
func TestWriteOutcome(t *testing.T) {
	sessiontest.CheckOutcomes(t, sessiontest.OutcomeCase{
		Name: "Increment",
		Setup: func(t *testing.T, ns *zktest.Namespace) sessiontest.OutcomeWrite {
			s, p := sessiontest.ConnectProxy(t, ns, session.WithSessionTimeout(10*time.Second))
			c := newCounter(t, s)
			if _, err := c.Add(ctxT(t), 10); err != nil {
				t.Fatal(err)
			}
			check := newCounter(t, sessiontest.Connect(t, ns)) // not through the proxy
			full := ns.Path(cpath)
			return sessiontest.OutcomeWrite{
				Session: s,
				Proxy:   p,
				Request: func(r zktest.Request) bool { return zktest.OpName(r.Op) == "setData" && r.Path == full },
				Call: func(ctx context.Context) error {
					_, err := c.Increment(ctx)
					return err
				},
				Applied: func(t *testing.T) bool {
					v, err := check.Get(ctxT(t))
					if err != nil {
						t.Fatal(err)
					}
					return v.Value == 11
				},
			}
		},
	})
}
