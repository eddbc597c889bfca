package sessiontest

import (
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/zktest"
)

// Recv waits up to d for a value on ch and returns it; if none comes it
// fails t with "no <what> within <d>". It must be called from the test's
// goroutine.
func Recv[T any](t testing.TB, ch <-chan T, d time.Duration, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(d):
		t.Fatalf("no %s within %v", what, d)
		var zero T
		return zero
	}
}

// WaitDone waits up to d for a lease (of any recipe: anything with Done and
// Err) to end and returns its cause, Err; if it does not end it fails t. It
// must be called from the test's goroutine.
func WaitDone(t testing.TB, l interface {
	Done() <-chan struct{}
	Err() error
}, d time.Duration) error {
	t.Helper()
	select {
	case <-l.Done():
		return l.Err()
	case <-time.After(d):
		t.Fatalf("lease did not end within %v", d)
		return nil
	}
}

// TapWatches returns the total of tap's Watches: every watcher registration
// the client holds now.
func TapWatches(tap *zktest.Tap) int {
	n := 0
	for _, c := range tap.Watches() {
		n += c
	}
	return n
}
