package group

import "errors"

// Errors of this package; match them with errors.Is. The errors of the
// layers below (session.ErrClosed, session.ErrBadArgument, zk.ErrNoAuth, ...)
// stay reachable through wrapping.
var (
	// ErrNotStarted is returned by Wait before Start.
	ErrNotStarted = errors.New("group: not started")
	// ErrStarted is returned by a second Start.
	ErrStarted = errors.New("group: already started")
)
