package counter

import "errors"

// Errors of this package. Match them with errors.Is; a call wraps them with
// the counter's path, e.g. `counter "/ids": outcome unknown: ...`.
var (
	// ErrUnknownOutcome means a write was sent but its answer was lost (the
	// connection dropped, the session was lost, or ctx ended while it was in
	// flight): it may or may not have been applied. The call returns the
	// value its write was conditional on; TrySet with that value applies
	// the change only if no write happened since, so retrying that way
	// never applies it twice, as long as the node is not deleted and
	// created again meanwhile (its versions then start again at 0).
	ErrUnknownOutcome = errors.New("outcome unknown")
	// ErrOverflow is returned when an Add would take the value past the
	// counter's range (64 or 32 bits); nothing is written.
	ErrOverflow = errors.New("overflow")
	// ErrBadData is returned when the counter's node holds data of another
	// length than the counter's (8 bytes for New, 4 for New32): a node some
	// other program wrote, or a counter of the other width.
	ErrBadData = errors.New("node data is not a counter of this width")
)
