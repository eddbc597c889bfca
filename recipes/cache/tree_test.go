package cache_test

import (
	"errors"
	"fmt"
	"math/rand"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/internal/testkit/sessiontest"
	"github.com/zkrecipes/zkrecipes/recipes/cache"
	"github.com/zkrecipes/zkrecipes/session"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// A tree cache loads the root and every node below it, parents before
// children, then Initialized; nested creates, a write and deletes each give
// their events, a parent's Added before its children's, children's Removed
// before their parent's; Get and Children match the server.
func TestTreeFollowsTree(t *testing.T) {
	ns, raw := zktestNS(t)
	root := ns.Path("t")
	mustCreate(t, raw, root, "r")
	mustCreate(t, raw, root+"/a", "a")
	mustCreate(t, raw, root+"/a/x", "ax")
	mustCreate(t, raw, root+"/b", "b")
	s := sessiontest.Connect(t, ns)
	c := newTree(t, s, "/t")
	r := record(c.Events())
	evs := r.waitInit(t)
	checkEvents(t, evs, []expect{
		{cache.Added, "/t", "r"},
		{cache.Added, "/t/a", "a"},
		{cache.Added, "/t/a/x", "ax"},
		{cache.Added, "/t/b", "b"},
		{cache.Initialized, "", ""},
	})
	mark := len(evs)
	// A subtree created at once (its nodes may be read in one listing).
	mustCreate(t, raw, root+"/b/y", "by")
	mustCreate(t, raw, root+"/b/y/z", "byz")
	r.WaitFor(t, wait, "b/y/z", func(evs []cache.Event) bool { return hasData(evs, "/t/b/y/z", "byz") })
	mustSet(t, raw, root+"/a/x", "ax1")
	r.WaitFor(t, wait, "a/x's write", func(evs []cache.Event) bool { return hasData(evs, "/t/a/x", "ax1") })
	mustDelete(t, raw, root+"/b/y/z")
	mustDelete(t, raw, root+"/b/y")
	mustDelete(t, raw, root+"/b")
	evs = r.WaitFor(t, wait, "b's Removed", func(evs []cache.Event) bool {
		return len(evs) > 0 && evs[len(evs)-1].Type == cache.Removed && evs[len(evs)-1].Node.Path == "/t/b"
	})
	checkEvents(t, evs[mark:], []expect{
		{cache.Added, "/t/b/y", "by"},
		{cache.Added, "/t/b/y/z", "byz"},
		{cache.Updated, "/t/a/x", "ax1"},
		{cache.Removed, "/t/b/y/z", "byz"},
		{cache.Removed, "/t/b/y", "by"},
		{cache.Removed, "/t/b", "b"},
	})
	if _, err := replay(evs); err != nil {
		t.Fatal(err)
	}
	if d := sameAs(cachedTree(c, "/t"), rawTree(t, raw, root, "/t", -1)); d != "" {
		t.Fatal(d)
	}
	kids, ok := c.Children("/t")
	if !ok || len(kids) != 1 || kids[0].Name() != "a" {
		t.Fatalf("Children(/t) = %v, %v", kids, ok)
	}
	if n, ok := c.Get("/t/a/x"); !ok || string(n.Data) != "ax1" {
		t.Fatalf("Get(/t/a/x) = %+v, %v", n, ok)
	}
	for _, p := range []string{"/t/b", "/t/", "/tx", "/", "", "/t/a/x/none"} {
		if n, ok := c.Get(p); ok {
			t.Errorf("Get(%q) = %+v, want nothing", p, n)
		}
	}
	if kids, ok := c.Children("/t/b"); ok {
		t.Errorf("Children of a removed node = %v", kids)
	}
}

// WithMaxDepth: depth 0 caches the root alone; depth 1 the root and its
// children, and a grandchild created later gives no event. A node at the
// maximum depth holds a data watch and no child watch; a node above it one
// of each (the caches count 1 and 3; the server holds data watches on the
// root and on a).
func TestTreeMaxDepth(t *testing.T) {
	ns, raw := zktestNS(t)
	root := ns.Path("t")
	mustCreate(t, raw, root, "r")
	mustCreate(t, raw, root+"/a", "a")
	mustCreate(t, raw, root+"/a/x", "ax")
	s := sessiontest.Connect(t, ns)
	c0 := newTree(t, s, "/t", cache.WithMaxDepth(0))
	c1 := newTree(t, s, "/t", cache.WithMaxDepth(1))
	r0, r1 := record(c0.Events()), record(c1.Events())
	checkEvents(t, r0.waitInit(t), []expect{{cache.Added, "/t", "r"}, {cache.Initialized, "", ""}})
	checkEvents(t, r1.waitInit(t), []expect{{cache.Added, "/t", "r"}, {cache.Added, "/t/a", "a"}, {cache.Initialized, "", ""}})
	// Both caches on one session watch the root's data (one watch on the
	// server); c1 adds its child watch and a's data watch.
	checkServerWatches(t, ns, s, "after the load", 1+3, root, root+"/a")
	mustCreate(t, raw, root+"/b", "b")
	mustCreate(t, raw, root+"/a/y", "ay") // below the maximum: no event, no watch fires
	mustSet(t, raw, root, "r1")
	evs := r1.WaitFor(t, wait, "the root's write", func(evs []cache.Event) bool { return hasData(evs, "/t", "r1") })
	r0.WaitFor(t, wait, "the root's write", func(evs []cache.Event) bool { return hasData(evs, "/t", "r1") })
	for _, ev := range append(evs, r0.Events()...) {
		if strings.Count(ev.Node.Path, "/") > 2 {
			t.Fatalf("event below the maximum depth: %s", fmtEvents(evs))
		}
	}
	if d := sameAs(cachedTree(c1, "/t"), rawTree(t, raw, root, "/t", 1)); d != "" {
		t.Fatal(d)
	}
	if d := sameAs(cachedTree(c0, "/t"), rawTree(t, raw, root, "/t", 0)); d != "" {
		t.Fatal(d)
	}
	if kids, ok := c1.Children("/t/a"); !ok || len(kids) != 0 {
		t.Fatalf("Children at the maximum depth = %v, %v; want none", kids, ok)
	}
}

// A tree cache on a root that does not exist yet: Initialized alone; the
// root and a child created later are found (by polling: no watch is set on a
// missing node); the root's delete (after its child's) removes both,
// children first; the root created again is found again.
func TestTreeRootLater(t *testing.T) {
	ns, raw := zktestNS(t)
	root := ns.Path("t")
	s := sessiontest.Connect(t, ns)
	c := newTree(t, s, "/t")
	r := record(c.Events())
	r.waitInit(t)
	if ok, _, err := raw.Exists(root); err != nil || ok {
		t.Fatalf("the root after the load: exists %v, %v", ok, err)
	}
	mustCreate(t, raw, root, "r")
	mustCreate(t, raw, root+"/a", "a")
	r.WaitFor(t, wait, "a", func(evs []cache.Event) bool { return hasData(evs, "/t/a", "a") })
	mustDelete(t, raw, root+"/a")
	mustDelete(t, raw, root)
	r.WaitFor(t, wait, "the root's Removed", func(evs []cache.Event) bool { return countType(evs, cache.Removed) == 2 })
	if _, ok := c.Get("/t"); ok {
		t.Fatal("Get found the deleted root")
	}
	mustCreate(t, raw, root, "r2")
	evs := r.WaitFor(t, wait, "the root again", func(evs []cache.Event) bool { return hasData(evs, "/t", "r2") })
	checkEvents(t, evs, []expect{
		{cache.Initialized, "", ""},
		{cache.Added, "/t", "r"},
		{cache.Added, "/t/a", "a"},
		{cache.Removed, "/t/a", "a"},
		{cache.Removed, "/t", "r"},
		{cache.Added, "/t", "r2"},
	})
	if _, err := replay(evs); err != nil {
		t.Fatal(err)
	}
}

// Bad input to NewTree, and WithMaxDepth given to the other caches: an
// error matching session.ErrBadArgument naming the cache once, no cache.
func TestTreeBadInput(t *testing.T) {
	ns := zktest.NewNamespace(t)
	s := sessiontest.Connect(t, ns)
	var nilSess *session.Session
	check := func(name string, err error, ok bool) {
		t.Helper()
		if !errors.Is(err, session.ErrBadArgument) || ok {
			t.Errorf("%s: err = %v, cache returned %v; want session.ErrBadArgument and none", name, err, ok)
		} else if msg := err.Error(); !strings.HasPrefix(msg, "cache ") || strings.Count(msg, "cache") != 1 {
			t.Errorf("%s: message %q does not name the cache once", name, msg)
		}
	}
	for _, tc := range []struct {
		name string
		sess *session.Session
		path string
		opts []cache.Option
	}{
		{"nil session", nil, "/t", nil},
		{"typed nil session", nilSess, "/t", nil},
		{"empty path", s, "", nil},
		{"relative path", s, "t", nil},
		{"trailing slash", s, "/t/", nil},
		{"dot segment", s, "/t/./a", nil},
		{"negative depth", s, "/t", []cache.Option{cache.WithMaxDepth(-1)}},
		{"nil option", s, "/t", []cache.Option{nil}},
	} {
		c, err := cache.NewTree(tc.sess, tc.path, tc.opts...)
		check(tc.name, err, c != nil)
	}
	nc, err := cache.NewNode(s, "/t", cache.WithMaxDepth(1))
	check("NewNode with a depth", err, nc != nil)
	cc, err := cache.NewChildren(s, "/t", cache.WithMaxDepth(1))
	check("NewChildren with a depth", err, cc != nil)
}

// After a reconnect to the same session, and after a new session, a tree
// cache reports exactly what changed while it was away, in tree order: a
// write deep down, a subtree deleted (children first), a node deleted and
// created again with other children, a new subtree (parents first); a
// sentinel create after the reload comes right after those.
func TestTreeReconnectReportsExactlyWhatChanged(t *testing.T) {
	for _, newSession := range []bool{false, true} {
		name := "same session"
		if newSession {
			name = "new session"
		}
		t.Run(name, func(t *testing.T) {
			ns, raw := zktestNS(t)
			root := ns.Path("t")
			for _, p := range []string{"", "/a", "/a/x", "/b", "/b/y", "/b/y/z", "/c", "/c/old", "/d"} {
				mustCreate(t, raw, root+p, "0")
			}
			var c *cache.TreeCache
			r, mark := changeWhileAway(t, ns, newSession, func(s *session.Session) *recorder {
				c = newTree(t, s, "/t")
				return record(c.Events())
			}, func() {
				mustSet(t, raw, root+"/a/x", "1")
				mustDelete(t, raw, root+"/b/y/z")
				mustDelete(t, raw, root+"/b/y")
				mustDelete(t, raw, root+"/c/old")
				mustDelete(t, raw, root+"/c")
				mustCreate(t, raw, root+"/c", "0")
				mustCreate(t, raw, root+"/c/new", "0")
				mustCreate(t, raw, root+"/e", "0")
				mustCreate(t, raw, root+"/e/f", "0")
			})
			evs := upToSentinel(t, raw, r, mark, func(evs []cache.Event) bool { return hasPath(evs, "/t/e/f") }, root+"/z", "/t/z")
			checkEvents(t, evs[mark:], []expect{
				{cache.Updated, "/t/a/x", "1"},
				{cache.Removed, "/t/b/y/z", "0"},
				{cache.Removed, "/t/b/y", "0"},
				{cache.Removed, "/t/c/old", "0"},
				{cache.Removed, "/t/c", "0"},
				{cache.Added, "/t/c", "0"},
				{cache.Added, "/t/c/new", "0"},
				{cache.Added, "/t/e", "0"},
				{cache.Added, "/t/e/f", "0"},
				{cache.Added, "/t/z", "sentinel"},
			})
			if _, err := replay(evs); err != nil {
				t.Fatal(err)
			}
			if d := sameAs(cachedTree(c, "/t"), rawTree(t, raw, root, "/t", -1)); d != "" {
				t.Fatal(d)
			}
		})
	}
}

func hasPath(evs []cache.Event, p string) bool {
	for _, ev := range evs {
		if ev.Node.Path == p {
			return true
		}
	}
	return false
}

// startTreeWriter changes the tree below root (a server path) at random
// until halted: creates (of nodes whose parent may be missing), writes,
// deletes (of nodes that may have children), and deletes followed at once
// by a create.
func startTreeWriter(raw *zk.Conn, root string, seed int64) *writer {
	rng := rand.New(rand.NewSource(seed))
	acl := zk.WorldACL(zk.PermAll)
	return startWriter(func(n int) error {
		p := root
		for d := rng.Intn(3) + 1; d > 0; d-- {
			p += fmt.Sprintf("/k%d", rng.Intn(3))
		}
		data := []byte(fmt.Sprintf("v%d", n))
		var e error
		switch op := rng.Intn(10); {
		case op < 4:
			_, e = raw.Set(p, data, -1)
			if errors.Is(e, zk.ErrNoNode) {
				_, e = raw.Create(p, data, 0, acl)
			}
		case op < 7:
			_, e = raw.Create(p, data, 0, acl)
		case op < 9:
			e = raw.Delete(p, -1)
		default:
			if e = raw.Delete(p, -1); e == nil {
				_, e = raw.Create(p, data, 0, acl)
			}
		}
		if e != nil && !errors.Is(e, zk.ErrNoNode) && !errors.Is(e, zk.ErrNodeExists) && !errors.Is(e, zk.ErrNotEmpty) {
			return e
		}
		return nil
	})
}

// Under each fault, while a writer changes a tree three levels deep, a
// tree cache converges to the server's tree (a raw read) within
// convergeBound of the writer's stop once the connection is back, and its
// events, replayed from nothing, are consistent (and in tree order: no
// Added below a node not held) and give its copy. At the end the server
// holds a data watch on each node of the copy and on no other node for the
// session (one per node and kind, whoever set it), and go-zookeeper none.
func TestTreeConvergesUnderFaults(t *testing.T) {
	for i, f := range faultsNamed("cut", "partition past the timeout", "expiry") {
		t.Run(f.name, func(t *testing.T) {
			ns, raw := zktestNS(t)
			root := ns.Path("t")
			mustCreate(t, raw, root, "")
			seed := time.Now().UnixNano() + int64(i)
			var c *cache.TreeCache
			var r *recorder
			run := convergeThrough(t, ns, f, func(s *session.Session) (*writer, func(string), func() bool) {
				c = newTree(t, s, "/t")
				r = record(c.Events())
				r.waitInit(t)
				w := startTreeWriter(ns.Conn(t), root, seed)
				following := func(when string) {
					t.Helper()
					n := len(r.Events())
					r.WaitFor(t, convergeBound, "events "+when, func(evs []cache.Event) bool { return len(evs) >= n+20 })
				}
				return w, following, func() bool {
					return sameAs(cachedTree(c, "/t"), rawTree(t, raw, root, "/t", -1)) == ""
				}
			})
			evs := r.Events()
			cp, err := replay(evs)
			if err != nil {
				t.Fatalf("seed %d: %v\nevents %s", seed, err, fmtEvents(evs))
			}
			if err := treeOrdered(evs); err != nil {
				t.Fatalf("seed %d: %v", seed, err)
			}
			if d := sameAsNodes(nodesOf(cp), cachedTree(c, "/t")); d != "" {
				t.Fatalf("the replayed events differ from the copy: %s", d)
			}
			// A write after the writer stopped, to know every watch is set.
			mustSet(t, raw, root, "last")
			r.WaitFor(t, wait, "the last write", func(evs []cache.Event) bool { return hasData(evs, "/t", "last") })
			var paths []string
			for _, n := range cachedTree(c, "/t") {
				paths = append(paths, root+n.Path[len("/t"):])
			}
			checkServerWatches(t, ns, run.s, "at the end", 2*len(paths), paths...)
			t.Logf("seed %d: %d writes; states %v; converged %v after the writer stopped; %d events, %d nodes",
				seed, run.ops, run.rec.States(), run.took.Round(time.Millisecond), len(evs), len(cp))
		})
	}
}

// treeOrdered checks that no event adds a node whose parent (below the
// root) is not held, and none removes a node that still holds children.
func treeOrdered(evs []cache.Event) error {
	held := map[string]bool{}
	kids := map[string]int{}
	for i, ev := range evs {
		if ev.Type == cache.Initialized {
			continue
		}
		p := ev.Node.Path
		parent := p[:strings.LastIndexByte(p, '/')]
		switch ev.Type {
		case cache.Added:
			if strings.Count(p, "/") > 1 && !held[parent] {
				return fmt.Errorf("event %d: Added %s before its parent", i, p)
			}
			held[p] = true
			kids[parent]++
		case cache.Removed:
			if kids[p] > 0 {
				return fmt.Errorf("event %d: Removed %s before its %d children", i, p, kids[p])
			}
			delete(held, p)
			kids[parent]--
		}
	}
	return nil
}

// One watch per node and kind, held by the server alone: two tree caches
// of the same tree on one session, and writes, a new subtree, a delete and a
// reconnect, leave the server holding, for the session, one data watch per
// node (wchc) and go-zookeeper none (the session's registrations stay at 0,
// and the reconnect sends no setWatches); Session.Watches counts each
// cache's data and child watches. After the reconnect, whose reload sets
// every watch again, a write and new children at each level give their
// events.
func TestTreeOneWatchPerNode(t *testing.T) {
	ns, raw := zktestNS(t)
	root := ns.Path("t")
	for _, p := range []string{"", "/a", "/a/x", "/b"} {
		mustCreate(t, raw, root+p, "0")
	}
	s, proxy, tap := sessiontest.ConnectProxyTap(t, ns, longSession)
	rec := sessiontest.Record(t, s)
	c1, c2 := newTree(t, s, "/t"), newTree(t, s, "/t")
	r1, r2 := record(c1.Events()), record(c2.Events())
	r1.waitInit(t)
	r2.waitInit(t)
	check := func(when string, paths ...string) {
		t.Helper()
		full := make([]string, len(paths))
		for i, p := range paths {
			full[i] = root + p
		}
		checkServerWatches(t, ns, s, when, 2*2*len(paths), full...)
	}
	check("after the load", "", "/a", "/a/x", "/b")
	mustSet(t, raw, root+"/a/x", "1")
	mustCreate(t, raw, root+"/c", "0")
	mustCreate(t, raw, root+"/c/d", "0")
	mustDelete(t, raw, root+"/b")
	for _, r := range []*recorder{r1, r2} {
		r.WaitFor(t, wait, "the changes", func(evs []cache.Event) bool {
			return hasData(evs, "/t/a/x", "1") && hasPath(evs, "/t/c/d") && countType(evs, cache.Removed) == 1
		})
	}
	check("after the changes", "", "/a", "/a/x", "/c", "/c/d")
	proxy.Cut()
	rec.Wait(t, wait, session.Reconnected)
	mustSet(t, raw, root+"/a", "1") // a change after the reconnect, to know the reload is done
	r2.WaitFor(t, convergeBound, "a's write", func(evs []cache.Event) bool { return hasData(evs, "/t/a", "1") })
	noSetWatches(t, tap)
	check("after a reconnect", "", "/a", "/a/x", "/c", "/c/d")
	mustSet(t, raw, root+"/a/x", "2")
	for _, p := range []string{"/e", "/a/y", "/c/d/z"} {
		mustCreate(t, raw, root+p, "new")
	}
	for _, r := range []*recorder{r1, r2} {
		r.WaitFor(t, wait, "the changes after the reconnect", func(evs []cache.Event) bool {
			return hasData(evs, "/t/a/x", "2") && hasPath(evs, "/t/e") && hasPath(evs, "/t/a/y") && hasPath(evs, "/t/c/d/z")
		})
	}
}

// A tree cache runs the same goroutines whatever its size: its reading
// goroutine and its event pump, none per watch (their events come through
// one callback of the session's): a tree of 301 nodes holding 602 watches
// adds two goroutines once loaded, and Close ends them all (TestMain's leak
// check).
func TestTreeGoroutines(t *testing.T) {
	ns, raw := zktestNS(t)
	root := ns.Path("t")
	mustCreate(t, raw, root, "")
	acl := zk.WorldACL(zk.PermAll)
	for i := 0; i < 10; i++ {
		p := fmt.Sprintf("%s/p%d", root, i)
		ops := []any{&zk.CreateRequest{Path: p, Data: []byte("p"), Acl: acl}}
		for j := 0; j < 29; j++ {
			ops = append(ops, &zk.CreateRequest{Path: fmt.Sprintf("%s/c%d", p, j), Data: []byte("c"), Acl: acl})
		}
		if _, err := raw.Multi(ops...); err != nil {
			t.Fatal(err)
		}
	}
	s := sessiontest.Connect(t, ns)
	before := runtime.NumGoroutine()
	c := newTree(t, s, "/t", cache.WithEvents(false))
	sessiontest.Recv(t, c.Initialized(), wait, "Initialized")
	if n := len(cachedTree(c, "/t")); n != 301 {
		t.Fatalf("%d nodes cached, want 301", n)
	}
	zktest.Eventually(t, wait, func() bool { return s.Watches() == 602 }, "the cache to count 602 watches (counts %d)", s.Watches())
	// The load's readers are gone once it is done.
	zktest.Eventually(t, wait, func() bool { return cacheGoroutines() == 2 }, "2 goroutines of the cache's (has %d; %d more in all)",
		cacheGoroutines(), runtime.NumGoroutine()-before)
}

// cacheGoroutines counts the goroutines this package started.
func cacheGoroutines() int {
	buf := make([]byte, 1<<22)
	stacks := string(buf[:runtime.Stack(buf, true)])
	return strings.Count(stacks, "created by github.com/zkrecipes/zkrecipes/recipes/cache.")
}

// A node deleted and created again while a read of it or below it is on
// its way (the proxy holds the read until the test has replaced the node):
// what the read finds is the new node's, never put under the old one, so
// no node is removed and added again as the same incarnation. Three
// orders: a new child read after its parent's listing (the listing's Pzxid
// tells), a child read again after its write, before a listing of its
// parent (that listing's Czxid tells), and a new node's children listed
// after its data was read (the listing's Czxid tells).
func TestTreeParentReplacedDuringRead(t *testing.T) {
	cases := []struct {
		name    string
		op      int32
		held    string // below the root
		trigger func(raw *zk.Conn, root string)
		want    []expect // among the events, at the end
	}{
		{"child read after the listing", zktest.OpGetData, "/p/y",
			func(raw *zk.Conn, root string) { mustCreate(t, raw, root+"/p/y", "y1") },
			[]expect{{cache.Added, "/t/p", "p2"}, {cache.Added, "/t/p/x", "x3"}, {cache.Added, "/t/p/y", "y2"}}},
		{"child read before the listing", zktest.OpGetData, "/p/x",
			func(raw *zk.Conn, root string) { mustSet(t, raw, root+"/p/x", "x2") },
			[]expect{{cache.Added, "/t/p", "p2"}, {cache.Added, "/t/p/x", "x3"}, {cache.Added, "/t/p/y", "y2"}}},
		{"children listed after the data", zktest.OpGetChildren2, "/p",
			func(raw *zk.Conn, root string) {
				// A new p: the cache reads its data, then lists it.
				replaceParent(t, raw, root, "p1", "x1")
			},
			[]expect{{cache.Added, "/t/p", "p2"}, {cache.Added, "/t/p/x", "x3"}, {cache.Added, "/t/p/y", "y2"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ns, raw := zktestNS(t)
			root := ns.Path("t")
			mustCreate(t, raw, root, "r")
			mustCreate(t, raw, root+"/p", "p0")
			mustCreate(t, raw, root+"/p/x", "x0")
			s, proxy := sessiontest.ConnectProxy(t, ns, longSession)
			c := newTree(t, s, "/t")
			r := record(c.Events())
			r.waitInit(t)
			var once sync.Once
			replaced := make(chan struct{})
			proxy.OnRequest(func(req zktest.Request) zktest.Action {
				if req.Op == tc.op && req.Path == root+tc.held {
					once.Do(func() {
						defer close(replaced)
						replaceParent(t, raw, root, "p2", "x3", "y2")
					})
				}
				return zktest.Forward
			})
			tc.trigger(raw, root)
			sessiontest.Recv(t, replaced, wait, "the held read")
			r.WaitFor(t, wait, "the new node and its children", func(evs []cache.Event) bool {
				for _, w := range tc.want {
					if !hasData(evs, w.path, w.data) {
						return false
					}
				}
				return true
			})
			zktest.Eventually(t, wait, func() bool {
				return sameAs(cachedTree(c, "/t"), rawTree(t, raw, root, "/t", -1)) == ""
			}, "the cache to match the server")
			evs := r.Events()
			if _, err := replay(evs); err != nil {
				t.Fatalf("%v\nevents %s", err, fmtEvents(evs))
			}
			if err := treeOrdered(evs); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// replaceParent deletes root/p with its children and creates it again with
// data and children x (and y) of the data given, in one transaction. It
// may run on a proxy's goroutine: it reports a failure with t.Error.
func replaceParent(t *testing.T, raw *zk.Conn, root, data string, kids ...string) {
	p := root + "/p"
	old, _, err := raw.Children(p)
	if err != nil {
		t.Errorf("list %s: %v", p, err)
		return
	}
	acl := zk.WorldACL(zk.PermAll)
	var ops []any
	for _, k := range old {
		ops = append(ops, &zk.DeleteRequest{Path: p + "/" + k, Version: -1})
	}
	ops = append(ops, &zk.DeleteRequest{Path: p, Version: -1}, &zk.CreateRequest{Path: p, Data: []byte(data), Acl: acl})
	for i, d := range kids {
		ops = append(ops, &zk.CreateRequest{Path: p + "/" + string(rune('x'+i)), Data: []byte(d), Acl: acl})
	}
	if _, err := raw.Multi(ops...); err != nil {
		t.Errorf("replace %s: %v", p, err)
	}
}
