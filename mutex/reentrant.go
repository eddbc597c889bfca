package mutex

import (
	"context"

	"github.com/zkrecipes/zkrecipes/internal/engine"
	"github.com/zkrecipes/zkrecipes/internal/goid"
	"github.com/zkrecipes/zkrecipes/recipes"
	"github.com/zkrecipes/zkrecipes/session"
)

// Reentrant is a fair distributed mutex that is reentrant per goroutine, as
// Curator's InterProcessMutex is per thread, and wire-compatible with it: a
// Go process and a Java process locking the same path exclude each other and
// queue in one order, and so do a Reentrant and a Mutex.
//
// Reentrancy is per goroutine, as Curator's is per thread: a goroutine that
// holds the lock may Lock again (each Lock returns its own handle and needs
// its own Release; the node goes at the last one). Another goroutine's Lock
// queues behind the holder even in the same process, and its Release of the
// holder's handle fails with recipes.ErrNotOwner. Handing guarded work to another
// goroutine does not hand over the ownership: keep Lock and Release in one
// goroutine, or use Mutex, whose leases any goroutine may release. An errgroup
// child that locks while its parent holds the lock queues behind the parent.
//
// A Reentrant is safe for concurrent use.
type Reentrant struct {
	e    *engine.Engine
	data []byte // id, the data of our nodes (one copy for every Lock; never written)
	drv  *engine.Driver
	re   engine.GoroutineHolds
	held engine.HeldLeases
}

// NewReentrant returns a fair mutex on path (a recipe path, under the
// session's namespace) that is reentrant per goroutine. It validates its
// arguments and does no I/O; the lock directory is created (as a container
// node) at the first Lock.
func NewReentrant(sess *session.Session, path string, opts ...Option) (*Reentrant, error) {
	e, c, err := newEngine(sess, path, opts)
	if err != nil {
		return nil, err
	}
	return &Reentrant{e: e, data: c.bytes(), drv: c.driver()}, nil
}

// Path returns the lock's path as given to NewReentrant.
func (m *Reentrant) Path() string { return m.e.UserPath() }

// Lock blocks until the calling goroutine holds the lock and returns its
// lease. If the goroutine already holds it, Lock returns at once with a new
// handle (hold count + 1), or with an error wrapping the cause if that hold
// was lost meanwhile. Otherwise it queues a node and waits with one data
// watch, as Mutex.Lock does, within ctx: on ctx's end it returns ctx's error
// (matching context.Canceled or DeadlineExceeded) within a few milliseconds,
// also when the lock was won just as ctx ended (it is released), and its
// node is deleted as Mutex.Lock says. While the
// session is suspended it keeps its place and waits. Other errors:
// session.ErrClosed, session.ErrLost (the session ended while waiting; a wait never
// carries over to a new session), recipes.ErrNodeDeleted (our waiting node was deleted
// by someone else), ZooKeeper errors; session.ErrBadArgument for a nil ctx, before
// anything else (a holding goroutine does not re-enter then). Safe for
// concurrent use.
func (m *Reentrant) Lock(ctx context.Context) (*Lease, error) {
	return m.lock(ctx, false)
}

// TryLock is Lock without waiting: if another participant holds the lock it
// returns an error matching recipes.ErrBusy (its node already deleted). ctx bounds
// the requests only. A goroutine that holds the lock re-enters it.
func (m *Reentrant) TryLock(ctx context.Context) (*Lease, error) {
	return m.lock(ctx, true)
}

func (m *Reentrant) lock(ctx context.Context, try bool) (*Lease, error) {
	if ctx == nil {
		return nil, errNilContext(m.e.UserPath())
	}
	if l, _, err := m.re.Enter(); l != nil {
		if err != nil {
			return nil, engine.NewError("mutex", m.e.UserPath(), err)
		}
		return &Lease{l: l, re: &m.re, owner: goid.ID()}, nil
	}
	var l *engine.Lease
	var err error
	if try {
		l, err = m.e.TryAcquire(ctx, m.drv, m.data)
	} else {
		l, err = m.e.Acquire(ctx, m.drv, m.data)
	}
	if err != nil {
		return nil, err
	}
	if err := m.re.Add(l); err != nil {
		// Cannot happen: only this goroutine adds for itself.
		_ = l.Release(context.WithoutCancel(ctx))
		return nil, engine.NewError("mutex", m.e.UserPath(), err)
	}
	m.held.Add(l)
	return &Lease{l: l, re: &m.re, owner: goid.ID()}, nil
}

// Held reports whether any goroutine of this process holds the lock through
// this Reentrant (Curator's isAcquiredInThisProcess): a hold that has not
// been released and whose lease has not ended. It does no I/O.
func (m *Reentrant) Held() bool { return m.held.Count() > 0 }

// Participants returns the lock's contenders in queue order: the holder
// first, then the waiters. It reads the lock directory (ctx bounds it);
// nodes of other processes, Curator's included, are listed with their ids.
func (m *Reentrant) Participants(ctx context.Context) ([]recipes.Participant, error) {
	if ctx == nil {
		return nil, errNilContext(m.e.UserPath())
	}
	return m.e.Participants(ctx, driver)
}

// Holder reads who holds the lock: ok is false when it is free. ctx bounds
// the reads.
func (m *Reentrant) Holder(ctx context.Context) (p recipes.Participant, ok bool, err error) {
	if ctx == nil {
		return recipes.Participant{}, false, errNilContext(m.e.UserPath())
	}
	return holder(m.e.Participants(ctx, driver))
}

// Close ends the leases of this Reentrant (cause session.ErrClosed; their nodes are
// deleted), makes waiting Locks return session.ErrClosed, and returns when every
// goroutine it started has exited. Idempotent; calls after Close return
// session.ErrClosed. The session stays open.
func (m *Reentrant) Close() error { return m.e.Close() }
