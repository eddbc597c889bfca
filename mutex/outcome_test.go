package mutex_test

import (
	"context"
	"testing"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/internal/testkit/sessiontest"
	"github.com/zkrecipes/zkrecipes/mutex"
	"github.com/zkrecipes/zkrecipes/session"
)

// TestCommitOutcome: a guarded write whose answer is lost says
// recipes.ErrUnknownOutcome (and the server did apply it); one made while
// the connection is down waits for it within ctx, returns ctx's error, and
// is never sent.
func TestCommitOutcome(t *testing.T) {
	sessiontest.CheckOutcomes(t, sessiontest.CommitCase("Lease.Commit",
		func(t *testing.T, s *session.Session) func(context.Context, ...any) ([]zk.MultiResponse, error) {
			m, err := mutex.New(s, lockPath)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { m.Close() })
			l, err := m.Lock(ctxT(t))
			if err != nil {
				t.Fatal(err)
			}
			return l.Commit
		}))
}
