package semaphore

import (
	"errors"

	"github.com/zkrecipes/zkrecipes/recipes"
	"github.com/zkrecipes/zkrecipes/session"
)

// Sentinel errors. Errors returned by this package wrap them with the path;
// match them with errors.Is. Session and ZooKeeper sentinels (session.ErrLost,
// session.ErrSuspended, zk.ErrNoAuth, ...) stay reachable.
var (
	// ErrNoLease is returned by TryAcquire and Mutex.TryLock when no lease
	// is free, or when another acquirer is taking one at that moment (as
	// Curator's acquire with a zero wait).
	ErrNoLease = errors.New("semaphore: no lease available")
	// ErrClosed is returned by calls after Close and by acquires waiting when
	// Close was called; it is also the cause of leases ended by Close, and
	// what a SharedCount's calls return after its Close. It is
	// session.ErrClosed: one sentinel for every closed thing of the module.
	ErrClosed = session.ErrClosed
	// ErrBadOption is returned by constructors for an invalid option, and for
	// a nil context.
	ErrBadOption = errors.New("semaphore: bad option")
	// ErrBadCount is returned for a maximum or a number of leases that cannot
	// be: a fixed maximum below 1, AcquireN of fewer than 1 lease or of more
	// than a fixed maximum, a SharedCount value below 0 or above 2^31-1.
	ErrBadCount = errors.New("semaphore: bad count")
	// ErrBadData is returned when a SharedCount node holds data that is not
	// a count: Curator's SharedCount stores exactly 4 bytes.
	ErrBadData = errors.New("semaphore: shared count data is not a 4-byte count")

	// ErrReleased is the cause of a lease ended by its Release
	// (recipes.ErrReleased).
	ErrReleased = recipes.ErrReleased
	// ErrLeaseLost is the cause of a lease whose node was deleted by someone
	// else (recipes.ErrLockLost).
	ErrLeaseLost = recipes.ErrLockLost
	// ErrBadPath is returned by constructors for an invalid path
	// (recipes.ErrBadPath; session.ErrBadPath matches too).
	ErrBadPath = recipes.ErrBadPath
	// ErrNilSession is returned by constructors given a nil session
	// (recipes.ErrNilSession).
	ErrNilSession = recipes.ErrNilSession
)
