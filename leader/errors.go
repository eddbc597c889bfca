package leader

import (
	"errors"

	"github.com/zkrecipes/zkrecipes/session"
)

// Sentinel errors. Callers match them with errors.Is. Errors returned by this
// package wrap them together with the election path; errors of the layers
// below (session.ErrSuspended, session.ErrLost, session.ErrClosed,
// recipes.ErrLockLost, zk.ErrNoAuth, ...) stay reachable through wrapping.
var (
	// ErrClosed is returned by calls made after Close, and is the cause of a
	// term ended by Close. It is session.ErrClosed: one sentinel for "closed"
	// across the library, whether the participant or its session was closed.
	ErrClosed = session.ErrClosed
	// ErrNotStarted is returned by Latch.Await and Selector.Requeue before Start.
	ErrNotStarted = errors.New("leader: not started")
	// ErrStarted is returned by a second Start.
	ErrStarted = errors.New("leader: already started")
	// ErrResigned is the cause of a term that ended because its holder gave it
	// up: a Selector callback or Run's work returned, or Resign was called
	// (Term.Resign, Latch.Resign, Selector.Resign).
	ErrResigned = errors.New("leader: leadership given up")
	// ErrPanicked matches the error that Run's work or a Selector's callback
	// is turned into when it panics: the package recovers the panic, logs it
	// with its stack at error level, and treats it as work that returned this
	// error. The error's text carries the panic value; when the value is an
	// error, errors.Is and errors.As reach it too. It is also the cause of
	// the term, when the panic came while it lasted.
	ErrPanicked = errors.New("leader: work panicked")
	// ErrBadOption is returned by constructors for an invalid option value or
	// an option that does not apply to the type being built.
	ErrBadOption = errors.New("leader: bad option")
	// ErrBadArgument is returned for a nil context, a nil session or a nil
	// callback, before anything is started; the message names the argument.
	// It is also the cause of a nil *Term.
	ErrBadArgument = errors.New("leader: bad argument")
)
