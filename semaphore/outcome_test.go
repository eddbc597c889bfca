package semaphore_test

import (
	"context"
	"encoding/binary"
	"testing"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/internal/testkit/sessiontest"
	"github.com/zkrecipes/zkrecipes/semaphore"
	"github.com/zkrecipes/zkrecipes/session"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// TestWriteOutcome: a lease's guarded write and a shared count's Set and
// TrySet whose answer is lost say recipes.ErrUnknownOutcome (and the server
// did apply the write); made while the connection is down, they wait for it
// within ctx, return ctx's error, and send nothing.
func TestWriteOutcome(t *testing.T) {
	const countPath = "/counts/outcome"
	count := func(set func(ctx context.Context, c *semaphore.SharedCount, prev semaphore.CountValue) error) func(*testing.T, *zktest.Namespace) sessiontest.OutcomeWrite {
		return func(t *testing.T, ns *zktest.Namespace) sessiontest.OutcomeWrite {
			s, p := sessiontest.ConnectProxy(t, ns)
			c, err := semaphore.NewSharedCount(s, countPath, 1)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Close() })
			prev, err := c.Get(ctxT(t)) // creates the node with the seed
			if err != nil {
				t.Fatal(err)
			}
			raw := ns.Conn(t)
			full := ns.Path(countPath)
			return sessiontest.OutcomeWrite{
				Session: s,
				Proxy:   p,
				Request: func(r zktest.Request) bool { return zktest.OpName(r.Op) == "setData" && r.Path == full },
				Call:    func(ctx context.Context) error { return set(ctx, c, prev) },
				Applied: func(t *testing.T) bool {
					b, _, err := raw.Get(full)
					if err != nil {
						t.Fatal(err)
					}
					return len(b) == 4 && binary.BigEndian.Uint32(b) == 7
				},
			}
		}
	}
	sessiontest.CheckOutcomes(t,
		sessiontest.CommitCase("Lease.Commit",
			func(t *testing.T, s *session.Session) func(context.Context, ...any) ([]zk.MultiResponse, error) {
				sem, err := semaphore.New(s, "/sem", 2)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { sem.Close() })
				l, err := sem.Acquire(ctxT(t))
				if err != nil {
					t.Fatal(err)
				}
				return l.Commit
			}),
		sessiontest.OutcomeCase{Name: "SharedCount.Set", Setup: count(
			func(ctx context.Context, c *semaphore.SharedCount, _ semaphore.CountValue) error {
				_, err := c.Set(ctx, 7)
				return err
			})},
		sessiontest.OutcomeCase{Name: "SharedCount.TrySet", Setup: count(
			func(ctx context.Context, c *semaphore.SharedCount, prev semaphore.CountValue) error {
				_, _, err := c.TrySet(ctx, prev, 7)
				return err
			})},
	)
}
