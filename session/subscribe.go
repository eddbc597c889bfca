package session

import (
	"sync"
	"time"
)

// Event is one state transition.
type Event struct {
	// State entered.
	State State
	// SessionID of Epoch (0 only if the transition happened before the first
	// session, which cannot be observed through Subscribe).
	SessionID int64
	// Epoch the state refers to: for Connected and Reconnected the (possibly
	// new) live epoch, for Suspended the epoch at risk, for Lost the epoch
	// that ended, for Closed the last epoch.
	Epoch *Epoch
	// At is when the Session observed the transition.
	At time.Time
}

// Subscription delivers every state transition after Subscribe, in order.
// Each subscription has its own unbounded queue and goroutine, so a slow
// reader neither stalls the Session or other subscribers nor loses
// transitions. Safe for concurrent use.
type Subscription struct {
	s       *Session
	c       chan Event
	initial Event

	mu     sync.Mutex
	q      []Event
	final  bool // Closed is queued: the pump ends after delivering it
	wake   chan struct{}
	stop   chan struct{}
	stopMu sync.Once
}

// Subscribe returns a new subscription. Initial reports the state at the
// moment of subscribing; C delivers every later transition. After
// Session.Close the subscription delivers Closed and closes C (if the
// subscriber does not read it within a short grace period, C is closed
// without it). Call Close when no longer reading.
func (s *Session) Subscribe() *Subscription {
	sub := &Subscription{
		s:    s,
		c:    make(chan Event),
		wake: make(chan struct{}, 1),
		stop: make(chan struct{}),
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	sub.initial = Event{State: s.state, Epoch: s.epoch, At: time.Now()}
	if s.epoch != nil {
		sub.initial.SessionID = s.epoch.id
	}
	if s.closing {
		close(sub.c)
		return sub
	}
	s.subs[sub] = struct{}{}
	s.subWG.Add(1)
	go sub.pump()
	return sub
}

// Initial returns the state when Subscribe was called (its At is that time).
func (sub *Subscription) Initial() Event { return sub.initial }

// C returns the channel of transitions. It is closed after Close, or after
// Closed has been delivered.
func (sub *Subscription) C() <-chan Event { return sub.c }

// Close ends the subscription; undelivered transitions are discarded and C is
// closed. Idempotent.
func (sub *Subscription) Close() {
	sub.stopMu.Do(func() {
		sub.s.mu.Lock()
		delete(sub.s.subs, sub)
		sub.s.mu.Unlock()
		close(sub.stop)
	})
}

// push queues ev; called with s.mu held, never blocks.
func (sub *Subscription) push(ev Event) {
	sub.mu.Lock()
	sub.q = append(sub.q, ev)
	if ev.State == Closed {
		sub.final = true
	}
	sub.mu.Unlock()
	select {
	case sub.wake <- struct{}{}:
	default:
	}
}

// closeQueued marks the end of the stream; called with s.mu held.
func (sub *Subscription) closeQueued() {
	sub.mu.Lock()
	sub.final = true
	sub.mu.Unlock()
	select {
	case sub.wake <- struct{}{}:
	default:
	}
}

func (sub *Subscription) pump() {
	defer sub.s.subWG.Done()
	defer close(sub.c)
	for {
		sub.mu.Lock()
		if len(sub.q) == 0 {
			final := sub.final
			sub.mu.Unlock()
			if final {
				return
			}
			select {
			case <-sub.wake:
			case <-sub.stop:
				return
			case <-sub.s.force:
				return
			}
			continue
		}
		ev := sub.q[0]
		sub.q[0] = Event{}
		sub.q = sub.q[1:]
		sub.mu.Unlock()
		select {
		case sub.c <- ev:
		case <-sub.stop:
			return
		case <-sub.s.force:
			return
		}
	}
}
