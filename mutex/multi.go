package mutex

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"time"

	"github.com/zkrecipes/zkrecipes/internal/engine"
	"github.com/zkrecipes/zkrecipes/recipes"
	"github.com/zkrecipes/zkrecipes/session"
)

// rollbackTimeout bounds the releases of a rolled-back multi-lock; what is not
// deleted by then is left to the session's guaranteed-delete queue.
const rollbackTimeout = 5 * time.Second

// Multi holds several locks as one (Curator's InterProcessMultiLock): Lock
// takes them all, in the order given, under one ctx, or none; the lease's
// Release releases them in reverse order. Locks that share a session and those
// on different sessions may be mixed. To avoid deadlocks between processes,
// give the locks in the same order everywhere. A Multi is safe for concurrent
// use (but see Reentrant for the goroutine rules of reentrant locks: a
// multi-lock holding a Reentrant must be released by the goroutine that
// locked it).
type Multi struct {
	locks []Locker
}

// NewMulti returns a multi-lock over locks (at least one, none nil: neither
// a nil Locker nor a typed nil such as a (*Mutex)(nil)); otherwise it returns
// an error matching session.ErrBadArgument that names the first nil lock.
func NewMulti(locks ...Locker) (*Multi, error) {
	if len(locks) == 0 {
		return nil, fmt.Errorf("mutex: multi-lock: %w: no locks", session.ErrBadArgument)
	}
	for i, l := range locks {
		if l == nil {
			return nil, fmt.Errorf("mutex: multi-lock: %w: lock %d is nil", session.ErrBadArgument, i)
		}
		if isNil(l) {
			return nil, fmt.Errorf("mutex: multi-lock: %w: lock %d is a nil %T", session.ErrBadArgument, i, l)
		}
	}
	return &Multi{locks: append([]Locker(nil), locks...)}, nil
}

// Lock takes every lock in order, blocking within ctx. If one fails (ctx
// ends, a lock is closed, the session is lost, ...), the locks already taken
// are released in reverse order before Lock returns the error (which names
// the lock that failed and wraps its error, e.g. context.Canceled). A nil ctx
// gives session.ErrBadArgument before any lock is tried.
func (m *Multi) Lock(ctx context.Context) (*MultiLease, error) {
	return m.lock(ctx, false)
}

// TryLock takes every lock only if none needs waiting; otherwise it rolls
// back and returns an error matching recipes.ErrBusy.
func (m *Multi) TryLock(ctx context.Context) (*MultiLease, error) {
	return m.lock(ctx, true)
}

func (m *Multi) lock(ctx context.Context, try bool) (*MultiLease, error) {
	if ctx == nil {
		return nil, fmt.Errorf("mutex: multi-lock: %w: nil context", session.ErrBadArgument)
	}
	held := make([]*Lease, 0, len(m.locks))
	for _, lk := range m.locks {
		var l *Lease
		var err error
		if try {
			l, err = lk.TryLock(ctx)
		} else {
			l, err = lk.Lock(ctx)
		}
		if err == nil && l.Err() != nil {
			// Lost before we even finished taking the others.
			err = l.Err()
			held = append(held, l)
		}
		if err != nil {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rollbackTimeout)
			rerr := releaseReverse(rctx, held)
			cancel()
			err = engine.NewError("mutex", lk.Path(), err) // names the lock that failed
			if rerr != nil {
				err = fmt.Errorf("%w (rollback: %w)", err, rerr)
			}
			return nil, err
		}
		held = append(held, l)
	}
	ml := &MultiLease{leases: held}
	ml.ctx, ml.cancel = context.WithCancelCause(context.Background())
	for _, l := range held {
		l := l
		ml.stops = append(ml.stops, context.AfterFunc(l.Context(), func() { ml.cancel(l.Err()) }))
	}
	return ml, nil
}

// isNil reports whether v, a non-nil interface value, holds a nil pointer,
// func, map, slice, channel or interface (a typed nil).
func isNil(v any) bool {
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Pointer, reflect.Func, reflect.Map, reflect.Slice, reflect.Chan, reflect.Interface, reflect.UnsafePointer:
		return rv.IsNil()
	}
	return false
}

func releaseReverse(ctx context.Context, leases []*Lease) error {
	var errs []error
	for i := len(leases) - 1; i >= 0; i-- {
		if err := leases[i].Release(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// MultiLease is the handle of a held multi-lock. Done is closed as soon as
// any of its locks is lost (or at Release); Err is the first cause. A nil
// *MultiLease behaves as one that has ended: Done is closed, Err, the cause
// of Context and Release's error match session.ErrBadArgument, Leases is nil.
type MultiLease struct {
	leases []*Lease
	ctx    context.Context
	cancel context.CancelCauseFunc
	stops  []func() bool

	once sync.Once
}

// Done returns a channel closed when any lock of the set ends.
func (ml *MultiLease) Done() <-chan struct{} { return ml.Context().Done() }

// Err returns nil while every lock is held, then the cause of the first end.
func (ml *MultiLease) Err() error {
	if ml == nil {
		return errNilMultiLease()
	}
	if ml.ctx.Err() == nil {
		return nil
	}
	return context.Cause(ml.ctx)
}

// Context returns a context canceled when any lock of the set ends, with
// context.Cause(ctx) == Err().
func (ml *MultiLease) Context() context.Context {
	if ml == nil {
		return engine.EndedContext(errNilMultiLease())
	}
	return ml.ctx
}

// errNilMultiLease is the error of a nil *MultiLease.
func errNilMultiLease() error {
	return fmt.Errorf("mutex: %w: nil multi-lease", session.ErrBadArgument)
}

// Leases returns the leases of the set, in locking order.
func (ml *MultiLease) Leases() []*Lease {
	if ml == nil {
		return nil
	}
	return append([]*Lease(nil), ml.leases...)
}

// Release releases every lock in reverse order (see Lease.Release) and returns
// the errors joined. If the set holds a Reentrant and the calling
// goroutine is not the one that locked the set, Release releases nothing and
// returns an error matching recipes.ErrNotOwner: every lock of the set stays held,
// and Release may be called again from the right goroutine. Otherwise every
// lock is released and Done is closed, with cause recipes.ErrReleased unless a lock
// was lost before (also when a delete failed); calling Release again releases
// nothing more. A nil ctx is taken as context.Background(), as by
// Lease.Release.
func (ml *MultiLease) Release(ctx context.Context) error {
	if ml == nil {
		return errNilMultiLease()
	}
	// Check every owner before releasing anything: a refusal halfway
	// through would leave the set half released.
	for _, l := range ml.leases {
		if err := l.checkOwner(); err != nil {
			return err
		}
	}
	err := releaseReverse(ctx, ml.leases)
	ml.once.Do(func() {
		ml.cancel(recipes.ErrReleased)
		for _, stop := range ml.stops {
			stop()
		}
	})
	return err
}
