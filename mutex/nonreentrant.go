package mutex

import (
	"context"
	"errors"
	"fmt"

	"github.com/zkrecipes/zkrecipes/recipes"
	"github.com/zkrecipes/zkrecipes/session"
)

// NonReentrant is a fair mutex that is not tied to goroutines, with the
// semantics of Curator's InterProcessSemaphoreMutex: the lease it returns may
// be unlocked by any goroutine. It uses the fair Mutex's node layout
// ("_c_<uuid>-lock-<seq>" in the lock directory), so it also excludes
// Curator InterProcessMutex holders and Mutex holders on the same path.
//
// It does not re-enter: a second Lock while this process already holds the
// lock, from any goroutine, queues behind the holder like any other
// participant and waits until the lease is unlocked (possibly by another
// goroutine) or its ctx ends; TryLock returns ErrLocked. A NonReentrant is
// safe for concurrent use.
type NonReentrant struct {
	in   *recipes.Internals
	path string
	id   string
}

// NewNonReentrant returns a non-reentrant fair mutex on path. It validates its
// arguments and does no I/O.
func NewNonReentrant(sess *session.Session, path string, opts ...Option) (*NonReentrant, error) {
	in, c, err := newInternals(sess, path, opts)
	if err != nil {
		return nil, err
	}
	return &NonReentrant{in: in, path: path, id: c.id}, nil
}

// Path returns the lock's path as given to NewNonReentrant.
func (m *NonReentrant) Path() string { return m.path }

// Lock blocks until the lock is held, as Mutex.Lock does, but never
// re-enters (see NonReentrant).
func (m *NonReentrant) Lock(ctx context.Context) (*Lease, error) {
	if ctx == nil {
		return nil, errNilContext(m.path)
	}
	l, err := m.in.Acquire(ctx, driver, []byte(m.id))
	if err != nil {
		return nil, err
	}
	return &Lease{l: l, path: m.path}, nil
}

// TryLock takes the lock if no one holds it (this process included), else
// returns an error matching ErrLocked.
func (m *NonReentrant) TryLock(ctx context.Context) (*Lease, error) {
	if ctx == nil {
		return nil, errNilContext(m.path)
	}
	l, err := m.in.TryAcquire(ctx, driver, []byte(m.id))
	if errors.Is(err, recipes.ErrWouldBlock) {
		return nil, fmt.Errorf("mutex %s: %w", m.path, ErrLocked)
	}
	if err != nil {
		return nil, err
	}
	return &Lease{l: l, path: m.path}, nil
}

// Participants returns the contenders in queue order, the holder first.
func (m *NonReentrant) Participants(ctx context.Context) ([]Participant, error) {
	if ctx == nil {
		return nil, errNilContext(m.path)
	}
	return m.in.Participants(ctx, driver)
}

// Holder returns the participant holding the lock, or nil if it is free.
func (m *NonReentrant) Holder(ctx context.Context) (*Participant, error) {
	if ctx == nil {
		return nil, errNilContext(m.path)
	}
	return holder(m.in.Participants(ctx, driver))
}

// Close ends the leases of this lock (cause ErrClosed), makes waiting Locks
// return ErrClosed, and waits for its goroutines. Idempotent.
func (m *NonReentrant) Close() error { return m.in.Close() }
