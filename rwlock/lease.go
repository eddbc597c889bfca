package rwlock

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/internal/engine"
	"github.com/zkrecipes/zkrecipes/internal/goid"
	"github.com/zkrecipes/zkrecipes/recipes"
	"github.com/zkrecipes/zkrecipes/session"
)

// Lease is the handle of a held side of the lock, returned by RLock and
// TryRLock (read), and, inside a WriteLease, by Lock and TryLock (write). It
// tells the holder when the lock is lost: Done is closed when ownership
// ends, Err says why (recipes.ErrReleased; session.ErrSuspended when the
// connection was down at the lease deadline, or went down under
// end-at-disconnect; session.ErrLost; session.ErrClosed when the lock or
// the session was closed; recipes.ErrNodeDeleted when someone else deleted
// our node), and Context is canceled with that cause, so guarded work can
// simply run under it. Token is a fencing token.
//
// For a Reentrant lock, each acquire returns its own handle, and the handles
// of one goroutine's nested holds of one side share one node (and Done, Err,
// Context, Token): the side is released at the last Release. A Lease is safe
// for concurrent use. A nil *Lease behaves as one that has ended with an
// error matching session.ErrBadArgument: Done is closed, Err, the cause of
// Context and Release name the nil lease, Token and Node return zero values.
type Lease struct {
	l    *engine.Lease
	path string
	// A Reentrant lock's lease: Release must come from the owner goroutine,
	// and goes through the hold count in re.
	re    *engine.GoroutineHolds
	owner uint64

	released atomic.Bool
	once     sync.Once
	err      error
}

// Done returns a channel that is closed when ownership ends.
func (l *Lease) Done() <-chan struct{} { return l.Context().Done() }

// Err returns nil while the lease is held, then why ownership ended.
func (l *Lease) Err() error {
	if l == nil {
		return errNilLease()
	}
	return l.l.Err()
}

// Context returns a context canceled when ownership ends, with
// context.Cause(ctx) == Err().
func (l *Lease) Context() context.Context {
	if l == nil {
		return engine.EndedContext(errNilLease())
	}
	return l.l.Context()
}

// Token returns the fencing token: the czxid of our node. Tokens grow across
// the whole ensemble: a write lease's token is larger than that of every
// write lease before it, so a resource that remembers the highest token it
// has seen can refuse a stale writer.
func (l *Lease) Token() int64 {
	if l == nil {
		return 0
	}
	return l.l.Token()
}

// Node returns the name of our node.
func (l *Lease) Node() string {
	if l == nil {
		return ""
	}
	return l.l.Node()
}

// Release gives up this hold. For a Reentrant lock it must be called by the
// goroutine that locked (else recipes.ErrNotOwner and nothing changes), and the node
// is deleted at the goroutine's last Release of that side. For RWMutex any
// goroutine may call it. The node is deleted within ctx, or handed to the
// session's guaranteed-delete queue if the connection is down or ctx ends,
// so it never stays behind. Release after the lease was lost returns nil (the
// engine already removed the node). Idempotent per handle.
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
			return engine.NewError("rwlock", l.path, recipes.ErrNotOwner)
		}
		if !last {
			return nil
		}
	} else {
		l.released.Store(true)
	}
	l.once.Do(func() { l.err = l.l.Release(ctx) })
	return l.err
}

// checkOwner returns recipes.ErrNotOwner (wrapped) if this is a Reentrant lock's
// handle and the calling goroutine is not the one that locked it.
func (l *Lease) checkOwner() error {
	if l.re != nil && goid.ID() != l.owner {
		return engine.NewError("rwlock", l.path, recipes.ErrNotOwner)
	}
	return nil
}

// WriteLease is the handle of a held write lock: a Lease that can also
// guard writes and be downgraded to a read lease. A nil *WriteLease behaves
// as one that has ended with an error matching session.ErrBadArgument, as a
// nil *Lease does: every method names the nil write lease.
type WriteLease struct {
	Lease
	c  *core
	rm *Reentrant // nil for RWMutex

	down sync.Mutex // one Downgrade at a time
}

// The methods of the embedded Lease are repeated here so that a nil
// *WriteLease does not panic: a method promoted through a nil pointer
// dereferences it.

// Done returns a channel that is closed when ownership ends.
func (w *WriteLease) Done() <-chan struct{} { return w.Context().Done() }

// Err returns nil while the write lease is held, then why ownership ended.
func (w *WriteLease) Err() error {
	if w == nil {
		return errNilWriteLease()
	}
	return w.Lease.Err()
}

// Context returns a context canceled when ownership ends, with
// context.Cause(ctx) == Err().
func (w *WriteLease) Context() context.Context {
	if w == nil {
		return engine.EndedContext(errNilWriteLease())
	}
	return w.Lease.Context()
}

// Token returns the fencing token (see Lease.Token).
func (w *WriteLease) Token() int64 {
	if w == nil {
		return 0
	}
	return w.Lease.Token()
}

// Node returns the name of our node.
func (w *WriteLease) Node() string {
	if w == nil {
		return ""
	}
	return w.Lease.Node()
}

// Release gives up this hold of the write lock (see Lease.Release).
func (w *WriteLease) Release(ctx context.Context) error {
	if w == nil {
		return errNilWriteLease()
	}
	return w.Lease.Release(ctx)
}

// errNilLease is the error of a nil *Lease.
func errNilLease() error { return fmt.Errorf("rwlock: %w: nil lease", session.ErrBadArgument) }

// errNilWriteLease is the error of a nil *WriteLease.
func errNilWriteLease() error {
	return fmt.Errorf("rwlock: %w: nil write lease", session.ErrBadArgument)
}

// Commit runs ops in one ZooKeeper transaction behind a check that the write
// lock's node still exists: the writes commit only while the write lease
// holds, whatever this process believes (a writer whose session expired
// while it was cut off cannot overwrite its successor's work). ops are
// go-zookeeper's *zk.CreateRequest, *zk.SetDataRequest, *zk.DeleteRequest and
// *zk.CheckVersionRequest with recipe paths (under the session's namespace);
// a create without an ACL gets the session's. It returns their responses.
//
// While the connection is down, Commit waits within ctx for it to be back
// before it sends anything; the transaction is sent once.
//
// Errors: recipes.ErrNotHeld when the write lease has ended (released,
// downgraded, lost) or the server found its node gone (nothing committed; also
// when the write lease ends while Commit waits for the connection); the error
// of the first operation ZooKeeper refused (zk.ErrBadVersion, ...; nothing
// committed); session.ErrBadArgument for a bad operation;
// recipes.ErrUnknownOutcome when the transaction was sent and its answer was
// lost (wrapping the connection error, or ctx's error or session.ErrClosed
// when the call ended while it was in flight): it may have committed or not,
// and is not sent again; ctx's error or session.ErrClosed when the call ended
// while it waited for the connection: nothing was sent, and the error does not
// match recipes.ErrUnknownOutcome.
func (w *WriteLease) Commit(ctx context.Context, ops ...any) ([]zk.MultiResponse, error) {
	if w == nil {
		return nil, errNilWriteLease()
	}
	if w.released.Load() {
		return nil, engine.NewError("rwlock", w.path, fmt.Errorf("%w: %w", recipes.ErrNotHeld, recipes.ErrReleased))
	}
	return w.l.Commit(ctx, ops...)
}

// Downgrade takes the read lock while this write lease holds the write lock,
// then releases this hold of the write lock, and returns the read lease; no
// writer can take the lock in between. As Curator 5.5+ does (CURATOR-621),
// the read node is created EPHEMERAL with the write node's sequence
// ("_c_<uuid>-__READ__<the writer's 10 digits>"), so it sorts before every
// writer that queued while we wrote, and the create is conditional on the
// write node still existing.
//
// ctx bounds the create (the read lock is held as soon as the node exists:
// no waiting). Errors: the write lease's cause if it has ended (the write
// lease was lost, released or already downgraded), an error matching
// recipes.ErrNodeDeleted if our write node was deleted, ctx's error, session.ErrClosed, and
// ZooKeeper errors; on error the write lease is left as it was. If the
// write node cannot be deleted (ZooKeeper refuses it), the read lease is
// released too and the error returned.
//
// For a Reentrant lock, Downgrade must be called by the goroutine that
// locked (else recipes.ErrNotOwner); it is that goroutine's RLock followed by this
// handle's Release, so the write lock is released only if this was the
// goroutine's last write hold, and the returned read handle is one more
// hold if the goroutine already held the read lock.
func (w *WriteLease) Downgrade(ctx context.Context) (*Lease, error) {
	if w == nil {
		return nil, errNilWriteLease()
	}
	if ctx == nil {
		return nil, engine.NewError("rwlock", w.path, fmt.Errorf("%w: nil context", session.ErrBadArgument))
	}
	if err := w.checkOwner(); err != nil {
		return nil, err
	}
	w.down.Lock()
	defer w.down.Unlock()
	if w.released.Load() {
		return nil, engine.NewError("rwlock", w.path, fmt.Errorf("downgrade of a released write lease: %w", recipes.ErrReleased))
	}
	if err := w.Err(); err != nil {
		return nil, engine.NewError("rwlock", w.path, fmt.Errorf("downgrade: the write lease has ended: %w", err))
	}
	var r *Lease
	var err error
	if w.rm != nil {
		r, err = w.rm.rlock(ctx, false) // the goroutine holds the write lock: placed beside it
	} else {
		var l *engine.Lease
		l, err = w.c.downgradeRead(ctx, w.l.Node())
		if err == nil {
			r = &Lease{l: l, path: w.path}
		}
	}
	if err != nil {
		return nil, err
	}
	if err := w.Release(context.WithoutCancel(ctx)); err != nil {
		_ = r.Release(context.WithoutCancel(ctx))
		return nil, err
	}
	return r, nil
}
