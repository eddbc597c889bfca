package zksession

// Writes that say whether they may have applied. A write whose answer never
// comes may or may not have been applied by the server; one that was never
// written to a connection was not. go-zookeeper v1.0.4 does not tell the two
// apart: it fails with zk.ErrConnectionClosed both the requests it had
// written when a connection ended (flushRequests) and one it took from its
// queue after the connection ended, unwritten (sendData), and it fails with
// zk.ErrNoServer the requests still queued after a pass over the servers in
// which none took the connection (flushUnsentRequests: never written). The
// wire counts the write requests it hands to a socket (wire.writes, counted
// before the first byte goes out), so a write that failed with
// zk.ErrConnectionClosed while that count did not move since the write was
// handed to go-zookeeper was never written. Whenever the count moved (another
// write went out meanwhile, perhaps this one), the write counts as sent: the
// answer is "unknown", never "not sent", for a write that may have applied.
//
// A write also waits for the connection before it is handed to go-zookeeper
// (waitSendable): a request queued while the connection is down would stay
// in go-zookeeper's queue after its caller's ctx ended and be sent on the
// next connection, applied after the caller was told it failed.

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/cenkalti/backoff/v4"
	"github.com/go-zookeeper/zk"
)

// isWriteOp reports whether opcode is a request that changes the server's
// data: create (1), delete (2), setData (5), setACL (7), check (13), multi
// (14), create2 (15), reconfig (16), createContainer (19), deleteContainer
// (20), createTTL (21).
func isWriteOp(opcode int32) bool {
	switch opcode {
	case 1, 2, 5, 7, 13, 14, 15, 16, 19, 20, 21:
		return true
	}
	return false
}

// WritesSent returns how many write requests (creates, deletes, sets,
// transactions) the Session has handed to a connection so far, each counted
// before its first byte goes out. A caller that reads it before and after a
// span learns whether any write can have reached the server in between (a
// Node's SetData, which its goroutine writes, uses it).
func (s *Session) WritesSent() uint64 { return s.wire.writes.Load() }

// answerLost reports whether a write request that op failed with err may
// have reached the server: err is not the server's answer, and the request
// may have been written. sent is WritesSent as the request was handed on.
func (s *Session) answerLost(err error, sent uint64) bool {
	switch {
	case err == nil:
		return false
	case errors.Is(err, zk.ErrNoServer):
		// Failed in go-zookeeper's queue: never written.
		return false
	case errors.Is(err, zk.ErrSessionMoved):
		// The server's answer: not applied.
		return false
	case errors.Is(err, zk.ErrConnectionClosed):
		// Written and flushed, or flushed unwritten (see above). At Close,
		// go-zookeeper may write the request after failing it.
		return s.wire.writes.Load() != sent || s.isClosed()
	case errors.Is(err, zk.ErrClosing):
		return true
	}
	// A failed socket write (its bytes may have gone out) and the like.
	return IsConnectionError(err)
}

// waitSendable blocks until a write handed to go-zookeeper goes out at once:
// the connection is up on ep's session, and the wire has not seen it break.
// It returns ctx's error, ErrClosed, ep's error once ep ended, or ErrStopped
// once the channel that stop returns (if stop is not nil; asked for only if
// the call has to wait) is closed. Nothing is sent when it fails.
func (s *Session) waitSendable(ctx context.Context, ep *Epoch, stop func() <-chan struct{}) error {
	var stopped <-chan struct{}
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		if stopped != nil {
			select {
			case <-stopped:
				return ErrStopped
			default:
			}
		}
		s.mu.Lock()
		if s.closing {
			s.mu.Unlock()
			return ErrClosed
		}
		if err := ep.Err(); err != nil {
			s.mu.Unlock()
			return err
		}
		if s.connUp && !s.broken && s.epoch == ep {
			s.mu.Unlock()
			return nil
		}
		ch := s.changed
		s.mu.Unlock()
		if stopped == nil && stop != nil {
			stopped = stop()
		}
		select {
		case <-ch:
		case <-ep.Lost():
		case <-s.done:
		case <-ctx.Done():
		case <-stopped:
		}
	}
}

// Write follows one write through the attempts of RetryWrite or
// RetryWriteAcrossSessions, and learns whether one of them may have reached
// the server without its answer reaching the caller: a connection error
// after the request may have been written, or ctx's end (or Close) while it
// was in flight. An attempt that was never sent (the connection was down,
// go-zookeeper failed it unwritten) does not count. The zero value is
// ready; use one Write per call. Safe for concurrent use.
type Write struct {
	lost atomic.Pointer[error] // why the first such attempt ended
}

// Unknown reports whether an attempt may have been applied unanswered.
func (w *Write) Unknown() bool { return w != nil && w.lost.Load() != nil }

// Lost returns why the first attempt that may have been applied unanswered
// ended (a connection error, ctx's error or ErrClosed), or nil.
func (w *Write) Lost() error {
	if w == nil {
		return nil
	}
	if p := w.lost.Load(); p != nil {
		return *p
	}
	return nil
}

// Result returns err, wrapped so that it matches ErrUnknownOutcome when an
// attempt may have been applied unanswered (Unknown); nil stays nil. Use it
// for an error that does not rule the earlier attempts out (a version that
// moved may have been moved by one of them).
func (w *Write) Result(err error) error {
	if err == nil || !w.Unknown() || errors.Is(err, ErrUnknownOutcome) {
		return err
	}
	if lost := w.Lost(); !errors.Is(err, lost) {
		return fmt.Errorf("%w (an attempt was sent and its answer lost: %v): %w", ErrUnknownOutcome, lost, err)
	}
	return fmt.Errorf("%w: %w", ErrUnknownOutcome, err)
}

// note records an attempt that failed with err; sent is WritesSent as it
// was handed on.
func (w *Write) note(s *Session, err error, sent uint64) {
	if w != nil && s.answerLost(err, sent) {
		lost := err // a copy: &err would put err on the heap at every call
		w.lost.CompareAndSwap(nil, &lost)
	}
}

// abandoned records an attempt left in flight because of why (ctx's error
// or ErrClosed).
func (w *Write) abandoned(why error) {
	if w != nil {
		w.lost.CompareAndSwap(nil, &why)
	}
}

// RetryWrite is Retry for a write op (one write request per attempt) whose
// repeat is harmless (conditional on a version, or idempotent), recording in
// w whether an attempt may have been applied unanswered. Before each attempt
// it waits until the connection is up and unbroken (see SendOnce). Errors as
// Retry's; pass them through w.Result.
func (s *Session) RetryWrite(ctx context.Context, ep *Epoch, w *Write, op func(conn *zk.Conn) error) error {
	if w == nil {
		return fmt.Errorf("%w: nil write", ErrBadArgument)
	}
	return s.retry(ctx, ep, op, w)
}

// RetryWriteAcrossSessions is RetryAcrossSessions for a write op whose
// repeat is harmless, recording in w as RetryWrite does.
func (s *Session) RetryWriteAcrossSessions(ctx context.Context, w *Write, op func(conn *zk.Conn) error) error {
	if w == nil {
		return fmt.Errorf("%w: nil write", ErrBadArgument)
	}
	return s.retryAcrossSessions(ctx, op, w)
}

// SendOnce sends the one write request that op makes (a create, set, delete
// or multi) on ep's session, and sends it again only after an attempt that
// was certainly not written (go-zookeeper failed it in its queue): a write
// is never repeated once it may have reached the server.
//
// It waits within ctx until the connection is up on ep and unbroken before
// handing op on (a write queued on a dead connection would be sent on the
// next one, after its caller gave up). A wait that ends sends nothing and
// returns ctx's error, ErrClosed, ep's error (ErrLost) once ep ended, or
// ErrStopped once the channel that stop returns (stop may be nil; it is
// called only if SendOnce has to wait) is closed.
//
// Once op is handed on, SendOnce returns op's result when it comes: a
// success or the server's refusal as op returned it; an error matching
// ErrUnknownOutcome and the connection error when the request may have been
// written and its answer was lost; an error matching ErrUnknownOutcome and
// ctx's error (or ErrClosed) when ctx ended (or Close began) while it was in
// flight, which then goes on, its result discarded. op runs on a goroutine
// of the Session and must not write to memory the caller reads after an
// error. Safe for concurrent use.
func SendOnce[T any](ctx context.Context, s *Session, ep *Epoch, stop func() <-chan struct{}, op func(*zk.Conn) (T, error)) (T, error) {
	var zero T
	switch {
	case s == nil:
		return zero, fmt.Errorf("%w: nil session", ErrBadArgument)
	case ctx == nil:
		return zero, fmt.Errorf("%w: nil context", ErrBadArgument)
	case op == nil:
		return zero, fmt.Errorf("%w: nil op", ErrBadArgument)
	}
	if err := s.checkEpoch(ep); err != nil {
		return zero, err
	}
	var b backoff.BackOff
	for attempt := 1; ; attempt++ {
		if err := s.waitSendable(ctx, ep, stop); err != nil {
			return zero, fmt.Errorf("waiting for the connection, nothing sent: %w", err)
		}
		sent := s.wire.writes.Load()
		v, err, end := callEnded(ctx, s, op, nil)
		switch {
		case end == callNotStarted:
			return zero, err
		case end == callAbandoned:
			return zero, fmt.Errorf("%w: sent, and the call ended before the answer came: %w", ErrUnknownOutcome, err)
		case s.answerLost(err, sent):
			return v, fmt.Errorf("%w: sent, and the answer was lost: %w", ErrUnknownOutcome, err)
		case !IsConnectionError(err):
			return v, err // an answer: applied, or refused
		}
		// Not written, or refused by a server the session has left
		// (zk.ErrSessionMoved): send it again once the connection is up.
		if b == nil {
			b = s.cfg.retry()
		}
		d := b.NextBackOff()
		if d == backoff.Stop {
			return zero, fmt.Errorf("gave up after %d attempts, none sent: %w", attempt, err)
		}
		s.NoteRetry(err)
		if e := s.sleep(ctx, d, ep); e != nil {
			return zero, retryStopped(e, err)
		}
	}
}
