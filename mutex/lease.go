package mutex

import (
	"context"

	"fmt"
	"github.com/go-zookeeper/zk"
	"sync/atomic"

	"github.com/zkrecipes/zkrecipes/internal/engine"
	"github.com/zkrecipes/zkrecipes/internal/goid"
	"github.com/zkrecipes/zkrecipes/recipes"
	"github.com/zkrecipes/zkrecipes/session"
)

// Lease is a held lock, returned by Lock and TryLock. It tells the holder
// when the lock is lost: Done is closed when ownership ends, Err says why,
// and Context is canceled with that cause, so guarded work can simply run
// under it. Token is a fencing token for the resource the lock guards.
//
// Err matches one of: recipes.ErrReleased (Release); session.ErrSuspended
// (the connection was still down at the lease deadline under the standard
// loss policy, or went down under end-at-disconnect; the session, and the
// lock node, may still be alive); session.ErrLost (the session is gone,
// and its node with it); session.ErrClosed (the Mutex or the session was
// closed); recipes.ErrNodeDeleted (someone else deleted the node). Err is
// kept up to date: a lease that ended at a suspension also matches
// session.ErrLost once its session is known lost. The cause of Context is
// the first reason and does not change.
//
// Each Lock of a Reentrant returns its own Lease; the leases of one
// goroutine's nested holds share one node (and Done, Err, Context, Token),
// which goes at the last Release. A Lease is safe for concurrent use. A nil
// *Lease behaves as one that has ended with an error matching
// session.ErrBadArgument.
type Lease struct {
	l     *engine.Lease
	re    *engine.GoroutineHolds // Reentrant: Release must come from owner
	owner uint64

	released atomic.Bool
}

// Done returns a channel that is closed when ownership of the lock ends.
func (l *Lease) Done() <-chan struct{} { return l.Context().Done() }

// Err returns nil while the lock is held, then why ownership ended (see
// Lease).
func (l *Lease) Err() error {
	if l == nil {
		return errNilLease()
	}
	return l.l.Err()
}

// Context returns a context canceled when ownership ends, with the first
// reason as its cause.
func (l *Lease) Context() context.Context {
	if l == nil {
		return engine.EndedContext(errNilLease())
	}
	return l.l.Context()
}

// Token returns the fencing token: the czxid of the lock node. Tokens of
// successive holders grow across the whole ensemble, so a resource that
// remembers the highest token it has seen can refuse a stale holder.
func (l *Lease) Token() int64 {
	if l == nil {
		return 0
	}
	return l.l.Token()
}

// Node returns the name of the lock node, e.g. "_c_<uuid>-lock-0000000007"
// (for a non-fair lock, "lock").
func (l *Lease) Node() string {
	if l == nil {
		return ""
	}
	return l.l.Node()
}

// Release gives the lock up, or for a Reentrant this one hold: it must then
// come from the goroutine that locked (else recipes.ErrNotOwner, and nothing
// changes), and the node goes at the goroutine's last Release. Any goroutine
// may release the other kinds. The node is deleted within ctx, or handed to
// the session's guaranteed-delete queue if the connection is down or ctx
// ends, so it never stays behind. After the lease was lost Release returns
// nil (the node is gone or going). Idempotent per Lease. A nil ctx is taken
// as context.Background(): a release is cleanup and is never refused. It
// returns an error only when ZooKeeper refuses the delete (zk.ErrNoAuth).
func (l *Lease) Release(ctx context.Context) error {
	if l == nil {
		return errNilLease()
	}
	if l.re != nil {
		if err := l.checkOwner(); err != nil {
			return err
		}
		if !l.released.CompareAndSwap(false, true) {
			return nil
		}
		last, err := l.re.Exit(l.l)
		if err != nil {
			return engine.NewError("mutex", l.l.RecipePath(), recipes.ErrNotOwner)
		}
		if !last {
			return nil
		}
	}
	return l.l.Release(ctx) // idempotent: every call returns the first one's result
}

// checkOwner returns recipes.ErrNotOwner (wrapped) if this is a Reentrant's
// lease and the calling goroutine is not the one that locked it.
func (l *Lease) checkOwner() error {
	if l.re != nil && goid.ID() != l.owner {
		return engine.NewError("mutex", l.l.RecipePath(), recipes.ErrNotOwner)
	}
	return nil
}

// Commit runs ops in one ZooKeeper transaction behind a check that the lock's
// node still exists: the writes commit only while the lease holds, whatever
// this process believes (a holder whose session expired while it was cut off
// cannot overwrite its successor's work). ops are go-zookeeper's
// *zk.CreateRequest, *zk.SetDataRequest, *zk.DeleteRequest and
// *zk.CheckVersionRequest with recipe paths (under the session's namespace); a
// create without an ACL gets the session's. It returns their responses.
//
// While the connection is down, Commit waits within ctx for it to be back
// before it sends anything; the transaction is sent once.
//
// Errors: recipes.ErrNotHeld when the lease has ended or the server found its
// node gone (nothing committed; also when the lease ends while Commit waits
// for the connection); the error of the first operation ZooKeeper refused
// (zk.ErrBadVersion, ...; nothing committed); session.ErrBadArgument for a bad
// operation (and for a NonFair lease, whose node name every holder shares);
// recipes.ErrUnknownOutcome when the transaction was sent and its answer was
// lost (wrapping the connection error, or ctx's error or session.ErrClosed
// when the call ended while it was in flight): it may have committed or not,
// and is not sent again; ctx's error or session.ErrClosed when the call ended
// while it waited for the connection: nothing was sent, and the error does not
// match recipes.ErrUnknownOutcome.
func (l *Lease) Commit(ctx context.Context, ops ...any) ([]zk.MultiResponse, error) {
	if l == nil {
		return nil, errNilLease()
	}
	return l.l.Commit(ctx, ops...)
}

// errNilLease is the error of a nil *Lease.
func errNilLease() error { return fmt.Errorf("mutex: %w: nil lease", session.ErrBadArgument) }
