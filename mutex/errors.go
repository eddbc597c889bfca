package mutex

import (
	"errors"

	"github.com/zkrecipes/zkrecipes/recipes"
	"github.com/zkrecipes/zkrecipes/session"
)

// Sentinel errors. Errors returned by this package wrap them with the lock's
// path; match them with errors.Is. Session and ZooKeeper sentinels
// (session.ErrLost, session.ErrSuspended, zk.ErrNoAuth, ...) stay reachable.
var (
	// ErrLocked is returned by TryLock when another participant (or, for the
	// non-reentrant kinds, another handle) holds the lock.
	ErrLocked = errors.New("mutex: held by another session")
	// ErrNotOwner is returned by Lease.Unlock of a reentrant Mutex called
	// from a goroutine other than the one that locked it, and by
	// MultiLease.Unlock of a set holding such a lease (nothing is released).
	ErrNotOwner = errors.New("mutex: released by a goroutine that does not hold it")
	// ErrClosed is returned by calls after Close and by Locks waiting when
	// Close was called; it is also the cause of leases ended by Close. It is
	// session.ErrClosed: one sentinel for "closed" across the library, whether
	// the lock or its session was closed.
	ErrClosed = session.ErrClosed
	// ErrBadOption is returned by constructors for an invalid option, and by
	// calls for an invalid argument (a nil context, a nil lease); the message
	// names it.
	ErrBadOption = errors.New("mutex: bad option")
	// ErrNoLocks is returned by NewMulti without locks or with a nil one (a
	// nil Locker or a typed nil such as a (*Mutex)(nil)).
	ErrNoLocks = errors.New("mutex: multi-lock needs at least one lock, none nil")

	// ErrReleased is the cause of a lease ended by its last Unlock (the
	// engine's recipes.ErrReleased).
	ErrReleased = recipes.ErrReleased
	// ErrLockLost is the cause of a lease whose node was deleted by someone
	// else (recipes.ErrLockLost).
	ErrLockLost = recipes.ErrLockLost
	// ErrBadPath is returned by constructors for an invalid lock path
	// (recipes.ErrBadPath; session.ErrBadPath matches too).
	ErrBadPath = recipes.ErrBadPath
	// ErrNilSession is returned by constructors given a nil session
	// (recipes.ErrNilSession).
	ErrNilSession = recipes.ErrNilSession
)
