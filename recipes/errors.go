package recipes

import (
	"errors"

	"github.com/zkrecipes/zkrecipes/session"
)

// Sentinel errors. Errors returned by this package wrap them with the path
// (match with errors.Is); session's and go-zookeeper's sentinels
// (session.ErrLost, zk.ErrNoAuth, ...) stay reachable through wrapping.
var (
	// ErrReleased is the cause of a lease ended by its own Release.
	ErrReleased = errors.New("recipes: released")
	// ErrLockLost means our node was deleted by someone else (an operator, a
	// cleanup script) while we held or waited for the recipe. It is the cause
	// of such a lease, and the error of such an acquire.
	ErrLockLost = errors.New("recipes: node deleted by someone else")
	// ErrWouldBlock is returned by TryAcquire when the recipe is not
	// immediately held; the node it created is already deleted.
	ErrWouldBlock = errors.New("recipes: would block")
	// ErrClosed is returned by calls on a closed Engine, by acquires that
	// were waiting when it was closed, and is the cause of leases Close ended.
	// It is session.ErrClosed: one sentinel for "closed" across the library,
	// whether the recipe or its session was closed.
	ErrClosed = session.ErrClosed
	// ErrBadPath is returned by NewEngine for an invalid recipe path. It is
	// session.ErrBadPath.
	ErrBadPath = session.ErrBadPath
	// ErrNilSession is returned by constructors given a nil *session.Session.
	ErrNilSession = errors.New("recipes: nil session")
	// ErrBadDriver is returned for a nil driver, an empty or invalid marker,
	// or an invalid StandardDriver.MaxLeases.
	ErrBadDriver = errors.New("recipes: bad driver")
	// ErrBadOption is returned for an invalid option value, and for an invalid
	// argument of a call (a nil context, a nil lease); the message names it.
	ErrBadOption = errors.New("recipes: bad option")
	// ErrNotOwner is returned by GoroutineHolds.Exit when the calling goroutine
	// does not hold the lease.
	ErrNotOwner = errors.New("recipes: released by a goroutine that does not hold it")
	// ErrNoGoroutineID is returned by GoroutineHolds when the calling goroutine's
	// id cannot be read (an unexpected runtime stack format): reentrancy
	// keyed by goroutine would then treat every goroutine as one owner.
	ErrNoGoroutineID = errors.New("recipes: cannot identify the calling goroutine")
)
