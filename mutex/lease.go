package mutex

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/zkrecipes/zkrecipes/internal/goid"
	"github.com/zkrecipes/zkrecipes/recipes"
)

// Lease is the handle returned by a successful Lock or TryLock. It tells the
// holder when the lock is lost: Done is closed when ownership ends, Err says
// why, and Context is canceled with that cause, so guarded work can simply
// run under it. Token is a fencing token for the resource the lock guards.
//
// Err matches one of: ErrReleased (Unlock); session.ErrSuspended under the
// standard loss policy (the connection went down; the session, and our node,
// may still be alive); session.ErrLost (the session is gone: expired,
// replaced or declared lost by the local timer; its node goes with it);
// session.ErrClosed (the session was closed); ErrLockLost (someone else
// deleted our node); ErrClosed (the lock was closed). Err is kept up to
// date: a lease that ended at a suspension matches session.ErrLost too (as
// well as session.ErrSuspended) once its session is known lost. The cause of
// Context is the first reason and does not change.
//
// For a reentrant Mutex, each Lock returns its own handle, and the handles of
// one goroutine's nested holds share one lock node (and Done, Err, Context,
// Token): the lock is released at the last Unlock. A Lease is safe for
// concurrent use.
//
// A nil *Lease behaves as a lease that has ended: Done is closed, Err, the
// cause of Context and Unlock's error match ErrBadOption (naming the nil
// lease), and the other methods return zero values.
type Lease struct {
	l     *recipes.Lease
	path  string
	re    *recipes.GoroutineHolds // Reentrant: Unlock must come from owner
	owner uint64

	unlocked atomic.Bool
	once     sync.Once
	err      error
}

// Done returns a channel that is closed when ownership of the lock ends.
func (l *Lease) Done() <-chan struct{} { return l.Context().Done() }

// Err returns nil while the lock is held, then why ownership ended (see
// Lease): the up-to-date reason.
func (l *Lease) Err() error {
	if l == nil {
		return errNilLease()
	}
	return l.l.Err()
}

// Context returns a context canceled when ownership ends. Its cause is the
// first reason ownership ended; Err may later say more (session.ErrLost
// after session.ErrSuspended).
func (l *Lease) Context() context.Context {
	if l == nil {
		return endedContext(errNilLease())
	}
	return l.l.Context()
}

// errNilLease is the error of a nil *Lease.
func errNilLease() error { return fmt.Errorf("%w: nil lease", ErrBadOption) }

// endedContext returns a context that is already canceled with cause.
func endedContext(cause error) context.Context {
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(cause)
	return ctx
}

// Token returns the fencing token: the czxid of the lock node. Tokens of
// successive holders grow, across the whole ensemble, so a resource that
// remembers the highest token it has seen can refuse a stale holder.
func (l *Lease) Token() int64 {
	if l == nil {
		return 0
	}
	return l.l.Token()
}

// Path returns the full server path of the lock node.
func (l *Lease) Path() string {
	if l == nil {
		return ""
	}
	return l.l.Path()
}

// Node returns the name of the lock node.
func (l *Lease) Node() string {
	if l == nil {
		return ""
	}
	return l.l.Node()
}

// SessionID returns the ZooKeeper session id that owns the lock node.
func (l *Lease) SessionID() int64 {
	if l == nil {
		return 0
	}
	return l.l.Epoch().SessionID()
}

// ID returns the participant id stored in the lock node.
func (l *Lease) ID() string {
	if l == nil {
		return ""
	}
	return l.l.ID()
}

// Unlock gives up this hold. For a reentrant Mutex it must be called by the
// goroutine that locked (else ErrNotOwner and nothing changes), and the lock
// node is deleted at the goroutine's last Unlock. For the other kinds any
// goroutine may call it. The node is deleted within ctx, or handed to the
// session's guaranteed-delete queue if the connection is down or ctx ends, so
// it never stays behind. Unlock after the lease was lost returns nil (the
// engine already removed the node). Idempotent per handle. A nil ctx is taken
// as context.Background(): a release is cleanup and is never refused.
func (l *Lease) Unlock(ctx context.Context) error {
	if l == nil {
		return errNilLease()
	}
	if l.re != nil {
		if err := l.checkOwner(); err != nil {
			return err
		}
		if !l.unlocked.CompareAndSwap(false, true) {
			return nil
		}
		last, err := l.re.Exit(l.l)
		if err != nil {
			return recipes.NewError("mutex", l.path, ErrNotOwner)
		}
		if !last {
			return nil
		}
	}
	l.once.Do(func() { l.err = l.l.Release(ctx) })
	return l.err
}

// checkOwner returns ErrNotOwner (wrapped) if this is a reentrant Mutex's
// handle and the calling goroutine is not the one that locked it.
func (l *Lease) checkOwner() error {
	if l.re != nil && goid.ID() != l.owner {
		return recipes.NewError("mutex", l.path, ErrNotOwner)
	}
	return nil
}
