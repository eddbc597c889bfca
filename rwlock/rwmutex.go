package rwlock

import (
	"context"

	"github.com/zkrecipes/zkrecipes/recipes"
	"github.com/zkrecipes/zkrecipes/session"
)

// RWMutex is a fair distributed read-write lock that is not tied to
// goroutines, wire-compatible with Apache Curator's InterProcessReadWriteLock:
// Go and Java processes locking the same path queue in one order, readers
// share the lock and a writer holds it alone. Its leases may be released by
// any goroutine, as sync.RWMutex's (what Curator users ask for in
// CURATOR-347).
//
// It does not re-enter and does not upgrade or downgrade implicitly, as
// sync.RWMutex: every RLock and Lock queues a node of its own, whatever this
// process already holds. So a Lock called while this process holds read
// leases of the lock waits for them to be released, like any writer (another
// goroutine may be about to release them; a goroutine that waits on its own
// read lease waits until ctx ends, then Lock returns ctx's error and leaves
// no node); TryLock returns recipes.ErrBusy. An RLock called while this process
// holds the write lease waits for it, like any reader. To keep reading what
// you wrote with no writer in between, downgrade: WriteLease.Downgrade.
//
// An RWMutex is safe for concurrent use.
type RWMutex struct {
	c *core
}

// New returns a non-reentrant read-write lock on path (a recipe path, under
// the session's namespace). It validates its arguments and does no I/O; the
// lock directory is created (as a container node) at the first acquire.
func New(sess *session.Session, path string, opts ...Option) (*RWMutex, error) {
	c, err := newCore(sess, path, opts)
	if err != nil {
		return nil, err
	}
	return &RWMutex{c: c}, nil
}

// Path returns the lock's path as given to New.
func (m *RWMutex) Path() string { return m.c.path }

// Lock blocks until the write lock is held and returns its lease. It queues
// a write node and waits for its predecessor (only), within ctx: on ctx's
// end it returns ctx's error (matching context.Canceled or DeadlineExceeded)
// within a few milliseconds, also when the lock was won just as ctx ended (it
// is released), and its node is deleted (on a healthy connection within
// about 10 ms of ctx's end, else by the session's queue as soon as the
// connection allows; Close waits for it). While the session is suspended it keeps its place and waits.
// Other errors: session.ErrClosed, session.ErrLost (the session ended while waiting;
// a wait never carries over to a new session), recipes.ErrNodeDeleted (our waiting node
// was deleted by someone else), ZooKeeper errors. Safe for concurrent use.
func (m *RWMutex) Lock(ctx context.Context) (*WriteLease, error) { return m.lock(ctx, false) }

// TryLock is Lock without waiting: if any other node sorts before ours (a
// reader or a writer, this process's included) it returns an error matching
// recipes.ErrBusy, its node already deleted. ctx bounds the requests only.
func (m *RWMutex) TryLock(ctx context.Context) (*WriteLease, error) { return m.lock(ctx, true) }

func (m *RWMutex) lock(ctx context.Context, try bool) (*WriteLease, error) {
	if ctx == nil {
		return nil, m.c.nilCtx()
	}
	l, err := m.c.acquire(ctx, true, try, "")
	if err != nil {
		return nil, err
	}
	return &WriteLease{Lease: Lease{l: l, path: m.c.path}, c: m.c}, nil
}

// RLock blocks until the read lock is held and returns its lease: at once
// when no writer holds the lock or is queued (so writers are not starved by
// a stream of readers), otherwise after the nearest writer before our node
// is gone. ctx, errors and cleanup are as for Lock.
func (m *RWMutex) RLock(ctx context.Context) (*Lease, error) { return m.rlock(ctx, false) }

// TryRLock is RLock without waiting: if a writer sorts before our node it
// returns an error matching recipes.ErrBusy, its node already deleted.
func (m *RWMutex) TryRLock(ctx context.Context) (*Lease, error) { return m.rlock(ctx, true) }

func (m *RWMutex) rlock(ctx context.Context, try bool) (*Lease, error) {
	if ctx == nil {
		return nil, m.c.nilCtx()
	}
	l, err := m.c.acquire(ctx, false, try, "")
	if err != nil {
		return nil, err
	}
	return &Lease{l: l, path: m.c.path}, nil
}

// Participants returns the lock's contenders in queue order, with its Kind
// ("read" or "write") and whether it holds it. It reads the lock
// directory (ctx bounds it); nodes of other processes, Curator's included,
// are listed with their ids.
func (m *RWMutex) Participants(ctx context.Context) ([]recipes.Participant, error) {
	return m.c.participants(ctx)
}

// Close ends the leases of this lock (cause session.ErrClosed; their nodes are
// deleted), makes waiting acquires return session.ErrClosed, and returns when every
// goroutine it started has exited. Idempotent; calls after Close return
// session.ErrClosed. The session stays open.
func (m *RWMutex) Close() error { return m.c.e.Close() }
