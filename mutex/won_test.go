package mutex_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/zkrecipes/zkrecipes/internal/testkit/sessiontest"
	"github.com/zkrecipes/zkrecipes/mutex"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// TestWonAsCtxEnded: the waiter's ctx is canceled at the moment it wins.
//
// Without the node watch the waiter decides on a children read after its
// predecessor's deletion: the proxy cancels ctx while forwarding that very
// read, so the read says "held" but ctx is over, deterministically. With the
// node watch the waiter decides on the deletion notice itself (no read): ctx
// is canceled when the holder's delete passes its proxy, so the notice and
// ctx's end race inside the waiter. Either way the lock must be released,
// not leaked, and ctx's error returned.
func TestWonAsCtxEnded(t *testing.T) {
	for _, k := range kinds {
		if !k.fair {
			continue // see TestWonAsCtxEndedNonFair
		}
		for _, watch := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/nodewatch=%v", k.name, watch), func(t *testing.T) {
				ns := zktest.NewNamespace(t)
				raw := ns.Conn(t)
				hs, hp := sessiontest.ConnectProxy(t, ns)
				holder := k.make(t, hs)
				ws, wp := sessiontest.ConnectProxy(t, ns)
				waiter := k.make(t, ws, mutex.WithNodeWatch(watch))
				third := k.make(t, connect(t, ns))
				ctx := ctxT(t)
				hl, err := holder.Lock(ctx)
				if err != nil {
					t.Fatal(err)
				}
				wctx, cancel := context.WithCancel(ctx)
				defer cancel()
				var armed, fired atomic.Bool
				dir := ns.Path(lockPath)
				if watch {
					hp.OnRequest(func(r zktest.Request) zktest.Action {
						if armed.Load() && r.Op == zktest.OpDelete && r.Path == mutex.NodePath(hl) && !fired.Swap(true) {
							cancel() // before the delete reaches the server
						}
						return zktest.Forward
					})
				} else {
					wp.OnRequest(func(r zktest.Request) zktest.Action {
						if armed.Load() && r.Op == zktest.OpGetChildren2 && r.Path == dir && !fired.Swap(true) {
							cancel() // before the read reaches the server
						}
						return zktest.Forward
					})
				}
				got := lockAsync(t, wctx, waiter, new(atomic.Int64))
				// Arm the hook only once the waiter waits on the holder's
				// node: its own first children read (nodewatch=false) must
				// pass unhooked.
				waitQueued(t, ns, k, ws)
				armed.Store(true)
				if err := hl.Release(ctx); err != nil {
					t.Fatal(err)
				}
				r := got.result(t)
				if !fired.Load() {
					t.Fatalf("the hooked request was not seen")
				}
				if !errors.Is(r.err, context.Canceled) {
					t.Fatalf("Lock = %v, %v; want context.Canceled", r.l, r.err)
				}
				// The node goes through the session's queue (the call waits
				// for it only within ctx + 10 ms).
				zktest.Eventually(t, wait, func() bool { return len(lockKids(t, raw, ns)) == 0 }, "nodes left")
				l, err := third.TryLock(ctx)
				if err != nil {
					t.Fatalf("lock leaked: TryLock = %v", err)
				}
				l.Release(ctx)
			})
		}
	}
}

// TestWonAsCtxEndedNonFair: the non-fair waiter's ctx is canceled while its
// winning create is in flight.
func TestWonAsCtxEndedNonFair(t *testing.T) {
	k := kinds[2]
	ns := zktest.NewNamespace(t)
	raw := ns.Conn(t)
	holder := k.make(t, connect(t, ns))
	ws, p := sessiontest.ConnectProxy(t, ns)
	waiter := k.make(t, ws)
	ctx := ctxT(t)
	hl, err := holder.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var armed, fired atomic.Bool
	var reads atomic.Int32
	node := ns.Path(lockPath) + "/lock"
	p.OnRequest(func(r zktest.Request) zktest.Action {
		if r.Op == zktest.OpGetData && r.Path == node {
			reads.Add(1) // the pipelined read, then the wait's GetW
		}
		if armed.Load() && r.Op == zktest.OpCreate && r.Path == node && !fired.Swap(true) {
			cancel()
		}
		return zktest.Forward
	})
	got := lockAsync(t, wctx, waiter, new(atomic.Int64))
	zktest.Eventually(t, wait, func() bool { return reads.Load() >= 2 }, "waiter never watched the node")
	armed.Store(true)
	if err := hl.Release(ctx); err != nil {
		t.Fatal(err)
	}
	r := got.result(t)
	if !fired.Load() {
		t.Fatalf("the waiter's create was not seen")
	}
	if !errors.Is(r.err, context.Canceled) {
		t.Fatalf("Lock = %v; want context.Canceled", r.err)
	}
	// The call returned as soon as ctx ended; the create completed after it
	// on a session goroutine, and the session's queue deletes the node it
	// made (it carries this acquire's data).
	zktest.Eventually(t, wait, func() bool {
		ok, _, err := raw.Exists(node)
		return err == nil && !ok
	}, "the node created after the caller gave up was not deleted")
}
