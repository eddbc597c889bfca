package rwlock

import (
	"errors"
	"github.com/zkrecipes/zkrecipes/session"

	"github.com/zkrecipes/zkrecipes/recipes"
)

// Sentinel errors. Errors returned by this package wrap them with the lock's
// path; match them with errors.Is. Session and ZooKeeper sentinels
// (session.ErrLost, session.ErrSuspended, zk.ErrNoAuth, ...) stay reachable.
var (
	// ErrLocked is returned by TryLock and TryRLock when the lock cannot be
	// taken without waiting: another participant (or another lease of this
	// process, for RWMutex) holds it on a conflicting side, or, for TryRLock,
	// a writer is queued before us.
	ErrLocked = errors.New("rwlock: held by another participant")
	// ErrUpgrade is returned at once, before any node is created, by Lock
	// and TryLock of a Reentrant lock called by a goroutine that holds its
	// read lock and not its write lock: the write lock would wait for that
	// read lock for ever (Curator's InterProcessReadWriteLock blocks).
	ErrUpgrade = errors.New("rwlock: cannot upgrade: the calling goroutine holds the read lock")
	// ErrNotOwner is returned by Unlock and Downgrade of a Reentrant lock's
	// lease called from a goroutine other than the one that locked it.
	ErrNotOwner = errors.New("rwlock: released by a goroutine that does not hold it")
	// ErrClosed is returned by calls after Close and by acquires waiting
	// when Close was called; it is also the cause of leases ended by Close.
	ErrClosed = session.ErrClosed
	// ErrBadOption is returned by constructors for an invalid option, and by
	// calls given a nil context.
	ErrBadOption = errors.New("rwlock: bad option")

	// ErrReleased is the cause of a lease ended by its (last) Unlock, or by
	// Downgrade for the write lease (recipes.ErrReleased).
	ErrReleased = recipes.ErrReleased
	// ErrLockLost is the cause of a lease whose node was deleted by someone
	// else, and the error of a Downgrade whose write node is gone
	// (recipes.ErrLockLost).
	ErrLockLost = recipes.ErrLockLost
	// ErrBadPath is returned by constructors for an invalid lock path
	// (recipes.ErrBadPath; session.ErrBadPath matches too).
	ErrBadPath = recipes.ErrBadPath
	// ErrNilSession is returned by constructors given a nil session
	// (recipes.ErrNilSession).
	ErrNilSession = recipes.ErrNilSession
)
