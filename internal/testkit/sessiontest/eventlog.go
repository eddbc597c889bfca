package sessiontest

import (
	"sync"
	"testing"
	"time"
)

// EventLog collects what a recipe sends on an events channel until the
// channel closes, for tests that wait on what has arrived so far.
type EventLog[E any] struct {
	mu     sync.Mutex
	evs    []E
	more   chan struct{} // closed and replaced at each event
	closed chan struct{} // the channel was closed
	format func([]E) string
}

// LogEvents starts collecting the values received on ch, each as stamp
// makes it on arrival (to add the time of arrival, say). format prints the
// events in a failure.
func LogEvents[In, E any](ch <-chan In, stamp func(In) E, format func([]E) string) *EventLog[E] {
	l := &EventLog[E]{more: make(chan struct{}), closed: make(chan struct{}), format: format}
	go func() {
		defer close(l.closed)
		for ev := range ch {
			l.mu.Lock()
			l.evs = append(l.evs, stamp(ev))
			close(l.more)
			l.more = make(chan struct{})
			l.mu.Unlock()
		}
	}()
	return l
}

// Events returns a copy of the events collected so far.
func (l *EventLog[E]) Events() []E {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]E(nil), l.evs...)
}

// Closed is closed once the channel has closed and every event on it is
// collected.
func (l *EventLog[E]) Closed() <-chan struct{} { return l.closed }

// WaitFor waits up to d until cond holds for the events collected so far
// and returns them; it fails t, with the events, if the channel closes
// first or d passes. It must be called from the test's goroutine.
func (l *EventLog[E]) WaitFor(t testing.TB, d time.Duration, what string, cond func([]E) bool) []E {
	t.Helper()
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	for {
		l.mu.Lock()
		evs := append([]E(nil), l.evs...)
		more := l.more
		l.mu.Unlock()
		if cond(evs) {
			return evs
		}
		select {
		case <-more:
		case <-l.closed:
			if !cond(l.Events()) {
				t.Fatalf("%s: events closed first; got %s", what, l.format(evs))
			}
		case <-deadline.C:
			t.Fatalf("%s: not within %v; got %s", what, d, l.format(evs))
		}
	}
}
