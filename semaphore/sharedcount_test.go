package semaphore_test

import (
	"context"
	"encoding/binary"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/internal/testkit/sessiontest"
	"github.com/zkrecipes/zkrecipes/semaphore"
	"github.com/zkrecipes/zkrecipes/session"
	"github.com/zkrecipes/zkrecipes/zktest"
)

const countPath = "/sem/max"

// be4 is Curator's encoding of a count.
func be4(n int32) []byte {
	b := make([]byte, 4)
	binary.BigEndian.PutUint32(b, uint32(n))
	return b
}

// nextValue waits for the next value on a Watch channel.
func nextValue(t testing.TB, ch <-chan semaphore.CountValue) semaphore.CountValue {
	t.Helper()
	select {
	case v, ok := <-ch:
		if !ok {
			t.Fatal("watch channel closed")
		}
		return v
	case <-time.After(wait):
		t.Fatalf("no value within %v", wait)
		return semaphore.CountValue{}
	}
}

// Get creates the node with the seed, in Curator's 4-byte format; Set and
// TrySet write it; a TrySet on a stale version fails and returns the
// current value.
func TestSharedCountGetSet(t *testing.T) {
	ns := zktest.NewNamespace(t)
	raw := ns.Conn(t)
	ctx := ctxT(t)
	a := newCount(t, connect(t, ns), countPath, 3)
	b := newCount(t, connect(t, ns), countPath, 9) // seed ignored: the node exists by then
	v, err := a.Get(ctx)
	if err != nil || v.Count != 3 || v.Version != 0 {
		t.Fatalf("Get = %+v, %v; want 3 at version 0", v, err)
	}
	data, _, err := raw.Get(ns.Path(countPath))
	if err != nil || string(data) != string(be4(3)) {
		t.Fatalf("node data = %x, %v; want %x", data, err, be4(3))
	}
	if v, err := b.Get(ctx); err != nil || v.Count != 3 {
		t.Fatalf("b.Get = %+v, %v", v, err)
	}
	v1, err := b.Set(ctx, 5)
	if err != nil || v1.Count != 5 || v1.Version != 1 {
		t.Fatalf("Set = %+v, %v", v1, err)
	}
	// a's version 0 is stale now.
	cur, ok, err := a.TrySet(ctx, v, 7)
	if err != nil || ok || cur != v1 {
		t.Fatalf("TrySet on a stale version = %+v, %v, %v; want %+v, false", cur, ok, err, v1)
	}
	v2, ok, err := a.TrySet(ctx, cur, 7)
	if err != nil || !ok || v2.Count != 7 || v2.Version != 2 {
		t.Fatalf("TrySet on the current version = %+v, %v, %v", v2, ok, err)
	}
	if v, err := b.Get(ctx); err != nil || v != v2 {
		t.Fatalf("Get after TrySet = %+v, %v; want %+v", v, err, v2)
	}
	data, _, _ = raw.Get(ns.Path(countPath))
	if string(data) != string(be4(7)) {
		t.Fatalf("node data = %x, want %x", data, be4(7))
	}
	// Set on a missing node creates it with the value set.
	if err := raw.Delete(ns.Path(countPath), -1); err != nil {
		t.Fatal(err)
	}
	if v, err := a.Set(ctx, 4); err != nil || v.Count != 4 {
		t.Fatalf("Set on a missing node = %+v, %v", v, err)
	}
	if v, err := b.Get(ctx); err != nil || v.Count != 4 {
		t.Fatalf("Get = %+v, %v", v, err)
	}
}

// Watch delivers the value, then each change, whoever writes it (another
// SharedCount, a raw client writing Curator's format); a deleted node is
// created again with the seed; the channel closes with ctx.
func TestSharedCountWatch(t *testing.T) {
	ns := zktest.NewNamespace(t)
	raw := ns.Conn(t)
	ctx := ctxT(t)
	c := newCount(t, connect(t, ns), countPath, 2)
	other := newCount(t, connect(t, ns), countPath, 2)
	wctx, cancel := context.WithCancel(ctx)
	ch := c.Watch(wctx)
	if v := nextValue(t, ch); v.Count != 2 {
		t.Fatalf("first value = %+v", v)
	}
	if _, err := other.Set(ctx, 6); err != nil {
		t.Fatal(err)
	}
	if v := nextValue(t, ch); v.Count != 6 || v.Version != 1 {
		t.Fatalf("after Set(6): %+v", v)
	}
	if _, err := raw.Set(ns.Path(countPath), be4(11), -1); err != nil {
		t.Fatal(err)
	}
	if v := nextValue(t, ch); v.Count != 11 {
		t.Fatalf("after a raw write of 11: %+v", v)
	}
	if err := raw.Delete(ns.Path(countPath), -1); err != nil {
		t.Fatal(err)
	}
	if v := nextValue(t, ch); v.Count != 2 || v.Version != 0 {
		t.Fatalf("after the node's deletion: %+v, want the seed 2 at version 0", v)
	}
	cancel()
	zktest.Eventually(t, wait, func() bool {
		select {
		case _, ok := <-ch:
			return !ok
		default:
			return false
		}
	}, "watch channel not closed after its ctx ended")
	// A second watcher after Close gets a closed channel at once.
	c.Close()
	if _, ok := <-c.Watch(ctx); ok {
		t.Fatal("Watch after Close delivered a value")
	}
	if _, err := c.Get(ctx); !errors.Is(err, session.ErrClosed) {
		t.Fatalf("Get after Close = %v", err)
	}
}

// Foreign data of another length than 4 bytes is ErrBadData, for Get and
// for a semaphore whose maximum it is; bad values are refused before any
// write.
func TestSharedCountBadInput(t *testing.T) {
	ns := zktest.NewNamespace(t)
	raw := ns.Conn(t)
	ctx := ctxT(t)
	s := connect(t, ns)
	for _, seed := range []int{-1, semaphore.MaxCount + 1} {
		if _, err := semaphore.NewSharedCount(s, countPath, seed); !errors.Is(err, session.ErrBadArgument) {
			t.Errorf("seed %d: %v, want ErrBadArgument", seed, err)
		}
	}
	if _, err := semaphore.NewSharedCount(nil, countPath, 1); !errors.Is(err, session.ErrBadArgument) {
		t.Errorf("nil session: %v", err)
	}
	for _, p := range []string{"", "x", "/x/", "/a/../b", "/a\x00b", "/"} {
		if _, err := semaphore.NewSharedCount(s, p, 1); !errors.Is(err, session.ErrBadArgument) {
			t.Errorf("path %q: %v, want ErrBadArgument", p, err)
		}
	}
	c := newCount(t, s, countPath, 1)
	for _, n := range []int{-1, semaphore.MaxCount + 1} {
		if _, err := c.Set(ctx, n); !errors.Is(err, session.ErrBadArgument) {
			t.Errorf("Set(%d) = %v, want ErrBadArgument", n, err)
		}
		if _, _, err := c.TrySet(ctx, semaphore.CountValue{}, n); !errors.Is(err, session.ErrBadArgument) {
			t.Errorf("TrySet(%d) = %v, want ErrBadArgument", n, err)
		}
	}
	if ok, _, err := raw.Exists(ns.Path(countPath)); err != nil || ok {
		t.Fatalf("bad values wrote the node: %v %v", ok, err)
	}
	//lint:ignore SA1012 a nil context is the bad input under test
	if _, err := c.Get(nil); !errors.Is(err, session.ErrBadArgument) { //nolint:staticcheck
		t.Errorf("Get(nil) = %v, want ErrBadArgument", err)
	}
	if err := sessiontest.Core(s).EnsureContainers(ctx, ns.Root+"/sem"); err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Create(ns.Path(countPath), []byte("12345"), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Get(ctx); !errors.Is(err, semaphore.ErrBadData) {
		t.Fatalf("Get of 5 bytes = %v, want ErrBadData", err)
	}
	sem := newShared(t, s, c)
	if _, err := sem.Acquire(ctx); !errors.Is(err, semaphore.ErrBadData) {
		t.Fatalf("Acquire with an unreadable maximum = %v, want ErrBadData", err)
	}
	if k := children(t, raw, ns, semaphore.LocksDir); len(k) != 0 {
		t.Fatalf("nodes left: %v", k)
	}
	// A negative value written by another client reads as it is.
	if _, err := raw.Set(ns.Path(countPath), be4(-5), -1); err != nil {
		t.Fatal(err)
	}
	if v, err := c.Get(ctx); err != nil || v.Count != -5 {
		t.Fatalf("Get of -5 = %+v, %v", v, err)
	}
}

// Raising the shared maximum wakes a waiter, with no lease given back.
func TestSharedMaxGrowsWakesWaiter(t *testing.T) {
	ns := zktest.NewNamespace(t)
	ctx := ctxT(t)
	s1, s2 := connect(t, ns), connect(t, ns)
	c1, c2 := newCount(t, s1, countPath, 1), newCount(t, s2, countPath, 1)
	a, b := newShared(t, s1, c1), newShared(t, s2, c2)
	l, err := a.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := acquireAsync(ctx, b, 1)
	waitNodes(t, ns.Conn(t), ns, semaphore.LocksDir, 1)
	notAcquired(t, got)
	if _, err := c1.Set(ctx, 2); err != nil {
		t.Fatal(err)
	}
	r := sessiontest.Recv(t, got, wait, "acquire after the maximum grew")
	if r.err != nil {
		t.Fatal(r.err)
	}
	if err := l.Err(); err != nil {
		t.Fatalf("first lease ended: %v", err)
	}
	releaseAll(ctx, append(r.ls, l))
}

// Lowering the shared maximum below the number of holders ends no lease and
// admits nobody until fewer leases than the new maximum are held. The
// holders' nodes are deleted one by one in transactions that also write a
// marker node, whose Stat gives each deletion's zxid: the waiter's lease
// (its token is its node's czxid) must come after the last one, whatever the
// timing.
func TestSharedMaxLowered(t *testing.T) {
	ns := zktest.NewNamespace(t)
	raw := ns.Conn(t)
	ctx := ctxT(t)
	marker := ns.Path("/marker")
	if _, err := raw.Create(marker, nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	hs := connect(t, ns)
	hc := newCount(t, hs, countPath, 3)
	h := newShared(t, hs, hc)
	held, err := h.AcquireN(ctx, 3)
	if err != nil {
		t.Fatal(err)
	}
	ws := connect(t, ns)
	wc := newCount(t, ws, countPath, 3)
	w := newShared(t, ws, wc)
	if _, err := hc.Set(ctx, 1); err != nil {
		t.Fatal(err)
	}
	// The waiter's count has seen the new maximum before it waits.
	for v := range wc.Watch(ctx) {
		if v.Count == 1 {
			break
		}
	}
	got := acquireAsync(ctx, w, 1)
	waitNodes(t, raw, ns, semaphore.LocksDir, 1) // it holds the mutex and waits for room
	for _, l := range held {
		if err := l.Err(); err != nil {
			t.Fatalf("holder's lease ended when the maximum was lowered: %v", err)
		}
	}
	var last int64
	for i, l := range held {
		res, err := raw.Multi(&zk.DeleteRequest{Path: semaphore.NodePath(l), Version: -1}, &zk.SetDataRequest{Path: marker, Version: -1})
		if err != nil {
			t.Fatal(err)
		}
		last = res[1].Stat.Mzxid
		if i < len(held)-1 {
			notAcquired(t, got)
		}
	}
	r := sessiontest.Recv(t, got, wait, "acquire once below the maximum")
	if r.err != nil {
		t.Fatal(r.err)
	}
	t.Logf("last holder left at zxid 0x%x, the waiter's lease was created at 0x%x", last, r.ls[0].Token())
	if r.ls[0].Token() <= last {
		t.Fatalf("the waiter's lease (zxid 0x%x) was created before the last holder left (0x%x)", r.ls[0].Token(), last)
	}
	r.ls[0].Release(ctx)
}

// TestSharedCountTrySetLostAnswerIsUnknown: when the answer to TrySet's
// write is lost (the write lands, the connection breaks, the retry finds the
// version moved on to the count asked for), TrySet does not claim the write:
// it could as well be another client's. It returns that value, false, and
// an error that says the outcome is unknown and matches the connection
// error; a TrySet whose first attempt is answered is unaffected.
func TestSharedCountTrySetLostAnswerIsUnknown(t *testing.T) {
	const opSetData = 5 // ZooKeeper's setData
	ns := zktest.NewNamespace(t)
	raw := ns.Conn(t)
	ctx := ctxT(t)
	s, p := sessiontest.ConnectProxy(t, ns)
	c := newCount(t, s, countPath, 3)
	v, err := c.Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var sets atomic.Int32
	p.OnRequest(func(r zktest.Request) zktest.Action {
		if r.Op == opSetData && sets.Add(1) == 1 {
			return zktest.SwallowReply
		}
		return zktest.Forward
	})
	cur, ok, err := c.TrySet(ctx, v, 4)
	if ok || err == nil || !errors.Is(err, zk.ErrConnectionClosed) || !strings.Contains(err.Error(), "outcome unknown") {
		t.Fatalf("TrySet with its answer lost = %+v, %v, %v; want false and an outcome-unknown connection error", cur, ok, err)
	}
	if cur.Count != 4 || cur.Version != v.Version+1 {
		t.Fatalf("TrySet with its answer lost returned %+v, want the count read back (4 at version %d)", cur, v.Version+1)
	}
	if data, _, err := raw.Get(ns.Path(countPath)); err != nil || string(data) != string(be4(4)) {
		t.Fatalf("node data = %x, %v; want %x (the swallowed write landed)", data, err, be4(4))
	}
	if n := sets.Load(); n < 2 {
		t.Fatalf("%d setData requests, want the lost one and its retry", n)
	}
	next, ok, err := c.TrySet(ctx, cur, 5)
	if err != nil || !ok || next.Count != 5 {
		t.Fatalf("TrySet answered at once = %+v, %v, %v; want 5, true", next, ok, err)
	}
}
