package mutex

import (
	"context"
	"errors"
	"fmt"

	"github.com/zkrecipes/zkrecipes/recipes"
	"github.com/zkrecipes/zkrecipes/session"
)

// Marker is the marker of fair lock nodes ("_c_<uuid>-lock-<seq>"), as in
// Curator's InterProcessMutex.
const Marker = "lock-"

// driver is boxed in its interface once, not at every Lock.
var driver recipes.Driver = recipes.StandardDriver{Name: Marker, MaxLeases: 1, LookAhead: true}

// Participant is one contender of a lock, as Participants and Holder read it.
type Participant = recipes.Participant

// Locker is what the lock kinds of this package have in common; Multi takes
// Lockers.
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
// it returns may be unlocked by any goroutine, so guarded work may be handed
// to helper goroutines freely. A second Lock while this process already holds
// the lock, from any goroutine, queues behind the holder like any other
// participant and waits until the lease is unlocked or its ctx ends; TryLock
// returns ErrLocked. For Curator's per-thread reentrancy use Reentrant. A
// Mutex is safe for concurrent use.
type Mutex struct {
	in   *recipes.Engine
	path string
	id   string
	data []byte // id, the data of our nodes (one copy for every Lock; never written)
	held recipes.HeldLeases
}

// New returns a fair, non-reentrant mutex on path (a recipe path, under the
// session's namespace). It validates its arguments and does no I/O; the lock
// directory is created (as a container node) at the first Lock.
func New(sess *session.Session, path string, opts ...Option) (*Mutex, error) {
	in, c, err := newInternals(sess, path, opts)
	if err != nil {
		return nil, err
	}
	return &Mutex{in: in, path: path, id: c.id, data: []byte(c.id)}, nil
}

// Path returns the lock's path as given to New.
func (m *Mutex) Path() string { return m.path }

// ServerPath returns the full server path of the lock directory (namespace
// included).
func (m *Mutex) ServerPath() string { return m.in.Path() }

// ID returns the participant id stored in our lock nodes.
func (m *Mutex) ID() string { return m.id }

// Lock blocks until the lock is held and returns its lease. It queues a node
// and waits with one data watch (see Algorithm in the package doc), within
// ctx, the only timeout: on
// ctx's end it returns ctx's error (matching context.Canceled or
// DeadlineExceeded) within a few milliseconds whatever the network does, also
// when the lock was won just as ctx ended (it is released), and its node is
// deleted (at once on a healthy connection, else by the session's queue as
// soon as the connection allows). While the session is suspended it keeps its
// place and waits. Other errors: ErrClosed (the Mutex or the session was
// closed), session.ErrLost (the session ended while waiting; a wait never
// carries over to a new session), ErrLockLost (our waiting node was deleted
// by someone else), ZooKeeper errors (zk.ErrNoAuth, ...). Safe for concurrent
// use.
func (m *Mutex) Lock(ctx context.Context) (*Lease, error) {
	if ctx == nil {
		return nil, errNilContext(m.path)
	}
	l, err := m.in.Acquire(ctx, driver, m.data)
	if err != nil {
		return nil, err
	}
	m.held.Add(l)
	return &Lease{l: l, path: m.path}, nil
}

// TryLock takes the lock if no one holds it (this process included), else
// returns an error matching ErrLocked; its node is deleted first. ctx bounds
// the requests only.
func (m *Mutex) TryLock(ctx context.Context) (*Lease, error) {
	if ctx == nil {
		return nil, errNilContext(m.path)
	}
	l, err := m.in.TryAcquire(ctx, driver, m.data)
	if errors.Is(err, recipes.ErrWouldBlock) {
		return nil, recipes.NewError("mutex", m.path, ErrLocked)
	}
	if err != nil {
		return nil, err
	}
	m.held.Add(l)
	return &Lease{l: l, path: m.path}, nil
}

// Held reports whether this process holds the lock through this Mutex
// (Curator's isAcquiredInThisProcess): a lease that has not been unlocked and
// has not ended. It does no I/O.
func (m *Mutex) Held() bool { return m.held.Count() > 0 }

// Participants returns the lock's contenders in queue order: the holder
// first (Holds is true), then the waiters. It reads the lock directory (ctx
// bounds it); nodes of other processes, Curator's included, are listed with
// their ids.
func (m *Mutex) Participants(ctx context.Context) ([]Participant, error) {
	if ctx == nil {
		return nil, errNilContext(m.path)
	}
	return m.in.Participants(ctx, driver)
}

// Holder reads who holds the lock: ok is false when it is free. ctx bounds
// the reads.
func (m *Mutex) Holder(ctx context.Context) (p Participant, ok bool, err error) {
	if ctx == nil {
		return Participant{}, false, errNilContext(m.path)
	}
	return holder(m.in.Participants(ctx, driver))
}

// Close ends the leases of this Mutex (cause matching ErrClosed; their nodes
// are deleted), makes waiting Locks return ErrClosed, and returns when every
// goroutine it started has exited. Idempotent; calls after Close return
// ErrClosed. The session stays open.
func (m *Mutex) Close() error { return m.in.Close() }

// errNilContext is the error of a call on the lock at path given a nil ctx.
func errNilContext(path string) error {
	return recipes.NewError("mutex", path, fmt.Errorf("%w: nil context", ErrBadOption))
}

// holder returns the first participant, the holder, if any.
func holder(ps []Participant, err error) (Participant, bool, error) {
	if err != nil || len(ps) == 0 {
		return Participant{}, false, err
	}
	return ps[0], true, nil
}
