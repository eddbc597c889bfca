package engine

import (
	"strconv"
	"strings"

	"github.com/zkrecipes/zkrecipes/internal/zksession"
)

// Error is the error of a call on a recipe: which recipe ("mutex",
// "leader", ...), the path as the caller gave it, and the cause. It names the
// recipe and the path once, then the cause, e.g.
//
//	mutex "/locks/billing": busy
//	leader "": bad path: empty
//
// The layers below name no package, so nothing is said twice. It unwraps to
// the cause, so errors.Is still matches the sentinels of every layer
// (recipes.ErrBusy, session.ErrLost, zk.ErrNoAuth, context.Canceled...).
type Error struct {
	// Recipe names the recipe package, e.g. "mutex".
	Recipe string
	// Path is the recipe's path as the caller gave it (without the session's
	// namespace).
	Path string
	// Err is the cause.
	Err error
}

// NewError wraps err as an *Error of recipe at path. An err that already is
// an *Error of the same recipe and path is returned as it is, so that layers
// never name the path twice. A nil err gives nil.
func NewError(recipe, path string, err error) error {
	if err == nil {
		return nil
	}
	if e := asError(err); e != nil && e.Recipe == recipe && e.Path == path {
		return err
	}
	return &Error{Recipe: recipe, Path: path, Err: err}
}

// asError is errors.As for an *Error without its allocation (errors.As
// needs the target's address, which escapes): the first *Error in err's
// tree, depth first, or nil. No error of this module has an As method.
func asError(err error) *Error {
	for err != nil {
		switch x := err.(type) {
		case *Error:
			return x
		case interface{ Unwrap() error }:
			err = x.Unwrap()
		case interface{ Unwrap() []error }:
			for _, inner := range x.Unwrap() {
				if e := asError(inner); e != nil {
					return e
				}
			}
			return nil
		default:
			return nil
		}
	}
	return nil
}

// Within returns err without its own *Error of recipe at path, for a reason
// that goes after another of the same recipe and path:
// NewError(recipe, path, fmt.Errorf("%w: %w", ErrNotHeld, Within(recipe, path, cause)))
// reads `leader "/election": lease no longer holds: released`, the recipe
// and the path named once and first. errors.Is still finds every sentinel
// of the cause.
func Within(recipe, path string, err error) error {
	if e, ok := err.(*Error); ok && e.Recipe == recipe && e.Path == path {
		return e.Err
	}
	return err
}

// Error returns `<recipe> "<path>": <cause>`.
func (e *Error) Error() string {
	return e.Recipe + " " + strconv.Quote(e.Path) + ": " + e.reason(e.Err)
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// reason returns the text of err without what this error says already: an
// inner *Error of the same recipe is unwrapped (a semaphore's error names the
// semaphore, not its locks/ directory), one of another recipe is kept whole,
// and a prefix "<recipe>: " is dropped.
func (e *Error) reason(err error) string {
	if err == nil {
		return "<nil>"
	}
	if inner, ok := err.(*Error); ok && inner.Recipe == e.Recipe {
		return e.reason(inner.Err)
	}
	if pe, ok := err.(*zksession.PathError); ok && pe.Path == e.Path {
		return "bad path: " + pe.Reason // the path is named once, by e
	}
	msg := err.Error()
	pkg, _, _ := strings.Cut(e.Recipe, " ") // "semaphore count": "semaphore"
	for _, p := range [...]string{e.Recipe + ": ", pkg + ": "} {
		msg = strings.TrimPrefix(msg, p)
	}
	return msg
}

// Closed returns the cause for a recipe's own Close: it reads "closed" and
// matches ErrClosed (session.ErrClosed), so that one sentinel covers a closed
// recipe and a closed session while the message says which.
func Closed() error { return errClosed }

// errClosed is the cause of calls on a closed recipe, and of leases its
// Close ended. It matches ErrClosed (session.ErrClosed): one sentinel for
// "closed", whichever was closed, the recipe or its session.
var errClosed error = closedError{}

type closedError struct{}

func (closedError) Error() string        { return "closed" }
func (closedError) Is(target error) bool { return target == zksession.ErrClosed }
