package engine_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/internal/testkit/sessiontest"
	"github.com/zkrecipes/zkrecipes/recipes"
	"github.com/zkrecipes/zkrecipes/session"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// TestNodeWatchShortHoldCostsNothing checks WithNodeWatch's promise that a
// hold shorter than 100 ms costs nothing: no data read and no watch on our
// own node. The gap between Acquire returning and Release is measured; only
// a cycle whose gap is well under 100 ms is judged (a stalled machine may
// stretch one, then another cycle is tried).
func TestNodeWatchShortHoldCostsNothing(t *testing.T) {
	ns := zktest.NewNamespace(t)
	s, tap := sessiontest.ConnectTap(t, ns)
	in := newInternals(t, s)
	ctx := ctxT(t)
	judged := 0
	for try := 0; try < 10 && judged < 3; try++ {
		before := tap.Requests()[zktest.OpGetData]
		l, err := in.Acquire(ctx, lockDriver, []byte("short"))
		if err != nil {
			t.Fatal(err)
		}
		got := time.Now()
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
		held := time.Since(got)
		if held > 50*time.Millisecond {
			t.Logf("cycle %d held %v: not judged", try, held)
			continue
		}
		judged++
		if n := tap.Requests()[zktest.OpGetData] - before; n != 0 {
			t.Errorf("a hold of %v sent %d data reads", held, n)
		}
		if w := sessiontest.TapWatches(tap); w != 0 {
			t.Errorf("a hold of %v left %d watches: %v", held, w, tap.Watches())
		}
	}
	if judged == 0 {
		t.Fatal("no cycle held the lease under 50 ms in 10 tries")
	}
}

// TestNodeWatchLongHold checks the other half of the promise: a lease held
// longer than 100 ms watches its own node, set no earlier than 100 ms after
// Acquire returned, and a third party's delete then ends it with
// ErrNodeDeleted.
func TestNodeWatchLongHold(t *testing.T) {
	ns := zktest.NewNamespace(t)
	s, tap := sessiontest.ConnectTap(t, ns)
	in := newInternals(t, s)
	ctx := ctxT(t)
	before := tap.Requests()[zktest.OpGetData]
	l, err := in.Acquire(ctx, lockDriver, []byte("long"))
	if err != nil {
		t.Fatal(err)
	}
	got := time.Now()
	node := l.Path()
	zktest.Eventually(t, wait, func() bool { return tap.Watches()[node] > 0 }, "a watch on %s", node)
	if d := time.Since(got); d < 100*time.Millisecond {
		t.Errorf("own-node watch set %v after Acquire returned, before the 100 ms delay", d)
	}
	if n := tap.Requests()[zktest.OpGetData] - before; n != 1 {
		t.Errorf("%d data reads for the own-node watch, want 1", n)
	}
	conn := ns.Conn(t)
	if err := conn.Delete(node, -1); err != nil {
		t.Fatal(err)
	}
	select {
	case <-l.Done():
	case <-time.After(wait):
		t.Fatal("the lease did not end after its node was deleted")
	}
	if !errors.Is(l.Err(), recipes.ErrNodeDeleted) {
		t.Errorf("Err %v, want ErrNodeDeleted", l.Err())
	}
	rctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	_ = l.Release(rctx)
}

// TestNodeWatchEarlyDelete checks the bound WithNodeWatch promises for a
// deletion inside the 100 ms delay: a third party deletes the node right
// after Acquire returns, before the watch is set, and the lease still ends
// with ErrNodeDeleted once the delay has passed (setting the watch finds the
// node gone).
func TestNodeWatchEarlyDelete(t *testing.T) {
	ns := zktest.NewNamespace(t)
	s := sessiontest.Connect(t, ns)
	in := newInternals(t, s)
	ctx := ctxT(t)
	conn := ns.Conn(t)
	l, err := in.Acquire(ctx, lockDriver, []byte("early"))
	if err != nil {
		t.Fatal(err)
	}
	got := time.Now()
	if err := conn.Delete(l.Path(), -1); err != nil {
		t.Fatal(err)
	}
	select {
	case <-l.Done():
	case <-time.After(wait):
		t.Fatal("the lease did not end after its node was deleted inside the watch delay")
	}
	t.Logf("lease ended %v after Acquire returned (delay 100 ms plus a round trip)", time.Since(got))
	if !errors.Is(l.Err(), recipes.ErrNodeDeleted) {
		t.Errorf("Err %v, want ErrNodeDeleted", l.Err())
	}
	// 100 ms plus a round trip; the slack is for a loaded machine.
	if held := time.Since(got); held > 100*time.Millisecond+5*time.Second {
		t.Errorf("lease ended %v after Acquire, want at most 100 ms and a round trip", held)
	}
	rctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	_ = l.Release(rctx)
}

// TestNodeWatchSurvivesReconnect: under the standard policy a held lease
// outlives a connection reset mended before its deadline, and so must the
// watch on its own node: a third party deletes the node while the client is
// cut off, and once the same session is back the lease ends with
// ErrNodeDeleted (go-zookeeper re-sets the watch, and the server reports the
// deletion it missed).
func TestNodeWatchSurvivesReconnect(t *testing.T) {
	ns := zktest.NewNamespace(t)
	s, p, tap := sessiontest.ConnectProxyTap(t, ns, session.WithSessionTimeout(6*time.Second))
	in := newInternals(t, s)
	ctx := ctxT(t)
	l, err := in.Acquire(ctx, lockDriver, []byte("kept"))
	if err != nil {
		t.Fatal(err)
	}
	node := l.Path()
	zktest.Eventually(t, wait, func() bool { return tap.Watches()[node] > 0 }, "a watch on %s", node)
	rec := sessiontest.Record(t, s)
	if _, _, err := s.Conn().Exists("/"); err != nil { // the lease deadline counts from now
		t.Fatal(err)
	}
	p.Refuse(true)
	p.Cut()
	rec.Wait(t, wait, session.Suspended)
	if err := ns.Conn(t).Delete(node, -1); err != nil {
		t.Fatal(err)
	}
	if err := l.Err(); err != nil {
		t.Fatalf("the lease ended before the reconnection: %v", err)
	}
	p.Refuse(false)
	rec.Wait(t, wait, session.Reconnected)
	select {
	case <-l.Done():
	case <-time.After(wait):
		t.Fatal("the lease did not end after its node was deleted")
	}
	if !errors.Is(l.Err(), recipes.ErrNodeDeleted) {
		t.Errorf("Err %v, want ErrNodeDeleted", l.Err())
	}
	_ = l.Release(ctx)
}
