package group

import (
	"errors"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/internal/zksession"
	"github.com/zkrecipes/zkrecipes/session"
)

// Errors of this package; match them with errors.Is. The errors of the
// layers below (session.ErrClosed, session.ErrBadArgument, zk.ErrNoAuth, ...)
// stay reachable through wrapping.
var (
	// ErrNotStarted is returned by Wait before Start.
	ErrNotStarted = errors.New("group: not started")
	// ErrStarted is returned by a second Start.
	ErrStarted = errors.New("group: already started")
)

// permanent reports whether err is one that creating the node again cannot
// cure: ZooKeeper refuses this session or the request for good.
func permanent(err error) bool {
	for _, p := range [...]error{
		zk.ErrNoAuth,
		zk.ErrAuthFailed,
		zk.ErrBadArguments,
		zk.ErrInvalidACL,
		zk.ErrInvalidFlags,
		zk.ErrInvalidPath,
		zk.ErrNoChildrenForEphemerals,
		zk.ErrShortBuffer,
		session.ErrBadArgument,
		zksession.ErrBadEpoch,
	} {
		if errors.Is(err, p) {
			return true
		}
	}
	return false
}
