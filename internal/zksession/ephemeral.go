package zksession

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/go-zookeeper/zk"
	"go.uber.org/zap"
)

type createResult struct {
	path string
	stat *zk.Stat
	err  error
}

// createOp hands the result of a create from its worker goroutine to the
// caller, or tells the worker that the caller has gone so it undoes the
// create itself.
type createOp struct {
	mu    sync.Mutex
	state int // 0 pending, 1 delivered, 2 abandoned
	res   chan createResult
}

func (o *createOp) deliver(r createResult) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.state != 0 {
		return false
	}
	o.state = 1
	o.res <- r
	return true
}

func (o *createOp) abandon() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.state != 0 {
		return false
	}
	o.state = 2
	return true
}

// createEphemeral implements Session.CreateEphemeral.
func (s *Session) createEphemeral(ctx context.Context, ep *Epoch, p string, data []byte, flags int32) (string, *zk.Stat, error) {
	if ctx == nil {
		return "", nil, fmt.Errorf("create %s: %w: nil context", p, ErrBadArgument)
	}
	if err := ValidatePath(p); err != nil {
		return "", nil, err
	}
	switch flags {
	case 0, zk.FlagEphemeral:
		flags = zk.FlagEphemeral
	case zk.FlagSequence, zk.FlagEphemeralSequential:
		flags = zk.FlagEphemeralSequential
	default:
		return "", nil, fmt.Errorf("create %s: %w: flags %d (only zk.FlagSequence may be added)", p, ErrBadArgument, flags)
	}
	if err := s.checkEpoch(ep); err != nil {
		return "", nil, fmt.Errorf("create %s: %w", p, err)
	}
	if err := ctx.Err(); err != nil {
		return "", nil, fmt.Errorf("create %s: %w", p, err)
	}
	op := &createOp{res: make(chan createResult, 1)}
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		return "", nil, fmt.Errorf("create %s: %w", p, ErrClosed)
	}
	s.wg.Add(1)
	s.mu.Unlock()
	go s.createWorker(op, ep, p, data, flags)

	var why error
	select {
	case r := <-op.res:
		return r.path, r.stat, r.err
	case <-ep.Lost():
		why = ep.Err()
	case <-ctx.Done():
		why = ctx.Err()
	case <-s.done:
		why = ErrClosed
	}
	if !op.abandon() {
		r := <-op.res
		return r.path, r.stat, r.err
	}
	return "", nil, fmt.Errorf("create %s: %w (if the request still runs, its node will be deleted)", p, why)
}

func (s *Session) createWorker(op *createOp, ep *Epoch, p string, data []byte, flags int32) {
	defer s.wg.Done()
	lg := s.lg.With(zap.String("path", p), hexID(ep.id))
	created, err := s.conn.Create(p, NodeData(data), flags, s.cfg.acl)
	if err != nil {
		if errors.Is(err, zk.ErrSessionExpired) {
			err = fmt.Errorf("%w: %w", causeErr(ErrLost, ep.id), err)
		}
		op.deliver(createResult{err: &OpError{Op: "create", Path: p, Err: err}})
		return
	}
	lg = lg.With(zap.String("node", created))

	// Verify that the node is ep's. Retry the read while ep is live.
	b := s.cfg.retry()
	for {
		ok, st, err := s.conn.Exists(created)
		switch {
		case err == nil && ok && st.EphemeralOwner == ep.id && ep.live():
			if op.deliver(createResult{path: created, stat: st}) {
				return
			}
			switch err := s.undoCreate(lg, ep, created, "create finished after the caller gave up"); {
			case err == nil, errors.Is(err, ErrClosed):
				// Close ends the session, and the server deletes its ephemerals.
			default:
				// The caller has gone: nobody else sees this failure.
				lg.Error("create finished after the caller gave up; could not delete the node", zap.Error(err))
			}
			return
		case err == nil && !ok:
			e := fmt.Errorf("create %s: node %s vanished before it was verified: %w", p, created, zk.ErrNoNode)
			if ep.Err() != nil {
				e = fmt.Errorf("%w: %w", e, ep.Err())
			}
			op.deliver(createResult{err: e})
			return
		case err == nil:
			owner := st.EphemeralOwner
			why := "create ran on another session"
			if owner == ep.id {
				why = "epoch ended before the create was verified"
			}
			uerr := s.undoCreate(lg, ep, created, why)
			e := fmt.Errorf("create %s: node %s has owner %s, epoch %v: %w", p, created, fmtID(owner), ep, ErrSessionChanged)
			if ep.Err() != nil {
				e = fmt.Errorf("%w: %w", e, ep.Err())
			}
			if uerr != nil {
				e = fmt.Errorf("%w (deleting it failed: %w)", e, uerr)
			}
			s.deliverUndone(lg, op, e, uerr)
			return
		case retryable(err) || errors.Is(err, zk.ErrSessionExpired):
			// Cannot tell yet; wait for a connection (any session) and look again.
			d := b.NextBackOff()
			if d == backoff.Stop {
				d = time.Second
			}
			werr := s.sleep(context.Background(), d, nil)
			if werr == nil {
				werr = s.waitUp(context.Background(), nil)
			}
			if werr != nil {
				op.deliver(createResult{err: fmt.Errorf("create %s: node %s not verified: %w", p, created, werr)})
				return
			}
		default:
			uerr := s.undoCreate(lg, ep, created, "create could not be verified")
			e := fmt.Errorf("create %s: node %s not verified: %w", p, created, err)
			if uerr != nil {
				e = fmt.Errorf("%w (deleting it failed: %w)", e, uerr)
			}
			s.deliverUndone(lg, op, e, uerr)
			return
		}
	}
}

// deliverUndone hands the error e of a create that was undone (uerr: how the
// undo failed, or nil) to the caller; if the caller has gone, nobody else
// sees a failed undo, so it is logged instead (not both: STYLE §4).
func (s *Session) deliverUndone(lg *zap.Logger, op *createOp, e, uerr error) {
	if op.deliver(createResult{err: e}) || uerr == nil || errors.Is(uerr, ErrClosed) {
		return
	}
	lg.Error("could not undo a create: the node stays until its session ends", zap.Error(uerr))
}

// undoCreate deletes the node created at path by a create bound to ep, unless
// it is gone or now belongs to a session that is neither ep's nor the
// connection's current one. It retries connection errors until done, the
// Session closes, or the node's session ends (the server then removes it).
// A failure is returned, not logged (above Debug): the caller reports it.
func (s *Session) undoCreate(lg *zap.Logger, ep *Epoch, path, why string) error {
	b := s.cfg.retry()
	for attempt := 1; ; attempt++ {
		if err := s.waitUp(context.Background(), nil); err != nil {
			lg.Debug(why+"; could not delete the node", zap.Error(err))
			return err
		}
		ok, st, err := s.conn.Exists(path)
		if err == nil {
			if !ok {
				lg.Warn(why+"; the node is gone", zap.Int("attempt", attempt))
				return nil
			}
			if owner := st.EphemeralOwner; owner != ep.id && owner != s.conn.SessionID() {
				lg.Warn(why+"; the node now belongs to a third session, left alone",
					zap.String("owner", fmtID(owner)))
				return nil
			}
			err = s.conn.Delete(path, st.Version)
			if err == nil || errors.Is(err, zk.ErrNoNode) {
				lg.Warn(why+"; node deleted",
					zap.String("owner", fmtID(st.EphemeralOwner)), zap.Int("attempt", attempt))
				return nil
			}
			if errors.Is(err, zk.ErrBadVersion) {
				continue
			}
		}
		if !retryable(err) && !errors.Is(err, zk.ErrSessionExpired) {
			lg.Debug(why+"; could not delete the node", zap.Error(err), zap.Int("attempt", attempt))
			return err
		}
		d := b.NextBackOff()
		if d == backoff.Stop {
			d = time.Second
		}
		if err := s.sleep(context.Background(), d, nil); err != nil {
			lg.Debug(why+"; could not delete the node", zap.Error(err))
			return err
		}
	}
}
