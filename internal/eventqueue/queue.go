// Package eventqueue delivers a recipe's events in order on a channel
// without ever blocking the goroutine that produces them: an unbounded queue
// and one pump goroutine per queue, which the caches of recipes/cache and
// recipes/discovery use for their Events channels.
package eventqueue

import "sync"

// Queue is an unbounded queue of events of type T drained onto a channel by
// Pump. Push never blocks; Finish closes the channel once the queued events
// are delivered; Stop drops what is left and closes it at once.
type Queue[T any] struct {
	out      chan T
	on       bool
	wake     chan struct{}
	stop     chan struct{} // closed by Stop: undelivered events are dropped
	stopOnce sync.Once

	mu    sync.Mutex
	q     []T
	final bool // nothing more will be pushed: close out once q is empty
}

// New returns a queue; one that is not on drops every event pushed (a
// cache made WithEvents(false)), and its channel closes at Finish or Stop.
func New[T any](on bool) *Queue[T] {
	return &Queue[T]{out: make(chan T), on: on, wake: make(chan struct{}, 1), stop: make(chan struct{})}
}

// Out is the channel the events are delivered on, in the order pushed.
func (q *Queue[T]) Out() <-chan T { return q.out }

// Push queues ev; it never blocks.
func (q *Queue[T]) Push(ev T) {
	if !q.on {
		return
	}
	q.mu.Lock()
	q.q = append(q.q, ev)
	q.mu.Unlock()
	q.kick()
}

// Finish says that nothing more will be pushed: Pump closes the channel
// once the queued events are delivered.
func (q *Queue[T]) Finish() {
	q.mu.Lock()
	q.final = true
	q.mu.Unlock()
	q.kick()
}

// Stop makes Pump drop the events not yet delivered and return; it may be
// called more than once.
func (q *Queue[T]) Stop() { q.stopOnce.Do(func() { close(q.stop) }) }

func (q *Queue[T]) kick() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// Pump sends the queued events on the channel, then closes it; it returns
// after Finish once all are delivered, or at Stop. Run it on a goroutine
// of its own.
func (q *Queue[T]) Pump() {
	defer close(q.out)
	var zero T
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
		q.q[0] = zero
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
