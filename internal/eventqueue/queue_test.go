package eventqueue_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/zkrecipes/zkrecipes/internal/eventqueue"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestOrderAndFinish: events pushed before anyone reads (Push never blocks)
// come out in order, and the channel closes after the last once Finish was
// called.
func TestOrderAndFinish(t *testing.T) {
	q := eventqueue.New[int](true)
	done := make(chan struct{})
	go func() { defer close(done); q.Pump() }()
	for i := 0; i < 1000; i++ {
		q.Push(i)
	}
	q.Finish()
	want := 0
	for v := range q.Out() {
		if v != want {
			t.Fatalf("got %d, want %d", v, want)
		}
		want++
	}
	if want != 1000 {
		t.Fatalf("%d events delivered, want 1000", want)
	}
	<-done
}

// TestStopDropsTheRest: Stop closes the channel at once although events are
// still queued, and may be called twice.
func TestStopDropsTheRest(t *testing.T) {
	q := eventqueue.New[int](true)
	done := make(chan struct{})
	go func() { defer close(done); q.Pump() }()
	q.Push(1)
	q.Push(2)
	if v := <-q.Out(); v != 1 {
		t.Fatalf("got %d, want 1", v)
	}
	q.Stop()
	q.Stop()
	<-done
	for v := range q.Out() {
		// Pump may have been offering 2 as Stop came: it is either delivered
		// now or dropped, never anything else.
		if v != 2 {
			t.Fatalf("after Stop: got %d", v)
		}
	}
}

// TestOff: a queue that is not on delivers nothing and closes at Finish.
func TestOff(t *testing.T) {
	q := eventqueue.New[int](false)
	done := make(chan struct{})
	go func() { defer close(done); q.Pump() }()
	q.Push(1)
	q.Finish()
	if v, ok := <-q.Out(); ok {
		t.Fatalf("a queue that is off delivered %d", v)
	}
	<-done
}
