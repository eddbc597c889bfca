package rwlock

import (
	"context"
	"fmt"

	"github.com/zkrecipes/zkrecipes/internal/engine"
	"github.com/zkrecipes/zkrecipes/internal/goid"
	"github.com/zkrecipes/zkrecipes/recipes"
	"github.com/zkrecipes/zkrecipes/session"
)

// Reentrant is a fair distributed read-write lock, reentrant per goroutine
// as Curator's InterProcessReadWriteLock is per thread, and wire-compatible
// with it.
//
//   - A goroutine that holds a side may acquire it again: each acquire
//     returns its own handle and needs its own Release, by that goroutine
//     (else recipes.ErrNotOwner); the node goes at the last one.
//   - A goroutine that holds the write lock may take the read lock
//     (Curator's downgrade): its read node is placed beside its write node
//     with the writer's sequence (as Curator 5.5+ does, CURATOR-621), so it
//     holds at once and, once the goroutine releases the write lock, no
//     writer queued meanwhile can take it while the goroutine reads.
//     WriteLease.Downgrade does both steps.
//   - A goroutine that holds the read lock and not the write lock gets
//     ErrUpgrade from Lock and TryLock at once, before any node is created
//     (Curator's acquire blocks for ever).
//
// Another goroutine, even in the same process, is another participant: its
// acquires queue behind the holders, and handing guarded work to another
// goroutine does not hand over the ownership. Use RWMutex when leases must
// be released from other goroutines.
//
// A Reentrant is safe for concurrent use.
type Reentrant struct {
	c  *core
	rd engine.GoroutineHolds // the goroutines' read holds
	wr engine.GoroutineHolds // the goroutines' write holds
}

// NewReentrant returns a per-goroutine reentrant read-write lock on path. It
// validates its arguments and does no I/O.
func NewReentrant(sess *session.Session, path string, opts ...Option) (*Reentrant, error) {
	c, err := newCore(sess, path, opts)
	if err != nil {
		return nil, err
	}
	return &Reentrant{c: c}, nil
}

// Path returns the lock's path as given to NewReentrant.
func (m *Reentrant) Path() string { return m.c.path }

// Lock blocks until the calling goroutine holds the write lock and returns a
// handle. If the goroutine holds the write lock already, Lock returns at once
// (hold count + 1), or with an error wrapping the cause if that hold was lost
// meanwhile. If it holds the read lock but not the write lock, Lock returns
// an error matching ErrUpgrade at once. Otherwise it queues as RWMutex.Lock
// does (same ctx, errors and cleanup).
func (m *Reentrant) Lock(ctx context.Context) (*WriteLease, error) { return m.lock(ctx, false) }

// TryLock is Lock without waiting: recipes.ErrBusy if another node sorts before
// ours; it re-enters and refuses upgrades as Lock does.
func (m *Reentrant) TryLock(ctx context.Context) (*WriteLease, error) { return m.lock(ctx, true) }

func (m *Reentrant) lock(ctx context.Context, try bool) (*WriteLease, error) {
	if ctx == nil {
		return nil, m.c.nilCtx()
	}
	l, _, err := m.wr.Enter()
	if l != nil {
		if err != nil {
			return nil, engine.NewError("rwlock", m.c.path, err)
		}
		return m.writeHandle(l), nil
	}
	if err != nil {
		return nil, engine.NewError("rwlock", m.c.path, err)
	}
	if m.rd.Count() > 0 {
		return nil, engine.NewError("rwlock", m.c.path, ErrUpgrade)
	}
	l, err = m.c.acquire(ctx, true, try, "")
	if err != nil {
		return nil, err
	}
	if err := m.wr.Add(l); err != nil {
		// Cannot happen: only this goroutine adds for itself.
		_ = l.Release(context.WithoutCancel(ctx))
		return nil, engine.NewError("rwlock", m.c.path, err)
	}
	return m.writeHandle(l), nil
}

func (m *Reentrant) writeHandle(l *engine.Lease) *WriteLease {
	return &WriteLease{Lease: Lease{l: l, path: m.c.path, re: &m.wr, owner: goid.ID()}, c: m.c, rm: m}
}

// RLock blocks until the calling goroutine holds the read lock and returns a
// handle. If the goroutine holds the read lock already, RLock returns at
// once (hold count + 1), or with an error wrapping the cause if that hold
// was lost. If it holds the write lock, it takes the read lock beside it
// (a downgrade, see Reentrant): one create, no waiting; an error wrapping
// the write lease's cause if that has ended. Otherwise it queues as
// RWMutex.RLock does.
func (m *Reentrant) RLock(ctx context.Context) (*Lease, error) { return m.rlock(ctx, false) }

// TryRLock is RLock without waiting: recipes.ErrBusy if a writer sorts before our
// node; it re-enters and downgrades as RLock does.
func (m *Reentrant) TryRLock(ctx context.Context) (*Lease, error) { return m.rlock(ctx, true) }

func (m *Reentrant) rlock(ctx context.Context, try bool) (*Lease, error) {
	if ctx == nil {
		return nil, m.c.nilCtx()
	}
	l, _, err := m.rd.Enter()
	if l != nil {
		if err != nil {
			return nil, engine.NewError("rwlock", m.c.path, err)
		}
		return m.readHandle(l), nil
	}
	if err != nil {
		return nil, engine.NewError("rwlock", m.c.path, err)
	}
	anchor := ""
	if w := m.wr.Held(); w != nil {
		if err := w.Err(); err != nil {
			return nil, engine.NewError("rwlock", m.c.path, fmt.Errorf("the write lock this goroutine holds has ended: %w", err))
		}
		anchor = w.Node()
	}
	l, err = m.c.acquire(ctx, false, try, anchor)
	if err != nil {
		return nil, err
	}
	if err := m.rd.Add(l); err != nil {
		_ = l.Release(context.WithoutCancel(ctx))
		return nil, engine.NewError("rwlock", m.c.path, err)
	}
	return m.readHandle(l), nil
}

func (m *Reentrant) readHandle(l *engine.Lease) *Lease {
	return &Lease{l: l, path: m.c.path, re: &m.rd, owner: goid.ID()}
}

// Participants returns the lock's contenders in queue order, with its Kind
// ("read" or "write") and whether it holds it (ctx bounds the reads).
func (m *Reentrant) Participants(ctx context.Context) ([]recipes.Participant, error) {
	return m.c.participants(ctx)
}

// Close ends the leases of this lock (cause session.ErrClosed; their nodes are
// deleted), makes waiting acquires return session.ErrClosed, and returns when every
// goroutine it started has exited. Idempotent. The session stays open.
func (m *Reentrant) Close() error { return m.c.e.Close() }
