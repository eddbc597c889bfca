package leader_test

import (
	"context"
	"testing"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/internal/testkit/sessiontest"
	"github.com/zkrecipes/zkrecipes/leader"
	"github.com/zkrecipes/zkrecipes/session"
)

// TestCommitOutcome: a term's guarded write whose answer is lost says
// recipes.ErrUnknownOutcome (and the server did apply it); one made while
// the connection is down waits for it within ctx, returns ctx's error, and
// is never sent.
func TestCommitOutcome(t *testing.T) {
	sessiontest.CheckOutcomes(t, sessiontest.CommitCase("Term.Commit",
		func(t *testing.T, s *session.Session) func(context.Context, ...any) ([]zk.MultiResponse, error) {
			l, err := leader.NewLatch(s, "/lead")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { l.Close() })
			if err := l.Start(); err != nil {
				t.Fatal(err)
			}
			term, err := l.Await(ctxT(t))
			if err != nil {
				t.Fatal(err)
			}
			return term.Commit
		}))
}
