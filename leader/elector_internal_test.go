package leader

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/internal/engine"
	"github.com/zkrecipes/zkrecipes/internal/zksession"
	"github.com/zkrecipes/zkrecipes/recipes"
	"github.com/zkrecipes/zkrecipes/session"
)

// Which campaign errors stop the election (fatal) and which make the
// participant enter it again.
func TestFatal(t *testing.T) {
	wrap := func(err error) error { return fmt.Errorf("leader /app/election: %w", err) }
	for _, tc := range []struct {
		err   error
		fatal bool
	}{
		{zk.ErrNoAuth, true},
		{wrap(zk.ErrNoAuth), true},
		{wrap(zk.ErrAuthFailed), true},
		{wrap(zk.ErrBadArguments), true},
		{wrap(zk.ErrInvalidACL), true},
		{wrap(zk.ErrInvalidFlags), true},
		{wrap(zk.ErrInvalidPath), true},
		{wrap(zk.ErrNoChildrenForEphemerals), true},
		{wrap(zk.ErrShortBuffer), true},
		{wrap(engine.ErrBadDriver), true},
		{wrap(session.ErrBadArgument), true},
		{wrap(session.ErrBadArgument), true},
		{wrap(session.ErrBadArgument), true},
		{wrap(session.ErrClosed), true},
		{wrap(session.ErrClosed), true},
		{wrap(errors.Join(session.ErrLost, zk.ErrNoAuth)), true},

		{wrap(session.ErrSuspended), false},
		{wrap(session.ErrLost), false},
		{wrap(zksession.ErrSessionChanged), false},
		{wrap(zk.ErrConnectionClosed), false},
		{wrap(zk.ErrNoServer), false},
		{wrap(zk.ErrSessionExpired), false},
		{wrap(zk.ErrNoNode), false},
		{wrap(zk.ErrNodeExists), false},
		{wrap(recipes.ErrNodeDeleted), false},
		{wrap(context.DeadlineExceeded), false},
		{errors.New("something transient"), false},
	} {
		if got := fatal(tc.err); got != tc.fatal {
			t.Errorf("fatal(%v) = %v, want %v", tc.err, got, tc.fatal)
		}
	}
}
