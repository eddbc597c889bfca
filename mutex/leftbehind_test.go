package mutex_test

import (
	"errors"
	"testing"

	"github.com/zkrecipes/zkrecipes/internal/testkit/sessiontest"
	"github.com/zkrecipes/zkrecipes/mutex"
	"github.com/zkrecipes/zkrecipes/session"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// TestHolderSessionReplacedBeforeExpiry: the holder's client is handed a new
// session while the server keeps the old one alive (held by another
// connection for the whole test, as a member that answers "expired" before
// the ensemble deletes the session's nodes, or a leader election that
// restarts every session's timeout, keeps it). The holder's lease ends, and
// the waiter acquires without waiting for the old session's expiry: the
// holder's client deletes the node it left.
func TestHolderSessionReplacedBeforeExpiry(t *testing.T) {
	ns := zktest.NewNamespace(t)
	hs, p := sessiontest.ConnectProxy(t, ns)
	holder, err := mutex.New(hs, "/m")
	if err != nil {
		t.Fatal(err)
	}
	waiter, err := mutex.New(connect(t, ns), "/m")
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t)
	hl, err := holder.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		wl, err := waiter.Lock(ctx)
		if err == nil {
			err = wl.Release(ctx)
		}
		got <- err
	}()
	zktest.Eventually(t, wait, func() bool {
		ps, err := holder.Participants(ctx)
		return err == nil && len(ps) == 2
	}, "the waiter did not queue")

	p.ForceNewSessions(true)
	release := sessiontest.Hold(t, hs, p, ns.Servers())
	defer release()
	cause := sessiontest.WaitDone(t, hl, wait)
	if !errors.Is(cause, session.ErrSuspended) && !errors.Is(cause, session.ErrLost) {
		t.Fatalf("holder's lease ended with %v", cause)
	}
	if err := <-got; err != nil {
		t.Fatalf("waiter: %v (while the holder's old session lives on the server)", err)
	}
	if err := hl.Release(ctx); err != nil {
		t.Fatalf("Release of an ended lease: %v", err)
	}
}
