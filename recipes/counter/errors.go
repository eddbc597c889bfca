package counter

import (
	"errors"

	"github.com/zkrecipes/zkrecipes/recipes"
)

// Errors of this package. Match them with errors.Is; a call wraps them with
// the counter's path, e.g. `counter "/ids": outcome unknown: ...`.
var (
	// ErrUnknownOutcome is recipes.ErrUnknownOutcome, the same value under
	// this package's name (match either; recipes.ErrUnknownOutcome is the
	// name every recipe that writes shares): a write was sent but its
	// answer was lost (the connection dropped, the session was lost, or ctx
	// ended or Close came while it was in flight), and it may or may not
	// have been applied. A write never sent (ctx ended while the call
	// waited for the connection) does not match it. The call returns the
	// value its write was conditional on; TrySet with that value applies
	// the change only if no write happened since, so retrying that way
	// never applies it twice, as long as the node is not deleted and
	// created again meanwhile (its versions then start again at 0).
	ErrUnknownOutcome = recipes.ErrUnknownOutcome
	// ErrOverflow is returned when an Add would take the value past the
	// counter's range (64 or 32 bits); nothing is written.
	ErrOverflow = errors.New("overflow")
	// ErrBadData is returned when the counter's node holds data of another
	// length than the counter's (8 bytes for New, 4 for New32): a node some
	// other program wrote, or a counter of the other width.
	ErrBadData = errors.New("node data is not a counter of this width")
)
