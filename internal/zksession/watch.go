package zksession

import (
	"sync"

	"github.com/go-zookeeper/zk"
)

// go-zookeeper v1.0.4 cannot remove a watch: every GetW, ExistsW or
// ChildrenW adds a channel that stays registered in the client (and a watch
// on the server) until the node changes, however long after its caller gave
// up. A TryLock loop or timed-out Locks against a lock held for hours would
// pile them up without bound. So the Session keeps one registration per node
// and kind: a caller that finds a registration that has not fired yet reads
// the node without a watch and waits on the existing one, which is
// guaranteed to fire at the node's next change, since it was set before
// that read. Registrations are therefore bounded by the number of watched
// nodes, whoever waits on them.

type watchKind uint8

const (
	dataWatch watchKind = iota + 1
	childWatch
)

type watchKey struct {
	path string
	kind watchKind
}

// watchEntry is one registration in go-zookeeper. A thousand waiters on one
// lock are a thousand entries, so an entry has no lock or channel of its
// own: its state is guarded by the registry's state lock, and waits for it
// (rare and short: a registration in flight, an event being stored) use the
// registry's condition variable.
type watchEntry struct {
	s   *Session
	key watchKey
	ch  <-chan zk.Event // go-zookeeper's channel: one event, then closed (set before ready)
	err error           // the registering request failed: no watch (set before ready)

	ready bool // ch or err is set (state lock)
	fired bool // the event is stored (state lock)
	// The event, less its Path (key.path) and Server (not set for node
	// events).
	evType  zk.EventType
	evState zk.State
	evErr   error
}

// event returns the stored event. State lock held.
func (e *watchEntry) event() zk.Event {
	return zk.Event{Type: e.evType, State: e.evState, Path: e.key.path, Err: e.evErr}
}

// newWatchEntry returns an entry of s being registered (not ready). r.mu
// held.
func (r *watchRegistry) newWatchEntry(s *Session, key watchKey) *watchEntry {
	if r.state.L == nil {
		r.state.L = &r.stateMu
	}
	return &watchEntry{s: s, key: key}
}

// setReady records the outcome of the registering request.
func (e *watchEntry) setReady(ch <-chan zk.Event, err error) {
	r := &e.s.watches
	r.stateMu.Lock()
	e.ch, e.err, e.ready = ch, err, true
	r.state.Broadcast()
	r.stateMu.Unlock()
}

// isReady reports whether the registering request is done, without
// waiting.
func (e *watchEntry) isReady() bool {
	r := &e.s.watches
	r.stateMu.Lock()
	defer r.stateMu.Unlock()
	return e.ready
}

// awaitReady blocks until the registering request is done (go-zookeeper
// bounds it).
func (e *watchEntry) awaitReady() {
	r := &e.s.watches
	r.stateMu.Lock()
	for !e.ready {
		r.state.Wait()
	}
	r.stateMu.Unlock()
}

// store records the event of a fired watch, once.
func (e *watchEntry) store(ev zk.Event) {
	r := &e.s.watches
	r.stateMu.Lock()
	if !e.fired {
		e.evType, e.evState, e.evErr, e.fired = ev.Type, ev.State, ev.Err, true
		r.state.Broadcast()
	}
	r.stateMu.Unlock()
}

// Watch is a subscription to a shared watch (see Session.GetW). It fires
// once. Receive from Events in a select; whatever the receive returns, pass
// it to Event to learn what happened: several subscribers share one
// go-zookeeper channel, on which only one of them receives the event itself
// and the others see the channel closed. A Watch is safe for concurrent use.
type Watch struct{ e *watchEntry }

// Events returns the channel to select on. It is ready exactly when the
// watch has fired (it never fires twice).
func (w *Watch) Events() <-chan zk.Event { return w.e.ch }

// Event returns the event the watch fired with, given what a receive from
// Events returned (ev, ok): its Type, State, Path and Err (not its Server,
// which go-zookeeper sets only for connection events). Call it only after
// such a receive.
func (w *Watch) Event(ev zk.Event, ok bool) zk.Event { return w.e.settle(ev, ok) }

// settle records the event of a fired watch and forgets the registration:
// the subscriber that received the event itself stores it; those that found
// the channel closed wait for it (it is stored right after the receive).
func (e *watchEntry) settle(ev zk.Event, ok bool) zk.Event {
	if ok {
		e.store(ev)
		e.s.forgetWatch(e)
	}
	r := &e.s.watches
	r.stateMu.Lock()
	defer r.stateMu.Unlock()
	for !e.fired {
		r.state.Wait()
	}
	return e.event()
}

// takeIfFired reports whether the registration has fired, storing its
// event if this call is the one that receives it. It never waits (it takes
// only the state lock, briefly) and never takes the registry's lock, so it
// may run under it. A channel found closed before the subscriber that
// received the event has stored it counts as fired (that subscriber stores it
// in Event; settle waits for it, this does not). Only for entries that are
// ready with no err.
func (e *watchEntry) takeIfFired() bool {
	r := &e.s.watches
	r.stateMu.Lock()
	fired := e.fired
	r.stateMu.Unlock()
	if fired {
		return true
	}
	select {
	case ev, ok := <-e.ch:
		if ok {
			e.store(ev)
		}
		return true
	default:
		return false
	}
}

// watchRegistry holds the Session's registrations.
type watchRegistry struct {
	mu        sync.Mutex
	entries   map[watchKey]*watchEntry
	pruneSize int // prune when the map grows past this

	// The entries' state (ready, fired, ev) and waits for it. Lock order:
	// mu, then stateMu.
	stateMu sync.Mutex
	state   sync.Cond // L is &stateMu (set with the first entry)
}

func (s *Session) forgetWatch(e *watchEntry) {
	r := &s.watches
	r.mu.Lock()
	if r.entries[e.key] == e {
		delete(r.entries, e.key)
	}
	r.mu.Unlock()
}

// pruneLocked removes registrations that fired while nobody waited on them.
// It runs when the map has doubled since the last prune, so its cost per
// registration stays constant. r.mu held.
func (r *watchRegistry) pruneLocked() {
	if len(r.entries) < r.pruneSize {
		return
	}
	for k, e := range r.entries {
		if !e.isReady() {
			continue // being registered
		}
		if e.err != nil {
			delete(r.entries, k)
			continue
		}
		if e.takeIfFired() {
			delete(r.entries, k)
		}
	}
	r.pruneSize = max(64, 2*len(r.entries))
}

// watchCount implements Session.WatchCount.
func (s *Session) watchCount() int {
	r := &s.watches
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, e := range r.entries {
		if !e.isReady() || e.err == nil && !e.takeIfFired() {
			n++
		}
	}
	return n
}

// getW implements Session.GetW.
func (s *Session) getW(p string) ([]byte, *zk.Stat, *Watch, error) {
	var data []byte
	var st *zk.Stat
	w, err := s.shared(watchKey{p, dataWatch},
		func(c *zk.Conn) (<-chan zk.Event, error) {
			var ch <-chan zk.Event
			var err error
			data, st, ch, err = c.GetW(p)
			return ch, err
		},
		func(c *zk.Conn) error {
			var err error
			data, st, err = c.Get(p)
			return err
		})
	return data, st, w, err
}

// childrenW implements Session.ChildrenW.
func (s *Session) childrenW(p string) ([]string, *zk.Stat, *Watch, error) {
	var kids []string
	var st *zk.Stat
	w, err := s.shared(watchKey{p, childWatch},
		func(c *zk.Conn) (<-chan zk.Event, error) {
			var ch <-chan zk.Event
			var err error
			kids, st, ch, err = c.ChildrenW(p)
			return ch, err
		},
		func(c *zk.Conn) error {
			var err error
			kids, st, err = c.Children(p)
			return err
		})
	return kids, st, w, err
}

// shared registers (with register) or joins (reading with read) the watch
// for key, and returns the subscription.
func (s *Session) shared(key watchKey, register func(*zk.Conn) (<-chan zk.Event, error), read func(*zk.Conn) error) (*Watch, error) {
	r := &s.watches
	for {
		r.mu.Lock()
		if r.entries == nil {
			r.entries = make(map[watchKey]*watchEntry)
		}
		e := r.entries[key]
		if e == nil {
			e = r.newWatchEntry(s, key)
			r.entries[key] = e
			r.pruneLocked()
			r.mu.Unlock()
			ch, err := register(s.conn)
			e.setReady(ch, err)
			if err != nil {
				s.forgetWatch(e)
				return nil, err
			}
			return &Watch{e}, nil
		}
		r.mu.Unlock()
		e.awaitReady() // the registering request is bounded by go-zookeeper
		if e.err != nil || e.takeIfFired() {
			// No watch came of it, or it has fired already: register anew.
			s.forgetWatch(e)
			continue
		}
		// The registration was set before this read, so it fires at any
		// change after the read.
		if err := read(s.conn); err != nil {
			// zk.ErrNoNode included: the node is gone, its watch fires (or
			// has fired) with NodeDeleted, and the caller needs none.
			return nil, err
		}
		if e.takeIfFired() {
			// It fired while the read was in flight: its event may be of a
			// change BEFORE the read (a node deleted, then created again
			// under the same name, as a fixed-name lock node is), which
			// must not reach a caller who read the new node. Read again
			// with a watch of our own.
			s.forgetWatch(e)
			continue
		}
		return &Watch{e}, nil
	}
}

// NeverFires returns a Watch that never fires: for a caller that cannot
// watch (e.g. zk.ErrNoAuth) and must not re-arm in a loop.
func NeverFires() *Watch {
	return &Watch{&watchEntry{ready: true}} // no session: never settled
}
