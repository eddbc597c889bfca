package mutex

import (
	"context"
	"errors"
	"fmt"

	"github.com/zkrecipes/zkrecipes/internal/goid"
	"github.com/zkrecipes/zkrecipes/recipes"
	"github.com/zkrecipes/zkrecipes/session"
)

// Marker is the marker of fair lock nodes ("_c_<uuid>-lock-<seq>"), as in
// Curator's InterProcessMutex.
const Marker = "lock-"

var driver = recipes.StandardDriver{Name: Marker, MaxLeases: 1}

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

// Mutex is a fair, reentrant, distributed mutex, wire-compatible with Apache
// Curator's InterProcessMutex: a Go process and a Java process locking the
// same path exclude each other and queue in one order.
//
// Reentrancy is per goroutine, as Curator's is per thread: a goroutine that
// holds the lock may Lock again (each Lock returns its own handle and needs
// its own Unlock; the node goes at the last one). Another goroutine's Lock
// queues behind the holder even in the same process, and its Unlock of the
// holder's handle fails with ErrNotOwner. Handing guarded work to another
// goroutine does not hand over the ownership: keep Lock and Unlock in one
// goroutine, or use NonReentrant.
//
// A Mutex is safe for concurrent use.
type Mutex struct {
	in   *recipes.Internals
	path string
	id   string
	re   recipes.Reentrant
}

// New returns a fair reentrant mutex on path (a recipe path, under the
// session's namespace). It validates its arguments and does no I/O; the lock
// directory is created (as a container node) at the first Lock.
func New(sess *session.Session, path string, opts ...Option) (*Mutex, error) {
	in, c, err := newInternals(sess, path, opts)
	if err != nil {
		return nil, err
	}
	return &Mutex{in: in, path: path, id: c.id}, nil
}

// Path returns the lock's path as given to New.
func (m *Mutex) Path() string { return m.path }

// ServerPath returns the full server path of the lock directory (namespace
// included).
func (m *Mutex) ServerPath() string { return m.in.Path() }

// ID returns the participant id stored in our lock nodes.
func (m *Mutex) ID() string { return m.id }

// Lock blocks until the calling goroutine holds the lock and returns its
// lease. If the goroutine already holds it, Lock returns at once with a new
// handle (hold count + 1), or with an error wrapping the cause if that hold
// was lost meanwhile. Otherwise it queues a node and waits for its
// predecessor (only), within ctx: on ctx's end it deletes its node and
// returns ctx's error (matching context.Canceled or DeadlineExceeded), also
// when the lock was won just as ctx ended (it is released). While the
// session is suspended it keeps its place and waits. Other errors:
// ErrClosed, session.ErrLost (the session ended while waiting; a wait never
// carries over to a new session), ErrLockLost (our waiting node was deleted
// by someone else), ZooKeeper errors; ErrBadOption for a nil ctx, before
// anything else (a holding goroutine does not re-enter then). Safe for
// concurrent use.
func (m *Mutex) Lock(ctx context.Context) (*Lease, error) {
	return m.lock(ctx, false)
}

// TryLock is Lock without waiting: if another participant holds the lock it
// returns an error matching ErrLocked (its node already deleted). ctx bounds
// the requests only. A goroutine that holds the lock re-enters it.
func (m *Mutex) TryLock(ctx context.Context) (*Lease, error) {
	return m.lock(ctx, true)
}

func (m *Mutex) lock(ctx context.Context, try bool) (*Lease, error) {
	if ctx == nil {
		return nil, errNilContext(m.path)
	}
	if l, _, err := m.re.Enter(); l != nil {
		if err != nil {
			return nil, fmt.Errorf("mutex %s: %w", m.path, err)
		}
		return &Lease{l: l, path: m.path, re: &m.re, owner: goid.ID()}, nil
	}
	var l *recipes.Lease
	var err error
	if try {
		l, err = m.in.TryAcquire(ctx, driver, []byte(m.id))
		if errors.Is(err, recipes.ErrWouldBlock) {
			return nil, fmt.Errorf("mutex %s: %w", m.path, ErrLocked)
		}
	} else {
		l, err = m.in.Acquire(ctx, driver, []byte(m.id))
	}
	if err != nil {
		return nil, err
	}
	if err := m.re.Add(l); err != nil {
		// Cannot happen: only this goroutine adds for itself.
		_ = l.Release(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("mutex %s: %w", m.path, err)
	}
	return &Lease{l: l, path: m.path, re: &m.re, owner: goid.ID()}, nil
}

// HeldByMe reports whether the calling goroutine holds the lock (Curator's
// isOwnedByCurrentThread); a lost hold still counts until it is unlocked.
func (m *Mutex) HeldByMe() bool { return m.re.Count() > 0 }

// Participants returns the lock's contenders in queue order: the holder
// first, then the waiters. It reads the lock directory (ctx bounds it);
// nodes of other processes, Curator's included, are listed with their ids.
func (m *Mutex) Participants(ctx context.Context) ([]Participant, error) {
	if ctx == nil {
		return nil, errNilContext(m.path)
	}
	return m.in.Participants(ctx, driver)
}

// Holder returns the participant holding the lock, or nil if it is free.
func (m *Mutex) Holder(ctx context.Context) (*Participant, error) {
	if ctx == nil {
		return nil, errNilContext(m.path)
	}
	return holder(m.in.Participants(ctx, driver))
}

// errNilContext is the error of a call on the lock at path given a nil ctx.
func errNilContext(path string) error {
	return fmt.Errorf("mutex %s: %w: nil context", path, ErrBadOption)
}

func holder(ps []Participant, err error) (*Participant, error) {
	if err != nil || len(ps) == 0 {
		return nil, err
	}
	p := ps[0]
	return &p, nil
}

// Close ends the leases of this Mutex (cause ErrClosed; their nodes are
// deleted), makes waiting Locks return ErrClosed, and returns when every
// goroutine it started has exited. Idempotent; calls after Close return
// ErrClosed. The session stays open.
func (m *Mutex) Close() error { return m.in.Close() }
