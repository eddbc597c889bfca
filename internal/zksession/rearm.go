package zksession

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/go-zookeeper/zk"
	"go.uber.org/zap"
)

// rearmBook: server-only watches set again after a reconnect. The server
// drops a connection's watches when the connection ends, and a client that
// reconnects to the same session lists the watches it wants back in a
// SetWatches request; go-zookeeper lists only its own, so the watch of every
// node subscription that WatchNode set server-only (serverOnlyBook) is gone
// after a reconnect, and its holder would no longer hear of a delete. So at
// every Reconnected to the same session (same epoch) the re-arm goroutine
// sends, for each path with such a subscription, the same getData with the
// watch flag that WatchNode sends. A path whose node has gone meanwhile
// gets "no node" and no watch: its subscribers get the NodeDeleted the
// server would have sent, as onEvent dispatches one. A node whose data
// changed meanwhile gets its watch back and nothing else: the subscribers of
// WatchNode (the engine's leases) would only set the watch again, which is
// done. Per path one request, at most rearmParallel in flight: go-zookeeper
// pipelines them on the one connection, so ten thousand watches take about
// a second (docs/design.md). A round ends when every path is
// armed, or at the next transition (the connection went down again: the
// next Reconnected starts a new round), the epoch's loss or Close.
// Connection errors are retried with the session's backoff within the
// round.

// rearmParallel bounds the getData requests a re-arm round has in flight.
const rearmParallel = 32

// startRearm starts the re-arm goroutine. Called once, from connect, before
// the first session (it must see every transition).
func (s *Session) startRearm() {
	sub := s.Subscribe()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer sub.Close()
		s.runRearm(sub)
	}()
}

// runRearm runs a re-arm round at every Reconnected to the same epoch (the
// event before it, Suspended, is of the same epoch; a new session has a new
// epoch), until Close.
func (s *Session) runRearm(sub *Subscription[Event]) {
	var prev Event
	var last <-chan struct{} // the state period of the last round
	for {
		var ev Event
		var ok bool
		select {
		case ev, ok = <-sub.C():
			if !ok {
				return
			}
		case <-s.done:
			return
		}
		if ev.State == Reconnected && ev.Epoch != nil && ev.Epoch == prev.Epoch {
			// Events may be read late: re-arm only if the connection is still
			// up on ev's epoch, once per connected interval (a later
			// Reconnected of the same interval is read after a round made
			// for it already).
			s.mu.Lock()
			up := s.state == Reconnected && s.epoch == ev.Epoch && !s.closing
			period := s.changed
			s.mu.Unlock()
			if up && period != last && ev.Epoch.live() {
				last = period
				s.rearm(ev.Epoch, period)
			}
		}
		prev = ev
	}
}

// rearm is one round: it sets the server-only watches of ep's subscriptions
// again, until over (the next transition) is closed, ep ends or Close.
func (s *Session) rearm(ep *Epoch, over <-chan struct{}) {
	paths := s.serverOnlyPaths()
	if len(paths) == 0 {
		return
	}
	start := time.Now()
	var (
		next    atomic.Int64
		stopped atomic.Bool
		deleted atomic.Int64
		wg      sync.WaitGroup
	)
	for range min(rearmParallel, len(paths)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= int64(len(paths)) {
					return
				}
				gone, ok := s.rearmPath(ep, paths[i], over)
				if gone {
					deleted.Add(1)
				}
				if !ok {
					stopped.Store(true)
					return
				}
			}
		}()
	}
	wg.Wait()
	if ce := s.lg.Check(zap.DebugLevel, "server-only watches set again"); ce != nil {
		ce.Write(zap.Int("paths", len(paths)), zap.Int64("deleted", deleted.Load()),
			zap.Bool("interrupted", stopped.Load()), zap.Duration("took", time.Since(start)), hexID(ep.id))
	}
}

// rearmPath sets the server-only watch of p again, or dispatches NodeDeleted
// to its subscriptions if p has gone (gone). It reports false when the round
// is over.
func (s *Session) rearmPath(ep *Epoch, p string, over <-chan struct{}) (gone, ok bool) {
	var b backoff.BackOff // made at the first failure
	for attempt := 1; ; attempt++ {
		select {
		case <-over:
			return false, false
		case <-ep.Lost():
			return false, false
		case <-s.done:
			return false, false
		default:
		}
		if !s.hasServerOnlySub(p) {
			return false, true // released (or its event dispatched) meanwhile
		}
		s.wire.addServerOnly(p)
		_, st, err := s.conn.Get(p)
		s.wire.removeServerOnly(p)
		if err == nil && st != nil && st.EphemeralOwner != ep.id {
			// Deleted and created again by another session while we were
			// away: our node is gone all the same (WatchNode's nodes are
			// ephemerals of their epoch's session).
			err = zk.ErrNoNode
		}
		switch {
		case err == nil:
			return false, true
		case errors.Is(err, zk.ErrNoNode):
			// On ep's session (go-zookeeper sets a new session's id before
			// it sends anything on it): what a live watch would have told.
			if s.conn.SessionID() != ep.id || !ep.live() {
				return false, false
			}
			s.dispatchNode(zk.Event{Type: zk.EventNodeDeleted, State: zk.StateSyncConnected, Path: p})
			return true, true
		case errors.Is(err, zk.ErrSessionExpired), errors.Is(err, zk.ErrClosing):
			return false, false
		case !retryable(err):
			s.lg.Warn("cannot set the watch on a node again after a reconnect", zap.String("path", p), zap.Error(err))
			return false, true
		}
		if b == nil {
			b = s.cfg.retry()
		}
		d := b.NextBackOff()
		if d == backoff.Stop {
			// Nobody else sees this failure: the node's subscribers stay
			// without a watch until the next reconnect.
			s.lg.Error("gave up setting the watch on a node again after a reconnect",
				zap.String("path", p), zap.Int("attempt", attempt), zap.Error(err))
			return false, true
		}
		s.NoteRetry(err)
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-over:
		case <-ep.Lost():
		case <-s.done:
		}
		t.Stop()
	}
}

// serverOnlyPaths returns the paths with a server-only subscription.
func (s *Session) serverOnlyPaths() []string {
	t := &s.nodeSubs
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []string
	for p, head := range t.m {
		for n := head; n != nil; n = n.next {
			if n.serverOnly {
				out = append(out, p)
				break
			}
		}
	}
	return out
}

// hasServerOnlySub reports whether p has a server-only subscription.
func (s *Session) hasServerOnlySub(p string) bool {
	t := &s.nodeSubs
	t.mu.Lock()
	defer t.mu.Unlock()
	for n := t.m[p]; n != nil; n = n.next {
		if n.serverOnly {
			return true
		}
	}
	return false
}
