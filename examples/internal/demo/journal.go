package demo

import (
	"context"
	"fmt"
	"sync"
)

// Journal records what the goroutines of an example did, in order, so that
// the example's script can wait for an event without ever blocking the
// goroutine that reports it (Add never blocks). It is safe for concurrent use.
type Journal[T any] struct {
	// Fail, if set, is called on every event WaitFor passes over; a non-nil
	// result ends the wait with that error (say, a worker that died).
	Fail func(T) error

	mu   sync.Mutex
	evs  []T
	kick chan struct{} // closed and replaced at every Add
}

// NewJournal returns an empty journal.
func NewJournal[T any]() *Journal[T] { return &Journal[T]{kick: make(chan struct{})} }

// Add records e and wakes the waiters.
func (j *Journal[T]) Add(e T) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.evs = append(j.evs, e)
	close(j.kick)
	j.kick = make(chan struct{})
}

// Len returns the number of events so far: a cursor for "from now on".
func (j *Journal[T]) Len() int {
	j.mu.Lock()
	defer j.mu.Unlock()
	return len(j.evs)
}

// All returns a copy of every event so far.
func (j *Journal[T]) All() []T {
	j.mu.Lock()
	defer j.mu.Unlock()
	return append([]T(nil), j.evs...)
}

// WaitFor blocks until an event at index from or later matches, and returns
// it with the index after it (the cursor for the next wait). It fails when
// ctx ends or Fail rejects an event; the error says what was awaited.
func (j *Journal[T]) WaitFor(ctx context.Context, from int, what string, match func(T) bool) (T, int, error) {
	var zero T
	for {
		j.mu.Lock()
		for i := from; i < len(j.evs); i++ {
			e := j.evs[i]
			if match(e) {
				j.mu.Unlock()
				return e, i + 1, nil
			}
			if j.Fail != nil {
				if err := j.Fail(e); err != nil {
					j.mu.Unlock()
					return zero, 0, fmt.Errorf("waiting for %s: %w", what, err)
				}
			}
		}
		from = len(j.evs)
		kick := j.kick
		j.mu.Unlock()
		select {
		case <-kick:
		case <-ctx.Done():
			return zero, 0, fmt.Errorf("waiting for %s: %w", what, context.Cause(ctx))
		}
	}
}
