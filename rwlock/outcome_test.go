package rwlock_test

import (
	"context"
	"testing"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/internal/testkit/sessiontest"
	"github.com/zkrecipes/zkrecipes/rwlock"
	"github.com/zkrecipes/zkrecipes/session"
)

// TestCommitOutcome: a write lease's guarded write whose answer is lost
// says recipes.ErrUnknownOutcome (and the server did apply it); one made
// while the connection is down waits for it within ctx, returns ctx's
// error, and is never sent.
func TestCommitOutcome(t *testing.T) {
	sessiontest.CheckOutcomes(t, sessiontest.CommitCase("WriteLease.Commit",
		func(t *testing.T, s *session.Session) func(context.Context, ...any) ([]zk.MultiResponse, error) {
			rw, err := rwlock.New(s, lockPath)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { rw.Close() })
			w, err := rw.Lock(ctxT(t))
			if err != nil {
				t.Fatal(err)
			}
			return w.Commit
		}))
}
