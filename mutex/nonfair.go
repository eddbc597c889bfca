package mutex

import (
	"context"

	"github.com/zkrecipes/zkrecipes/internal/engine"
	"github.com/zkrecipes/zkrecipes/recipes"
	"github.com/zkrecipes/zkrecipes/session"
)

// nonFairNode is the name of the non-fair lock's node in the lock directory:
// "<path>/lock". It matches no fair-lock marker, so a fair lock on the same
// path ignores it (the two kinds do not exclude each other).
const nonFairNode = "lock"

// NonFair is a non-fair distributed lock: one EPHEMERAL node with a fixed
// name, "<path>/lock", whose data names the owner ("<uuid> <participant
// id>", the uuid new at every Lock). Taking a free lock is one write (and a
// read of the node's stat pipelined behind it). Waiters watch that node and
// race to create it when it is deleted, so every release wakes every waiter
// and the order is not first-come first-served; use Mutex for fairness. After
// a connection error during the create, the owner recognises its node by its
// data and its ephemeralOwner. Not part of Curator.
//
// It is not reentrant; its lease may be released from any goroutine. A second
// Lock while this process holds the lock waits like any other. A NonFair is
// safe for concurrent use.
type NonFair struct {
	e    *engine.Engine
	id   string
	held engine.HeldLeases
}

// NewNonFair returns a non-fair lock on path. It validates its arguments and
// does no I/O.
func NewNonFair(sess *session.Session, path string, opts ...Option) (*NonFair, error) {
	e, c, err := newEngine(sess, path, opts)
	if err != nil {
		return nil, err
	}
	return &NonFair{e: e, id: c.id}, nil
}

// Path returns the lock's path as given to NewNonFair.
func (m *NonFair) Path() string { return m.e.UserPath() }

// Lock blocks until the lock is held or ctx ends; errors and cleanup are as
// for Mutex.Lock.
func (m *NonFair) Lock(ctx context.Context) (*Lease, error) {
	if ctx == nil {
		return nil, errNilContext(m.e.UserPath())
	}
	l, err := m.e.AcquireFixed(ctx, nonFairNode, m.id)
	if err != nil {
		return nil, err
	}
	m.held.Add(l)
	return &Lease{l: l}, nil
}

// TryLock takes the lock if it is free, else returns an error matching
// recipes.ErrBusy.
func (m *NonFair) TryLock(ctx context.Context) (*Lease, error) {
	if ctx == nil {
		return nil, errNilContext(m.e.UserPath())
	}
	l, err := m.e.TryAcquireFixed(ctx, nonFairNode, m.id)
	if err != nil {
		return nil, err
	}
	m.held.Add(l)
	return &Lease{l: l}, nil
}

// Held reports whether this process holds the lock through this NonFair: a
// lease that has not been released and has not ended. It does no I/O.
func (m *NonFair) Held() bool { return m.held.Count() > 0 }

// Holder reads who holds the lock (its participant id, session and token):
// ok is false when it is free. ctx bounds the read.
func (m *NonFair) Holder(ctx context.Context) (p recipes.Participant, ok bool, err error) {
	if ctx == nil {
		return recipes.Participant{}, false, errNilContext(m.e.UserPath())
	}
	h, err := m.e.FixedHolder(ctx, nonFairNode)
	if err != nil || h == nil {
		return recipes.Participant{}, false, err
	}
	return *h, true, nil
}

// Close ends the leases of this lock (cause session.ErrClosed), makes waiting Locks
// return session.ErrClosed, and waits for its goroutines. Idempotent.
func (m *NonFair) Close() error { return m.e.Close() }
