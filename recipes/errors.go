package recipes

import "errors"

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
	// ErrNotOwner is returned when a reentrant lease is released from a
	// goroutine other than the one that acquired it; nothing is released.
	ErrNotOwner = errors.New("released by a goroutine that does not hold it")
)
