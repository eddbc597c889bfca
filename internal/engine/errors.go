package engine

import (
	"errors"
	"fmt"

	"github.com/zkrecipes/zkrecipes/internal/zksession"
	"github.com/zkrecipes/zkrecipes/recipes"
)

// The errors of the engine: the public sentinels of package recipes and
// package session under the names the engine uses, and the engine's own.
// Errors returned by this package wrap them with the recipe and path (see
// Error); go-zookeeper's sentinels (zk.ErrNoAuth, ...) stay reachable.
var (
	// ErrReleased is the cause of a lease ended by its own Release.
	ErrReleased = recipes.ErrReleased
	// ErrNodeDeleted means our node was deleted by someone else while we held
	// or waited for the recipe: the cause of such a lease, the error of such
	// an acquire.
	ErrNodeDeleted = recipes.ErrNodeDeleted
	// ErrBusy is returned by TryAcquire when the recipe is not held at once;
	// the node it created is already deleted.
	ErrBusy = recipes.ErrBusy
	// ErrNotOwner is returned by GoroutineHolds.Exit when the calling
	// goroutine does not hold the lease.
	ErrNotOwner = recipes.ErrNotOwner
	// ErrClosed is returned by calls on a closed Engine, by acquires that
	// were waiting when it was closed, and is the cause of leases Close ended.
	// It is the session's: one sentinel for "closed" across the library.
	ErrClosed = zksession.ErrClosed
	// ErrBadArgument is returned for an invalid argument or option (a nil
	// context, session or lease, a bad path); the message names it.
	ErrBadArgument = zksession.ErrBadArgument
	// ErrBadDriver is returned for an invalid Driver (a programming error of
	// a recipe package); it matches ErrBadArgument.
	ErrBadDriver = fmt.Errorf("%w: bad driver", ErrBadArgument)
	// ErrNoGoroutineID is returned by GoroutineHolds when the calling
	// goroutine's id cannot be read (an unexpected runtime stack format):
	// reentrancy keyed by goroutine would then treat every goroutine as one
	// owner.
	ErrNoGoroutineID = errors.New("cannot identify the calling goroutine")
)
