package zksession

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/go-zookeeper/zk"
	"go.uber.org/zap"
)

// gdKind says what a queued item does.
type gdKind int

const (
	gdDelete      gdKind = iota // delete path (at version), while on session id
	gdSweep                     // delete every child of path named prefix*
	gdDeleteData                // delete path while its data equals data
	gdDeleteOwned               // delete path while it is the node id created as czxid
)

// gdItem is one queued guaranteed delete or sweep.
type gdItem struct {
	kind    gdKind
	id      int64 // session that owns (or created) the node
	path    string
	version int32
	prefix  string
	data    []byte
	czxid   int64
	attempt int
	done    chan struct{} // closed when the item is finished or dropped
}

func (it *gdItem) finish() { close(it.done) }

// finishItem finishes an item of the queue (done, or given up).
func (s *Session) finishItem(it *gdItem) {
	s.gdPending.Add(-1)
	it.finish()
}

// closedChan is returned for items that are dropped at once.
var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// guaranteedDelete implements Session.GuaranteedDelete.
func (s *Session) guaranteedDelete(ep *Epoch, path string, version int32) <-chan struct{} {
	return s.enqueue(ep, &gdItem{kind: gdDelete, path: path, version: version})
}

// guaranteedSweep implements Session.GuaranteedSweep.
func (s *Session) guaranteedSweep(ep *Epoch, dir, prefix string) <-chan struct{} {
	if prefix == "" || strings.ContainsAny(prefix, "/\x00") {
		s.lg.Error("guaranteed sweep dropped", zap.String("path", dir),
			zap.Error(fmt.Errorf("%w: sweep prefix %q", ErrBadArgument, prefix)))
		return closedChan
	}
	return s.enqueue(ep, &gdItem{kind: gdSweep, path: dir, prefix: prefix})
}

// guaranteedDeleteIfData implements Session.GuaranteedDeleteIfData.
func (s *Session) guaranteedDeleteIfData(ep *Epoch, path string, data []byte) <-chan struct{} {
	return s.enqueue(ep, &gdItem{kind: gdDeleteData, path: path, data: append([]byte(nil), data...)})
}

// guaranteedDeleteOwned implements Session.GuaranteedDeleteOwned.
func (s *Session) guaranteedDeleteOwned(ep *Epoch, path string, czxid int64) <-chan struct{} {
	return s.enqueue(ep, &gdItem{kind: gdDeleteOwned, path: path, czxid: czxid})
}

// enqueue validates and queues it for ep's session.
func (s *Session) enqueue(ep *Epoch, it *gdItem) <-chan struct{} {
	lg := s.lg.With(zap.String("path", it.path))
	if ep == nil || ep.s != s {
		lg.Error("guaranteed delete dropped", zap.Error(ErrBadEpoch))
		return closedChan
	}
	if err := ValidatePath(it.path); err != nil {
		lg.Error("guaranteed delete dropped", zap.Error(err), hexID(ep.id))
		return closedChan
	}
	it.id = ep.id
	it.done = make(chan struct{})
	s.gdMu.Lock()
	if s.gdStopped || s.isClosed() {
		s.gdMu.Unlock()
		lg.Debug("guaranteed delete dropped: session closed", hexID(ep.id))
		return closedChan
	}
	s.gdItems = append(s.gdItems, it)
	s.gdPending.Add(1)
	s.gdMu.Unlock()
	if ce := lg.Check(zap.DebugLevel, "guaranteed delete queued"); ce != nil {
		ce.Write(hexID(ep.id), zap.Int("kind", int(it.kind)))
	}
	select {
	case s.gdKick <- struct{}{}:
	default:
	}
	return it.done
}

// work runs one item once on a connection that is up on session cur. It
// reports whether the item is finished and the error of a failed attempt
// (a connection-level error means: keep it and try again).
func (s *Session) work(it *gdItem, cur int64) (finished bool, err error) {
	switch it.kind {
	case gdSweep:
		kids, _, err := s.conn.Children(it.path)
		if errors.Is(err, zk.ErrNoNode) {
			return true, nil
		}
		if err != nil {
			return false, err
		}
		for _, k := range kids {
			if !strings.HasPrefix(k, it.prefix) {
				continue
			}
			if err := s.conn.Delete(it.path+"/"+k, -1); err != nil && !errors.Is(err, zk.ErrNoNode) {
				return false, err
			}
			s.lg.Warn("deleted our node left by a create whose outcome was unknown",
				zap.String("path", it.path), zap.String("node", k), hexID(it.id))
		}
		return true, nil
	case gdDeleteData:
		for {
			got, st, err := s.conn.Get(it.path)
			if errors.Is(err, zk.ErrNoNode) {
				return true, nil
			}
			if err != nil {
				return false, err
			}
			if !bytes.Equal(got, it.data) {
				return true, nil // gone already; the name is someone else's now
			}
			err = s.deleteReadOn(cur, it.path, st.Version)
			switch {
			case err == nil, errors.Is(err, zk.ErrNoNode):
				return true, nil
			case errors.Is(err, zk.ErrBadVersion):
				continue
			}
			return false, err
		}
	case gdDeleteOwned:
		return s.deleteOwned(it, cur)
	default:
		if it.id != cur {
			return s.deleteLeftBehind(it, cur)
		}
		err := s.conn.Delete(it.path, it.version)
		if err == nil || errors.Is(err, zk.ErrNoNode) {
			return true, nil
		}
		return false, err
	}
}

// deleteReadOn deletes path at version, read on session cur, only while
// the connection is still on cur: a request still queued in go-zookeeper
// when the connection drops is sent on the next connection, which may belong
// to a new session where the name is another node's at the same version.
// Otherwise it returns zk.ErrConnectionClosed (try again).
func (s *Session) deleteReadOn(cur int64, path string, version int32) error {
	if state, id := s.conn.State(), s.conn.SessionID(); state != zk.StateHasSession || id != cur {
		return zk.ErrConnectionClosed
	}
	return s.conn.Delete(path, version)
}

// deleteLeftBehind deletes the node of a guaranteed delete queued for a
// session the client has left for a new one, while the node is still that
// old session's (its ephemeral owner), at the version read with the owner.
// The server deletes an old session's ephemerals only when it expires that
// session: one timeout after it last heard from it, and again a full timeout
// after the ensemble elects a new leader, so a member can answer "expired"
// (and the client start a new session) seconds before the node goes, which
// would block a lock for everyone meanwhile (seen in the chaos run). The
// client gave the old session up, and every lease of it ended, before the
// new session began, so deleting its node is the release it was owed.
func (s *Session) deleteLeftBehind(it *gdItem, cur int64) (finished bool, err error) {
	for {
		ok, st, err := s.conn.Exists(it.path)
		if err != nil {
			return false, err
		}
		if !ok || st.EphemeralOwner != it.id || (it.version >= 0 && st.Version != it.version) {
			return true, nil // gone, or not the node we were asked to delete
		}
		err = s.deleteReadOn(cur, it.path, st.Version)
		switch {
		case err == nil:
			s.lg.Info("deleted a node of a session this client had left, before the server expired that session",
				zap.String("path", it.path), hexID(it.id), zap.String("current_session_id", fmtID(cur)))
			return true, nil
		case errors.Is(err, zk.ErrNoNode):
			return true, nil
		case errors.Is(err, zk.ErrBadVersion):
			continue
		}
		return false, err
	}
}

// deleteOwned deletes the node of a gdDeleteOwned item while it is the node
// its session created (the same czxid and ephemeral owner), at the version
// read with them, on whatever session the connection is on now.
func (s *Session) deleteOwned(it *gdItem, cur int64) (finished bool, err error) {
	for {
		ok, st, err := s.conn.Exists(it.path)
		if err != nil {
			return false, err
		}
		if !ok || st.Czxid != it.czxid || st.EphemeralOwner != it.id {
			return true, nil // gone, or another node under the same name
		}
		err = s.deleteReadOn(cur, it.path, st.Version)
		switch {
		case err == nil, errors.Is(err, zk.ErrNoNode):
			return true, nil
		case errors.Is(err, zk.ErrBadVersion):
			continue
		}
		return false, err
	}
}

// runDeletes is the guaranteed-delete goroutine.
func (s *Session) runDeletes() {
	defer close(s.gdDone)
	defer func() {
		// Nothing is queued after this; what is left is dropped.
		s.gdMu.Lock()
		s.gdStopped = true
		left := s.gdItems
		s.gdItems = nil
		s.gdMu.Unlock()
		for _, it := range left {
			s.finishItem(it)
		}
	}()
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
			if !up {
				keep = append(keep, it)
				continue
			}
			it.attempt++
			finished, err := s.work(it, cur)
			lg := s.lg.With(zap.String("path", it.path), hexID(it.id), zap.Int("attempt", it.attempt))
			switch {
			case finished:
				lg.Debug("guaranteed delete done")
				s.finishItem(it)
			case retryable(err):
				lg.Debug("guaranteed delete failed, will retry", zap.Error(err))
				keep = append(keep, it)
				failed = true
			default:
				// Nobody else sees this failure (a background cleanup).
				lg.Error("guaranteed delete failed", zap.Error(err))
				s.finishItem(it)
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
			// An absolute bound set by Close: a request in flight when Close
			// began does not extend it.
			t := time.NewTimer(time.Until(s.drainBy))
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
				s.finishItem(it)
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
