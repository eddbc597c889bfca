package mutex

import (
	"context"
	"fmt"

	"github.com/zkrecipes/zkrecipes/internal/engine"
	"github.com/zkrecipes/zkrecipes/recipes"
	"github.com/zkrecipes/zkrecipes/session"
)

// marker is the marker of fair lock nodes ("_c_<uuid>-lock-<seq>"), as in
// Curator's InterProcessMutex.
const marker = "lock-"

// driver is the fair mutex's queue: one holder, each waiter watching its
// predecessor; lookAheadDriver is that queue with look-ahead
// (WithLookAhead).
var (
	driver          = engine.Standard(marker, 1)
	lookAheadDriver = func() *engine.Driver {
		d := engine.Standard(marker, 1)
		d.LookAhead = true
		return d
	}()
)

// driver returns the queue's driver for c.
func (c *config) driver() *engine.Driver {
	if c.lookAhead {
		return lookAheadDriver
	}
	return driver
}

// Locker is what the lock kinds of this package have in common; NewMulti
// takes Lockers.
type Locker interface {
	// Lock blocks until the lock is held or ctx ends.
	Lock(ctx context.Context) (*Lease, error)
	// TryLock takes the lock only if that needs no waiting.
	TryLock(ctx context.Context) (*Lease, error)
	// Path returns the lock's path as given to the constructor.
	Path() string
}

// Mutex is a fair distributed mutex, wire-compatible with Apache Curator's
// InterProcessMutex ("_c_<uuid>-lock-<seq>" in the lock directory): Go and
// Java processes locking the same path exclude each other and queue in one
// order, and so do a Mutex and a Reentrant.
//
// Like sync.Mutex, it is not reentrant and not tied to goroutines: the lease
// it returns may be released by any goroutine, so guarded work may be handed
// to helper goroutines freely. A second Lock while this process already holds
// the lock, from any goroutine, queues behind the holder like any other
// participant and waits until the lease is released or its ctx ends; TryLock
// returns recipes.ErrBusy. For Curator's per-thread reentrancy use Reentrant. A
// Mutex is safe for concurrent use.
type Mutex struct {
	e    *engine.Engine
	data []byte // the participant id, the data of our nodes (never written)
	drv  *engine.Driver
	held engine.HeldLeases
}

// New returns a fair, non-reentrant mutex on path (a recipe path, under the
// session's namespace). It validates its arguments and does no I/O; the lock
// directory is created (as a container node) at the first Lock.
func New(sess *session.Session, path string, opts ...Option) (*Mutex, error) {
	e, c, err := newEngine(sess, path, opts)
	if err != nil {
		return nil, err
	}
	return &Mutex{e: e, data: c.bytes(), drv: c.driver()}, nil
}

// Path returns the lock's path as given to New.
func (m *Mutex) Path() string { return m.e.UserPath() }

// Lock blocks until the lock is held and returns its lease. It queues a node
// and waits with one data watch (see Costs in the package documentation), within
// ctx, the only timeout: on
// ctx's end it returns ctx's error (matching context.Canceled or
// DeadlineExceeded) within a few milliseconds whatever the network does, also
// when the lock was won just as ctx ended (it is released), and its node is
// deleted (at once on a healthy connection, else by the session's queue as
// soon as the connection allows). While the session is suspended it keeps its
// place and waits. Other errors: session.ErrClosed (the Mutex or the session was
// closed), session.ErrLost (the session ended while waiting; a wait never
// carries over to a new session), recipes.ErrNodeDeleted (our waiting node was deleted
// by someone else), ZooKeeper errors (zk.ErrNoAuth, ...). Safe for concurrent
// use.
func (m *Mutex) Lock(ctx context.Context) (*Lease, error) {
	if ctx == nil {
		return nil, errNilContext(m.e.UserPath())
	}
	l, err := m.e.Acquire(ctx, m.drv, m.data)
	if err != nil {
		return nil, err
	}
	m.held.Add(l)
	return &Lease{l: l}, nil
}

// TryLock takes the lock if no one holds it (this process included), else
// returns an error matching recipes.ErrBusy; its node is deleted first. ctx bounds
// the requests only.
func (m *Mutex) TryLock(ctx context.Context) (*Lease, error) {
	if ctx == nil {
		return nil, errNilContext(m.e.UserPath())
	}
	l, err := m.e.TryAcquire(ctx, m.drv, m.data)
	if err != nil {
		return nil, err
	}
	m.held.Add(l)
	return &Lease{l: l}, nil
}

// Held reports whether this process holds the lock through this Mutex
// (Curator's isAcquiredInThisProcess): a lease that has not been released and
// has not ended. It does no I/O.
func (m *Mutex) Held() bool { return m.held.Count() > 0 }

// Participants returns the lock's contenders in queue order: the holder
// first (Holds is true), then the waiters. It reads the lock directory (ctx
// bounds it); nodes of other processes, Curator's included, are listed with
// their ids.
func (m *Mutex) Participants(ctx context.Context) ([]recipes.Participant, error) {
	if ctx == nil {
		return nil, errNilContext(m.e.UserPath())
	}
	return m.e.Participants(ctx, driver)
}

// Holder reads who holds the lock: ok is false when it is free. ctx bounds
// the reads.
func (m *Mutex) Holder(ctx context.Context) (p recipes.Participant, ok bool, err error) {
	if ctx == nil {
		return recipes.Participant{}, false, errNilContext(m.e.UserPath())
	}
	return holder(m.e.Participants(ctx, driver))
}

// Close ends the leases of this Mutex (cause matching session.ErrClosed; their nodes
// are deleted), makes waiting Locks return session.ErrClosed, and returns when every
// goroutine it started has exited. Idempotent; calls after Close return
// session.ErrClosed. The session stays open.
func (m *Mutex) Close() error { return m.e.Close() }

// errNilContext is the error of a call on the lock at path given a nil ctx.
func errNilContext(path string) error {
	return engine.NewError("mutex", path, fmt.Errorf("%w: nil context", session.ErrBadArgument))
}

// holder returns the first participant, the holder, if any.
func holder(ps []recipes.Participant, err error) (recipes.Participant, bool, error) {
	if err != nil || len(ps) == 0 {
		return recipes.Participant{}, false, err
	}
	return ps[0], true, nil
}
