package engine

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/internal/testkit/sessiontest"
	"github.com/zkrecipes/zkrecipes/session"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// TestLeaseEndToldOnceWhicheverComesFirst: the LeaseEnd hook is told of a
// light lease's end exactly once, with its cause, whether the lease ends
// after the acquire's observation hands it over (the usual order) or before
// (a suspension or Close in the instant between the grant and Done).
func TestLeaseEndToldOnceWhicheverComesFirst(t *testing.T) {
	ends := make(chan session.LeaseEnd, 10)
	hooks := session.Hooks{LeaseEnd: func(_ session.Recipe, e session.LeaseEnd) { ends <- e }}
	ns := zktest.NewNamespace(t)
	s := sessiontest.Connect(t, ns, session.WithHooks(hooks))
	e, err := New(s, "/lock", WithObserved("mutex", "t"))
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, endFirst := range []bool{false, true} {
		octx, o := e.ObserveAcquire(ctx, "mutex", 0)
		if o == nil {
			t.Fatal("no observation with a LeaseEnd hook set")
		}
		l, err := e.acquireAs(octx, Standard("lock-", 1), nil, false, o)
		if err != nil {
			t.Fatal(err)
		}
		if l.x != nil {
			t.Fatal("a monitored lease: this test is about light ones")
		}
		if endFirst {
			if err := l.Release(ctx); err != nil {
				t.Fatal(err)
			}
			o.Done(nil, l)
		} else {
			o.Done(nil, l)
			if err := l.Release(ctx); err != nil {
				t.Fatal(err)
			}
		}
		select {
		case got := <-ends:
			if !errors.Is(got.Cause, ErrReleased) {
				t.Fatalf("ended first %v: cause %v, want released", endFirst, got.Cause)
			}
		case <-ctx.Done():
			t.Fatalf("ended first %v: the LeaseEnd hook was not called", endFirst)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
		select {
		case got := <-ends:
			t.Fatalf("ended first %v: the LeaseEnd hook called twice (second cause %v)", endFirst, got.Cause)
		default:
		}
	}
}
