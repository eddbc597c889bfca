package zksession

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strings"

	"github.com/cenkalti/backoff/v4"
	"github.com/go-zookeeper/zk"
	"go.uber.org/zap"
)

// checkEpoch returns nil if ep is a live epoch of s.
func (s *Session) checkEpoch(ep *Epoch) error {
	if ep == nil {
		return fmt.Errorf("%w: nil epoch", ErrBadEpoch)
	}
	if ep.s != s {
		return fmt.Errorf("%w: %v belongs to another session", ErrBadEpoch, ep)
	}
	select {
	case <-s.done:
		return ErrClosed
	default:
	}
	return ep.Err()
}

// waitUp blocks until the connection is up on ep (ep nil: on any live epoch),
// ep ends, s closes or ctx ends.
func (s *Session) waitUp(ctx context.Context, ep *Epoch) error {
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		s.mu.Lock()
		if s.closing {
			s.mu.Unlock()
			return ErrClosed
		}
		if ep != nil {
			if err := ep.Err(); err != nil {
				s.mu.Unlock()
				return err
			}
			if s.connUp && s.epoch == ep {
				s.mu.Unlock()
				return nil
			}
		} else if s.connUp && s.epoch != nil && s.epoch.live() {
			s.mu.Unlock()
			return nil
		}
		ch := s.changed
		s.mu.Unlock()
		var lost <-chan struct{}
		if ep != nil {
			lost = ep.Lost()
		}
		select {
		case <-ch:
		case <-lost:
		case <-s.done:
		case <-ctx.Done():
		}
	}
}

// retry implements Session.Retry and, with w, RetryWrite: w (nil for a
// read) learns of every attempt that may have reached the server unanswered.
func (s *Session) retry(ctx context.Context, ep *Epoch, op func(conn *zk.Conn) error, w *Write) error {
	if op == nil {
		return fmt.Errorf("%w: nil op", ErrBadArgument)
	}
	return s.retryOn(ctx, ep, op, nil, w)
}

// RetryOp is Retry for an Op, made by its caller without a closure: each
// attempt runs op.Run, and op.Late gets the error of an attempt left
// running when ctx ended or Close began (its result is discarded). The same
// rules as Retry's apply.
func (s *Session) RetryOp(ctx context.Context, ep *Epoch, op Op) error {
	if op == nil {
		return fmt.Errorf("%w: nil op", ErrBadArgument)
	}
	return s.retryOn(ctx, ep, nil, op, nil)
}

// retryOn is retry of op, or of iop when op is nil.
func (s *Session) retryOn(ctx context.Context, ep *Epoch, op func(conn *zk.Conn) error, iop Op, w *Write) error {
	if ctx == nil {
		return fmt.Errorf("%w: nil context", ErrBadArgument)
	}
	if err := s.checkEpoch(ep); err != nil {
		return err
	}
	var b backoff.BackOff // made at the first failure: most operations succeed at once
	var last error        // the last attempt's error, wrapped when ctx stops us
	for attempt := 1; ; attempt++ {
		wait := s.waitUp
		if w != nil {
			wait = func(ctx context.Context, ep *Epoch) error { return s.waitSendable(ctx, ep, nil) }
		}
		if err := wait(ctx, ep); err != nil {
			return retryStopped(err, last)
		}
		sent := s.wire.writes.Load()
		err, end := callErrEnded(ctx, s, op, iop)
		if end == callAbandoned {
			w.abandoned(err)
		}
		if end != callDone || (err != nil && (err == ctx.Err() || err == ErrClosed)) {
			// ctx ended (or Close began) before op started, or while it was
			// in flight: then op goes on on a goroutine of the Session and
			// its result is discarded.
			return retryStopped(err, last)
		}
		w.note(s, err, sent)
		last = err
		if err == nil {
			// go-zookeeper sets the new session id before it sends anything
			// on the new session, and the id never goes back: if it is still
			// ep's now, op ran on ep's session.
			if now := s.conn.SessionID(); now != ep.id || !ep.live() {
				why := ep.Err()
				if why == nil {
					why = causeErr(ErrLost, ep.id) // the state goroutine has not caught up yet
				}
				return fmt.Errorf("%w: the operation succeeded, but the connection now has session %s (%v): %w",
					ErrSessionChanged, fmtID(now), ep, why)
			}
			return nil
		}
		if errors.Is(err, zk.ErrSessionExpired) {
			return fmt.Errorf("%w: %w", causeErr(ErrLost, ep.id), err)
		}
		if errors.Is(err, zk.ErrClosing) && s.isClosed() {
			return fmt.Errorf("%w: %w", ErrClosed, err)
		}
		if !retryable(err) {
			return err
		}
		if e := s.checkEpoch(ep); e != nil {
			return retryStopped(e, err)
		}
		if b == nil {
			b = s.cfg.retry()
		}
		d := b.NextBackOff()
		if d == backoff.Stop {
			return fmt.Errorf("gave up after %d attempts: %w", attempt, err)
		}
		s.NoteRetry(err)
		if ce := s.lg.Check(zap.DebugLevel, "retrying"); ce != nil {
			ce.Write(zap.Int("attempt", attempt), zap.Duration("backoff", d), zap.Error(err), hexID(ep.id))
		}
		if e := s.sleep(ctx, d, ep); e != nil {
			return retryStopped(e, err)
		}
	}
}

// retryStopped wraps why a retry loop stopped with the last op error, if any.
func retryStopped(why, last error) error {
	if last == nil {
		return why
	}
	return fmt.Errorf("%w (last error: %w)", why, last)
}

func (s *Session) isClosed() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// ensureContainers implements Session.EnsureContainers.
func (s *Session) ensureContainers(ctx context.Context, p string, once func(p, ns string) error) error {
	if ctx == nil {
		return fmt.Errorf("directory %s: %w: nil context", p, ErrBadArgument)
	}
	if err := ValidatePath(p); err != nil {
		return err
	}
	ns := s.cfg.namespace
	if ns != "" && p != ns && !strings.HasPrefix(p, ns+"/") {
		return fmt.Errorf("%w: path %q is not under the namespace %q (pass the result of Path)", ErrBadArgument, p, ns)
	}
	b := s.cfg.retry()
	for attempt := 1; ; attempt++ {
		if err := s.waitUp(ctx, nil); err != nil {
			return fmt.Errorf("directory %s: %w", p, err)
		}
		_, err := call(ctx, s, func(*zk.Conn) (struct{}, error) { return struct{}{}, once(p, ns) }, nil)
		if err != nil && (err == ctx.Err() || err == ErrClosed) {
			// A late create of a container is harmless: the server reaps it.
			return fmt.Errorf("directory %s: %w", p, err)
		}
		if err == nil {
			return nil
		}
		if !retryable(err) && !errors.Is(err, zk.ErrNoNode) && !errors.Is(err, zk.ErrSessionExpired) {
			return fmt.Errorf("directory %s: %w", p, err)
		}
		d := b.NextBackOff()
		if d == backoff.Stop {
			return fmt.Errorf("directory %s: gave up after %d attempts: %w", p, attempt, err)
		}
		if e := s.sleep(ctx, d, nil); e != nil {
			return fmt.Errorf("directory %s: %w (last error: %w)", p, e, err)
		}
	}
}

func (s *Session) ensureOnce(p, ns string) error {
	ok, _, err := s.conn.Exists(p)
	if err != nil || ok {
		return err
	}
	for i := 1; i <= len(p); i++ {
		if i < len(p) && p[i] != '/' {
			continue
		}
		if err := s.createDir(p[:i], ns); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return &OpError{Op: "create", Path: p[:i], Err: err}
		}
	}
	return nil
}

// createMissing implements CreateContainers' creates: from p upwards while
// the parent is missing, then the missing ones top-down.
func (s *Session) createMissing(p, ns string) error {
	var missing []string // deepest first
	for cur := p; ; {
		err := s.createDir(cur, ns)
		if err == nil || errors.Is(err, zk.ErrNodeExists) {
			break
		}
		up := path.Dir(cur)
		if !errors.Is(err, zk.ErrNoNode) || up == "/" || up == cur {
			return &OpError{Op: "create", Path: cur, Err: err}
		}
		missing = append(missing, cur)
		cur = up
	}
	for i := len(missing) - 1; i >= 0; i-- {
		if err := s.createDir(missing[i], ns); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return &OpError{Op: "create", Path: missing[i], Err: err}
		}
	}
	return nil
}

// createDir creates the directory node p: a persistent node for the
// namespace and its parents, a container below it, with empty data as
// Curator's parents (never a null: see NodeData). An existing node under a
// parent we may not write to counts as existing.
func (s *Session) createDir(p, ns string) error {
	var err error
	if len(p) <= len(ns) {
		_, err = s.conn.Create(p, NodeData(nil), zk.FlagPersistent, s.cfg.acl)
	} else {
		// Not CreateContainer: the wire makes this create a container's
		// (containerBook).
		_, err = s.conn.Create(p, NodeData(nil), zk.FlagContainer, s.cfg.acl)
	}
	if errors.Is(err, zk.ErrNoAuth) {
		// The server checks the parent's ACL before existence.
		var ok bool
		if ok, _, err = s.conn.Exists(p); err == nil && !ok {
			err = zk.ErrNoAuth
		} else if err == nil {
			err = zk.ErrNodeExists
		}
	}
	return err
}
