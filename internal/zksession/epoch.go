package zksession

import (
	"context"
	"fmt"
)

// Epoch is one ZooKeeper session as this Session saw it. A new Epoch begins at
// Connected and at every Reconnected that follows a Lost: with a new session
// id, or with the same id coming back after the local timer declared Lost (the
// old epoch stays over; see the package documentation). Recipes record the
// Epoch under which they create an ephemeral node and bind later operations on
// that node to it, so that nothing believes a node is its own when it belongs
// to a session it never saw.
//
// An Epoch is immutable apart from its end; it is safe for concurrent use. A
// nil *Epoch behaves as an epoch that has ended: Lost is closed, Err and the
// cause of Context match ErrBadEpoch, SessionID and Seq are 0.
type Epoch struct {
	s      *Session
	seq    int64
	id     int64
	ctx    context.Context
	cancel context.CancelCauseFunc
}

func newEpoch(s *Session, seq, id int64) *Epoch {
	ctx, cancel := context.WithCancelCause(context.Background())
	return &Epoch{s: s, seq: seq, id: id, ctx: ctx, cancel: cancel}
}

// SessionID returns the ZooKeeper session id of the epoch: the ephemeralOwner
// of every ephemeral node created under it.
func (e *Epoch) SessionID() int64 {
	if e == nil {
		return 0
	}
	return e.id
}

// Seq numbers the epochs of a Session: 1 for the first, increasing by one at
// each new epoch.
func (e *Epoch) Seq() int64 {
	if e == nil {
		return 0
	}
	return e.seq
}

// Lost returns a channel that is closed when the epoch is over (Lost or
// Closed).
func (e *Epoch) Lost() <-chan struct{} { return e.Context().Done() }

// Err returns nil while the epoch is live; after it ends, an error matching
// ErrLost or ErrClosed (with the session id in its text).
func (e *Epoch) Err() error {
	if e == nil {
		return errNilEpoch()
	}
	if e.ctx.Err() == nil {
		return nil
	}
	return context.Cause(e.ctx)
}

// Context returns a context that is canceled when the epoch ends;
// context.Cause gives the same error as Err. It is what LeaseContext returns
// under the SessionOnly policy.
func (e *Epoch) Context() context.Context {
	if e == nil {
		ctx, cancel := context.WithCancelCause(context.Background())
		cancel(errNilEpoch())
		return ctx
	}
	return e.ctx
}

// String returns e.g. "epoch 2 (session_id 0x1000a2b3c4d0005)".
func (e *Epoch) String() string {
	if e == nil {
		return "epoch <nil>"
	}
	return fmt.Sprintf("epoch %d (session_id %s)", e.seq, fmtID(e.id))
}

func (e *Epoch) live() bool { return e.ctx.Err() == nil }

// errNilEpoch is the error of a nil *Epoch.
func errNilEpoch() error { return fmt.Errorf("%w: nil epoch", ErrBadEpoch) }

// causeErr wraps a sentinel (ErrSuspended, ErrLost, ErrClosed) with the
// session id it concerns; errors.Is still matches the sentinel.
func causeErr(sentinel error, id int64) error {
	return fmt.Errorf("%w (session_id %s)", sentinel, fmtID(id))
}
