package semaphore

import (
	"context"
	"fmt"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/internal/engine"
	"github.com/zkrecipes/zkrecipes/session"
)

// Lease is one lease of a semaphore, returned by a successful acquire. It
// tells the holder when the lease is lost: Done is closed when it ends, Err
// says why (recipes.ErrReleased; session.ErrSuspended when the connection
// was down at the lease deadline, or went down under end-at-disconnect; session.ErrLost; session.ErrClosed; recipes.ErrNodeDeleted when someone else
// deleted our node; session.ErrClosed when the semaphore was closed), and Context is
// canceled with that cause, so guarded work can simply run under it. Whenever
// a lease ends other than by Release, its node is deleted, so that a holder
// told it lost its lease never keeps a slot from others.
//
// A Lease is not tied to a goroutine: any goroutine may Release it. It is
// safe for concurrent use. A nil *Lease behaves as one that has ended with
// an error matching session.ErrBadArgument: Done is closed, Err, the cause
// of Context, Release and Commit name the nil lease, Token and Node return
// zero values.
type Lease struct {
	l    *engine.Lease
	path string
}

// Done returns a channel that is closed when the lease ends.
func (l *Lease) Done() <-chan struct{} { return l.Context().Done() }

// Err returns nil while the lease is held, then why it ended.
func (l *Lease) Err() error {
	if l == nil {
		return errNilLease()
	}
	return l.l.Err()
}

// Context returns a context canceled when the lease ends, with
// context.Cause(ctx) == Err().
func (l *Lease) Context() context.Context {
	if l == nil {
		return engine.EndedContext(errNilLease())
	}
	return l.l.Context()
}

// Token returns the fencing token: the czxid of the lease node. It grows
// across the whole ensemble from one acquire to the next; the leases of one
// AcquireN share it (their nodes are created in one transaction).
func (l *Lease) Token() int64 {
	if l == nil {
		return 0
	}
	return l.l.Token()
}

// Node returns the name of the lease node ("_c_<uuid>-lease-<seq>").
func (l *Lease) Node() string {
	if l == nil {
		return ""
	}
	return l.l.Node()
}

// Release gives the lease back: it ends the lease (Err becomes recipes.ErrReleased)
// and deletes its node within ctx; if the connection is down or ctx ends
// first, the delete is handed to the session's guaranteed-delete queue and
// Release returns nil: the node goes once the session is back, or with the
// session. Release after the lease was lost returns nil (the node is already
// being deleted). Any goroutine may call it; it is idempotent, and returns an
// error only when ZooKeeper refuses the delete (e.g. zk.ErrNoAuth).
func (l *Lease) Release(ctx context.Context) error {
	if l == nil {
		return errNilLease()
	}
	return l.l.Release(ctx)
}

// Commit runs ops in one ZooKeeper transaction behind a check that the lease's
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
// operation; recipes.ErrUnknownOutcome when the transaction was sent and its
// answer was lost (wrapping the connection error, or ctx's error or
// session.ErrClosed when the call ended while it was in flight): it may have
// committed or not, and is not sent again; ctx's error or session.ErrClosed
// when the call ended while it waited for the connection: nothing was sent,
// and the error does not match recipes.ErrUnknownOutcome.
func (l *Lease) Commit(ctx context.Context, ops ...any) ([]zk.MultiResponse, error) {
	if l == nil {
		return nil, errNilLease()
	}
	res, err := l.l.Commit(ctx, ops...)
	if err != nil {
		// Named as the semaphore, not as its leases directory, as the
		// semaphore's other errors are.
		return nil, engine.NewError("semaphore", l.path, err)
	}
	return res, nil
}

// errNilLease is the error of a nil *Lease.
func errNilLease() error { return fmt.Errorf("semaphore: %w: nil lease", session.ErrBadArgument) }
