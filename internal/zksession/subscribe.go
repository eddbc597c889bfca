package zksession

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

// Subscription delivers every state transition after Subscribe, in order,
// as values of E (the public session package converts them to its own
// Event). Each subscription has its own unbounded queue and goroutine, so a
// slow reader neither stalls the Session or other subscribers nor loses
// transitions. Safe for concurrent use.
type Subscription[E any] struct {
	s       *Session
	c       chan E
	conv    func(Event) E
	initial E

	mu     sync.Mutex
	q      []Event
	final  bool // Closed is queued: the pump ends after delivering it
	wake   chan struct{}
	stop   chan struct{}
	stopMu sync.Once

	// A hook's subscription (see startStateHook) calls fn instead of
	// sending on c, once gate is closed.
	fn   func(E)
	gate <-chan struct{}
}

// subscriber is a Subscription of any element type, as the Session keeps it.
type subscriber interface {
	push(Event)
	closeQueued()
}

// Subscribe returns a new subscription. Initial reports the state at the
// moment of subscribing; C delivers every later transition. After
// Session.Close the subscription delivers Closed and closes C (if the
// subscriber does not read it within a short grace period, C is closed
// without it). Call Close when no longer reading.
func (s *Session) Subscribe() *Subscription[Event] {
	return SubscribeAs(s, func(ev Event) Event { return ev })
}

// SubscribeAs is Subscribe with every event converted by conv (on the
// subscription's goroutine) before it is delivered.
func SubscribeAs[E any](s *Session, conv func(Event) E) *Subscription[E] {
	return subscribe(s, conv, nil, nil)
}

// subscribe is SubscribeAs, delivering to fn (once gate is closed) instead
// of C when fn is not nil.
func subscribe[E any](s *Session, conv func(Event) E, fn func(E), gate <-chan struct{}) *Subscription[E] {
	sub := &Subscription[E]{
		s:    s,
		c:    make(chan E),
		conv: conv,
		wake: make(chan struct{}, 1),
		stop: make(chan struct{}),
		fn:   fn,
		gate: gate,
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	initial := Event{State: s.state, Epoch: s.epoch, At: time.Now()}
	if s.epoch != nil {
		initial.SessionID = s.epoch.id
	}
	sub.initial = conv(initial)
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
func (sub *Subscription[E]) Initial() E { return sub.initial }

// C returns the channel of transitions. It is closed after Close, or after
// Closed has been delivered.
func (sub *Subscription[E]) C() <-chan E { return sub.c }

// Close ends the subscription; undelivered transitions are discarded and C is
// closed. Idempotent.
func (sub *Subscription[E]) Close() {
	sub.stopMu.Do(func() {
		sub.s.mu.Lock()
		delete(sub.s.subs, sub)
		sub.s.mu.Unlock()
		close(sub.stop)
	})
}

// push queues ev; called with s.mu held, never blocks.
func (sub *Subscription[E]) push(ev Event) {
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
func (sub *Subscription[E]) closeQueued() {
	sub.mu.Lock()
	sub.final = true
	sub.mu.Unlock()
	select {
	case sub.wake <- struct{}{}:
	default:
	}
}

func (sub *Subscription[E]) pump() {
	defer sub.s.subWG.Done()
	defer close(sub.c)
	if sub.gate != nil {
		select {
		case <-sub.gate:
		case <-sub.stop:
			return
		case <-sub.s.force:
			return
		}
	}
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
		if sub.fn != nil {
			sub.fn(sub.conv(ev))
			continue
		}
		select {
		case sub.c <- sub.conv(ev):
		case <-sub.stop:
			return
		case <-sub.s.force:
			return
		}
	}
}
