package session

import (
	"errors"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/go-zookeeper/zk"
	"go.uber.org/zap"
)

// gdItem is one queued guaranteed delete.
type gdItem struct {
	id      int64 // session that owns the node
	path    string
	version int32
	attempt int
}

// GuaranteedDelete queues the deletion of the ephemeral node path (full
// server path) owned by ep's session, with version (-1 for any). One
// background goroutine deletes it as soon as the connection is up on that
// session id, retrying connection-level errors across disconnects. It drops
// the item, without error, once the connection has a different session id
// (the server removes a lost session's ephemerals itself; note that after a
// local-timer Lost the same id may come back, and then the delete still
// happens). A missing node counts as deleted; any other failure is logged at
// error level and dropped. Close lets the queue drain for at most 2 s, then
// logs and drops what is left. Never blocks; safe for concurrent use.
func (s *Session) GuaranteedDelete(ep *Epoch, path string, version int32) {
	lg := s.lg.With(zap.String("path", path))
	if ep == nil || ep.s != s {
		lg.Error("guaranteed delete dropped", zap.Error(ErrBadEpoch))
		return
	}
	if err := ValidatePath(path); err != nil {
		lg.Error("guaranteed delete dropped", zap.Error(err), hexID(ep.id))
		return
	}
	if s.isClosed() {
		lg.Debug("guaranteed delete dropped: session closed", hexID(ep.id))
		return
	}
	s.gdMu.Lock()
	s.gdItems = append(s.gdItems, &gdItem{id: ep.id, path: path, version: version})
	s.gdMu.Unlock()
	if ce := lg.Check(zap.DebugLevel, "guaranteed delete queued"); ce != nil {
		ce.Write(hexID(ep.id))
	}
	select {
	case s.gdKick <- struct{}{}:
	default:
	}
}

// runDeletes is the guaranteed-delete goroutine.
func (s *Session) runDeletes() {
	defer close(s.gdDone)
	var (
		b        backoff.BackOff
		deadline <-chan time.Time
		done     = s.done
	)
	for {
		s.gdMu.Lock()
		items := s.gdItems
		s.gdItems = nil
		s.gdMu.Unlock()

		up := s.conn.State() == zk.StateHasSession
		cur := s.conn.SessionID()
		var keep []*gdItem
		failed := false
		for _, it := range items {
			lg := s.lg.With(zap.String("path", it.path), hexID(it.id))
			if !up {
				keep = append(keep, it)
				continue
			}
			if it.id != cur {
				lg.Debug("guaranteed delete dropped: session changed, the server removes its ephemerals",
					zap.String("current_session_id", fmtID(cur)))
				continue
			}
			it.attempt++
			err := s.conn.Delete(it.path, it.version)
			switch {
			case err == nil, errors.Is(err, zk.ErrNoNode):
				lg.Debug("guaranteed delete done", zap.Int("attempt", it.attempt))
			case retryable(err):
				lg.Debug("guaranteed delete failed, will retry", zap.Int("attempt", it.attempt), zap.Error(err))
				keep = append(keep, it)
				failed = true
			default:
				lg.Error("guaranteed delete failed", zap.Int("attempt", it.attempt), zap.Error(err))
			}
		}
		s.gdMu.Lock()
		s.gdItems = append(keep, s.gdItems...)
		remaining := len(s.gdItems)
		s.gdMu.Unlock()

		if deadline != nil && remaining == 0 {
			return
		}

		var wait <-chan time.Time
		var timer *time.Timer
		switch {
		case failed:
			if b == nil {
				b = s.cfg.retry()
			}
			d := b.NextBackOff()
			if d == backoff.Stop {
				d = time.Second
			}
			timer = time.NewTimer(d)
			wait = timer.C
		case remaining > 0:
			b = nil
			// Waiting for the connection: our transitions wake us, and a poll
			// covers the moments when they do not (while closing).
			timer = time.NewTimer(250 * time.Millisecond)
			wait = timer.C
		default:
			b = nil
		}
		s.mu.Lock()
		changed := s.changed
		s.mu.Unlock()
		select {
		case <-s.gdKick:
		case <-changed:
		case <-wait:
		case <-done:
			done = nil
			t := time.NewTimer(closeDrainTimeout)
			defer t.Stop()
			deadline = t.C
		case <-deadline:
			s.gdMu.Lock()
			left := s.gdItems
			s.gdItems = nil
			s.gdMu.Unlock()
			for _, it := range left {
				s.lg.Error("guaranteed delete dropped at close", zap.String("path", it.path), hexID(it.id),
					zap.Int("attempt", it.attempt))
			}
			if timer != nil {
				timer.Stop()
			}
			return
		}
		if timer != nil {
			timer.Stop()
		}
	}
}
