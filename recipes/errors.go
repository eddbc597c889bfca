package recipes

import (
	"errors"

	"github.com/zkrecipes/zkrecipes/internal/zksession"
)

// Errors every recipe returns. Match them with errors.Is: a recipe wraps them
// with its name and path, e.g. `mutex "/locks/billing": busy`.
var (
	// ErrBusy is returned by the try-acquires (mutex TryLock, rwlock TryLock
	// and TryRLock, semaphore TryAcquire) when acquiring would have to wait:
	// the lock is held, or every lease is taken; the node the call created is
	// deleted before it returns. A counter's Add, Increment and Decrement
	// (package recipes/counter) return it too, when they lost every race
	// their WithRetry BackOff allowed and have no WithPromotion lock to go
	// on under; nothing was written.
	ErrBusy = errors.New("busy")
	// ErrReleased is the cause of a lease ended by its own Release, and of a
	// leader's term ended by Resign or by its work returning.
	ErrReleased = errors.New("released")
	// ErrNodeDeleted means the node of a lease, a term or a waiting acquire
	// was deleted by someone else (an operator, a cleanup script): it is the
	// cause of such a lease or term, and the error of such an acquire.
	ErrNodeDeleted = errors.New("node deleted by someone else")
	// ErrNotHeld is the error of a guarded write (a lease's Commit) when
	// the lease no longer holds: it had ended, or the server found its node
	// gone. Nothing was committed.
	ErrNotHeld = errors.New("lease no longer holds")
	// ErrUnknownOutcome means a write was sent and its answer was lost: it
	// may or may not have applied. Every call that writes returns an error
	// matching it in that case, with the connection error or ctx's error
	// (or session.ErrClosed) that cut the answer off: a lease's or a term's
	// guarded write (Commit), a counter's changes (recipes/counter: its
	// ErrUnknownOutcome is this same value), a node's or a member's SetData
	// (recipes/group), a barrier's Set and Remove, a shared count's Set and
	// TrySet (semaphore), a service registration's Update
	// (recipes/discovery). A write that was never sent (the connection was
	// down and ctx ended while the call waited for it, or the session was
	// closed) does not match it: it fails with ctx's error,
	// session.ErrClosed, or what ended the wait (recipes.ErrNotHeld for a
	// lease that ended). A group node's SetData and a registration's Update
	// keep their data and write it once the connection is back, whatever
	// ctx did. Match this name: errors.Is(err, recipes.ErrUnknownOutcome).
	ErrUnknownOutcome = zksession.ErrUnknownOutcome
	// ErrNotOwner is returned when a reentrant lease is released from a
	// goroutine other than the one that acquired it; nothing is released.
	ErrNotOwner = errors.New("released by a goroutine that does not hold it")
)
