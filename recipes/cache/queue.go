package cache

import "sync"

// queue delivers events in order on a channel without ever blocking the
// cache's goroutine: each cache has its own unbounded queue and one pump
// goroutine, as the session's subscriptions do.
type queue struct {
	out  chan Event
	on   bool
	wake chan struct{}
	stop chan struct{} // closed by Close: undelivered events are dropped

	mu    sync.Mutex
	q     []Event
	final bool // nothing more will be pushed: close out once q is empty
}

func newQueue(on bool) *queue {
	return &queue{out: make(chan Event), on: on, wake: make(chan struct{}, 1), stop: make(chan struct{})}
}

// push queues ev; it never blocks.
func (q *queue) push(ev Event) {
	if !q.on {
		return
	}
	q.mu.Lock()
	q.q = append(q.q, ev)
	q.mu.Unlock()
	q.kick()
}

// finish says that nothing more will be pushed.
func (q *queue) finish() {
	q.mu.Lock()
	q.final = true
	q.mu.Unlock()
	q.kick()
}

func (q *queue) kick() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// pump sends the queued events on out, then closes it.
func (q *queue) pump() {
	defer close(q.out)
	for {
		q.mu.Lock()
		if len(q.q) == 0 {
			final := q.final
			q.mu.Unlock()
			if final {
				return
			}
			select {
			case <-q.wake:
			case <-q.stop:
				return
			}
			continue
		}
		ev := q.q[0]
		q.q[0] = Event{}
		q.q = q.q[1:]
		if len(q.q) == 0 {
			q.q = nil // let a large backlog's array go (a first load's events)
		}
		q.mu.Unlock()
		select {
		case q.out <- ev:
		case <-q.stop:
			return
		}
	}
}
