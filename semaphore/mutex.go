package semaphore

import (
	"context"

	"github.com/zkrecipes/zkrecipes/session"
)

// Mutex is a semaphore with a maximum of one lease: the Go twin of Curator's
// InterProcessSemaphoreMutex, on the same znodes (<path>/locks and
// <path>/leases). A Go Mutex and a Java InterProcessSemaphoreMutex on the
// same path exclude each other, and so do a Mutex and a Semaphore of maximum
// 1 on the same path.
//
// It is NOT the lock of package mutex: mutex.Mutex (and Curator's
// InterProcessMutex) queue "_c_<uuid>-lock-<seq>" nodes directly under the
// lock path, this Mutex holds a lease node under <path>/leases. A
// semaphore.Mutex and a mutex.Mutex (or an InterProcessMutex) on the same
// path do not exclude each other: pick the type that matches the Java side
// (README's table lists the pairs).
//
// It is not reentrant and not tied to goroutines: a second Lock while this
// process holds the lock waits like any other participant, and any goroutine
// may release a lease. A Mutex is safe for concurrent use.
type Mutex struct{ s *Semaphore }

// NewMutex returns the InterProcessSemaphoreMutex twin on path. It validates
// its arguments and does no I/O.
func NewMutex(sess *session.Session, path string, opts ...Option) (*Mutex, error) {
	s, err := New(sess, path, 1, opts...)
	if err != nil {
		return nil, err
	}
	return &Mutex{s: s}, nil
}

// Path returns the lock's path as given to NewMutex.
func (m *Mutex) Path() string { return m.s.Path() }

// Lock blocks until it holds the lock, and returns its lease; see
// Semaphore.Acquire for the wait, ctx and the errors.
func (m *Mutex) Lock(ctx context.Context) (*Lease, error) { return m.s.Acquire(ctx) }

// TryLock takes the lock if that needs no waiting, else returns an error
// matching ErrNoLease (see Semaphore.TryAcquire).
func (m *Mutex) TryLock(ctx context.Context) (*Lease, error) { return m.s.TryAcquire(ctx) }

// Holder returns the participant holding the lock (the first lease node);
// ok is false when the lock is free. ctx bounds the requests.
func (m *Mutex) Holder(ctx context.Context) (p Participant, ok bool, err error) {
	ps, err := m.s.Participants(ctx)
	if err != nil || len(ps) == 0 {
		return Participant{}, false, err
	}
	return ps[0], true, nil
}

// Held reports whether this Mutex value holds the lock now, as far as it
// knows (Curator's isAcquiredInThisProcess). It does no I/O.
func (m *Mutex) Held() bool { return m.s.Held() > 0 }

// Participants returns the lease nodes (see Semaphore.Participants): the
// holder, and a Curator acquirer's waiting node if there is one.
func (m *Mutex) Participants(ctx context.Context) ([]Participant, error) {
	return m.s.Participants(ctx)
}

// Close ends the lock's leases (cause ErrClosed), makes waiting Locks return
// ErrClosed, and waits for its goroutines. Idempotent.
func (m *Mutex) Close() error { return m.s.Close() }
