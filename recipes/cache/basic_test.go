package cache_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/internal/testkit/sessiontest"
	"github.com/zkrecipes/zkrecipes/recipes/cache"
	"github.com/zkrecipes/zkrecipes/session"
)

// expect is an event as a test writes it down.
type expect struct {
	typ  cache.EventType
	path string
	data string
}

// checkEvents compares evs with want exactly, and replays them.
func checkEvents(t *testing.T, evs []cache.Event, want []expect) {
	t.Helper()
	ok := len(evs) == len(want)
	for i := 0; ok && i < len(want); i++ {
		ev := evs[i]
		ok = ev.Type == want[i].typ && ev.Node.Path == want[i].path && (want[i].typ == cache.Initialized || string(ev.Node.Data) == want[i].data)
	}
	if !ok {
		t.Fatalf("events %s, want %v", fmtEvents(evs), want)
	}
}

// A node cache on a node that does not exist yet: Initialized with nothing
// before it and Get false; then the node's creation (found by polling, as
// there is no watch on a missing node), a write, a delete and a creation
// again each give one event, in order, and Get follows.
func TestNodeCacheFollowsNode(t *testing.T) {
	ns, raw := zktestNS(t)
	s := sessiontest.Connect(t, ns)
	c := newNode(t, s, "/flag")
	r := record(c.Events())
	r.waitInit(t)
	if _, ok := c.Get(); ok {
		t.Fatal("Get found a node that does not exist")
	}
	select {
	case <-c.Initialized():
	default:
		t.Fatal("Initialized not closed after the Initialized event")
	}
	full := ns.Path("flag")
	st1 := mustCreate(t, raw, full, "a")
	r.WaitFor(t, wait, "Added", func(evs []cache.Event) bool { return len(evs) >= 2 })
	if n, ok := c.Get(); !ok || string(n.Data) != "a" || n.Stat.Czxid != st1.Czxid || n.Path != "/flag" {
		t.Fatalf("Get after the create = %+v, %v", n, ok)
	}
	mustSet(t, raw, full, "b")
	r.WaitFor(t, wait, "Updated", func(evs []cache.Event) bool { return len(evs) >= 3 })
	mustDelete(t, raw, full)
	r.WaitFor(t, wait, "Removed", func(evs []cache.Event) bool { return len(evs) >= 4 })
	if _, ok := c.Get(); ok {
		t.Fatal("Get found the deleted node")
	}
	st2 := mustCreate(t, raw, full, "c")
	evs := r.WaitFor(t, wait, "Added again", func(evs []cache.Event) bool { return len(evs) >= 5 })
	checkEvents(t, evs, []expect{
		{cache.Initialized, "", ""},
		{cache.Added, "/flag", "a"},
		{cache.Updated, "/flag", "b"},
		{cache.Removed, "/flag", "b"},
		{cache.Added, "/flag", "c"},
	})
	if evs[4].Node.Stat.Czxid != st2.Czxid {
		t.Fatalf("second Added has czxid %d, want %d", evs[4].Node.Stat.Czxid, st2.Czxid)
	}
	if _, err := replay(evs); err != nil {
		t.Fatal(err)
	}
}

// A children cache loads the children that exist (Added for each, then
// Initialized), then reports an added child, a write and a removed child
// once each; List and Get match the server.
func TestChildrenCacheFollowsChildren(t *testing.T) {
	ns, raw := zktestNS(t)
	dir := ns.Path("dir")
	mustCreate(t, raw, dir, "")
	mustCreate(t, raw, dir+"/a", "a0")
	mustCreate(t, raw, dir+"/b", "b0")
	s := sessiontest.Connect(t, ns)
	c := newChildren(t, s, "/dir")
	r := record(c.Events())
	r.waitInit(t)
	<-c.Initialized()
	if d := sameAs(c.List(), rawChildren(t, raw, dir, "/dir")); d != "" {
		t.Fatalf("after the load: %s", d)
	}
	mustCreate(t, raw, dir+"/c", "c0")
	r.WaitFor(t, wait, "Added c", func(evs []cache.Event) bool { return len(evs) >= 4 })
	mustSet(t, raw, dir+"/a", "a1")
	r.WaitFor(t, wait, "Updated a", func(evs []cache.Event) bool { return len(evs) >= 5 })
	mustDelete(t, raw, dir+"/b")
	evs := r.WaitFor(t, wait, "Removed b", func(evs []cache.Event) bool { return len(evs) >= 6 })
	checkEvents(t, evs, []expect{
		{cache.Added, "/dir/a", "a0"},
		{cache.Added, "/dir/b", "b0"},
		{cache.Initialized, "", ""},
		{cache.Added, "/dir/c", "c0"},
		{cache.Updated, "/dir/a", "a1"},
		{cache.Removed, "/dir/b", "b0"},
	})
	if d := sameAs(c.List(), rawChildren(t, raw, dir, "/dir")); d != "" {
		t.Fatal(d)
	}
	if n, ok := c.Get("a"); !ok || string(n.Data) != "a1" || n.Name() != "a" {
		t.Fatalf("Get(a) = %+v, %v", n, ok)
	}
	if _, ok := c.Get("b"); ok {
		t.Fatal("Get(b) found the removed child")
	}
	if _, err := replay(evs); err != nil {
		t.Fatal(err)
	}
}

// A children cache on a path that does not exist never creates it; it
// loads an empty list, then finds the path and its children once they are
// created (by polling), and a deleted parent removes every child.
func TestChildrenCacheMissingParent(t *testing.T) {
	ns, raw := zktestNS(t)
	dir := ns.Path("dir")
	s := sessiontest.Connect(t, ns)
	c := newChildren(t, s, "/dir")
	r := record(c.Events())
	r.waitInit(t)
	if l := c.List(); len(l) != 0 {
		t.Fatalf("List = %v on a missing path", l)
	}
	if ok, _, err := raw.Exists(dir); err != nil || ok {
		t.Fatalf("the cache's path after the load: exists %v, %v", ok, err)
	}
	mustCreate(t, raw, dir, "")
	mustCreate(t, raw, dir+"/x", "x0")
	r.WaitFor(t, wait, "Added x", func(evs []cache.Event) bool { return len(evs) >= 2 })
	mustDelete(t, raw, dir+"/x")
	mustDelete(t, raw, dir)
	evs := r.WaitFor(t, wait, "Removed x", func(evs []cache.Event) bool { return len(evs) >= 3 })
	checkEvents(t, evs, []expect{
		{cache.Initialized, "", ""},
		{cache.Added, "/dir/x", "x0"},
		{cache.Removed, "/dir/x", "x0"},
	})
}

// A node deleted and created again with the same data while the cache was
// away, so that its version is 0 again, is reported as Removed then Added:
// the incarnation is told by its czxid, not by its version.
func TestRecreatedWhileAway(t *testing.T) {
	ns, raw := zktestNS(t)
	full := ns.Path("flag")
	mustCreate(t, raw, full, "same")
	s, proxy := sessiontest.ConnectProxy(t, ns, longSession)
	rec := sessiontest.Record(t, s)
	c := newNode(t, s, "/flag")
	r := record(c.Events())
	r.waitInit(t)
	proxy.Refuse(true)
	proxy.Cut()
	rec.Wait(t, wait, session.Suspended)
	mustDelete(t, raw, full)
	st := mustCreate(t, raw, full, "same")
	proxy.Refuse(false)
	rec.Wait(t, wait, session.Reconnected)
	evs := r.WaitFor(t, convergeBound, "Removed and Added", func(evs []cache.Event) bool { return len(evs) >= 4 })
	checkEvents(t, evs, []expect{
		{cache.Added, "/flag", "same"},
		{cache.Initialized, "", ""},
		{cache.Removed, "/flag", "same"},
		{cache.Added, "/flag", "same"},
	})
	if evs[3].Node.Stat.Czxid != st.Czxid || evs[3].Node.Stat.Version != 0 {
		t.Fatalf("Added %+v, want czxid %d version 0", evs[3].Node.Stat, st.Czxid)
	}
}

// Get and List never block on the network: on a session whose timeout is
// long, so that a request would hang for tens of seconds on a partitioned
// connection, they return the cached values at once while partitioned.
func TestReadsDoNotBlockWhilePartitioned(t *testing.T) {
	ns, raw := zktestNS(t)
	dir := ns.Path("dir")
	mustCreate(t, raw, dir, "d")
	mustCreate(t, raw, dir+"/a", "a0")
	s, proxy := sessiontest.ConnectProxy(t, ns, session.WithSessionTimeout(45*time.Second))
	nc := newNode(t, s, "/dir")
	cc := newChildren(t, s, "/dir")
	record(nc.Events()).waitInit(t)
	record(cc.Events()).waitInit(t)
	proxy.Partition()
	defer proxy.Heal()
	// A write the cache cannot see, and a raw read to be sure the server
	// has it, before the reads.
	mustSet(t, raw, dir+"/a", "a1")
	got := make(chan []cache.Node, 1)
	go func() {
		n, _ := nc.Get()
		got <- append(cc.List(), n)
	}()
	l := sessiontest.Recv(t, got, 10*time.Second, "reads while partitioned")
	if len(l) != 2 || string(l[0].Data) != "a0" || !bytes.Equal(l[1].Data, []byte("d")) {
		t.Fatalf("reads while partitioned = %+v, want the cached a0 and d", l)
	}
}
