package leader

import "errors"

// Errors of this package; match them with errors.Is. The errors of the
// layers below (session.ErrSuspended, session.ErrLost, session.ErrClosed,
// recipes.ErrNodeDeleted, zk.ErrNoAuth, ...) stay reachable through wrapping.
var (
	// ErrNotStarted is returned by Latch.Await and Selector.Requeue before
	// Start.
	ErrNotStarted = errors.New("leader: not started")
	// ErrStarted is returned by a second Start.
	ErrStarted = errors.New("leader: already started")
	// ErrPanicked matches the error that Run's work or a Selector's callback
	// is turned into when it panics: the package recovers the panic, logs it
	// with its stack at error level, and treats it as work that returned this
	// error. The error's text carries the panic value; when the value is an
	// error, errors.Is and errors.As reach it too. It is also the cause of
	// the term, when the panic came while it lasted.
	ErrPanicked = errors.New("leader: work panicked")
)
