package cache_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/zkrecipes/zkrecipes/internal/testkit/sessiontest"
	"github.com/zkrecipes/zkrecipes/recipes/cache"
	"github.com/zkrecipes/zkrecipes/session"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// Bad input gives an error matching session.ErrBadArgument that names the
// cache and its path once, and starts nothing (the leak check of TestMain
// would see a goroutine).
func TestBadInput(t *testing.T) {
	ns := zktest.NewNamespace(t)
	s := sessiontest.Connect(t, ns)
	var nilSess *session.Session
	cases := []struct {
		name string
		sess *session.Session
		path string
		opts []cache.Option
	}{
		{"nil session", nil, "/a", nil},
		{"typed nil session", nilSess, "/a", nil},
		{"empty path", s, "", nil},
		{"relative path", s, "a", nil},
		{"root", s, "/", nil},
		{"trailing slash", s, "/a/", nil},
		{"dot segment", s, "/a/../b", nil},
		{"NUL", s, "/a\x00b", nil},
		{"nil option", s, "/a", []cache.Option{nil}},
		{"nil logger", s, "/a", []cache.Option{cache.WithLogger(nil)}},
	}
	for _, tc := range cases {
		nc, err1 := cache.NewNode(tc.sess, tc.path, tc.opts...)
		cc, err2 := cache.NewChildren(tc.sess, tc.path, tc.opts...)
		for _, err := range []error{err1, err2} {
			if !errors.Is(err, session.ErrBadArgument) {
				t.Errorf("%s: err = %v, want session.ErrBadArgument", tc.name, err)
				continue
			}
			if msg := err.Error(); !strings.HasPrefix(msg, "cache ") || strings.Count(msg, "cache") != 1 {
				t.Errorf("%s: message %q does not name the cache once", tc.name, msg)
			}
		}
		if nc != nil || cc != nil {
			t.Errorf("%s: a cache was returned with the error", tc.name)
		}
	}
	for typ, want := range map[cache.EventType]string{cache.Added: "Added", cache.Updated: "Updated", cache.Removed: "Removed", cache.Initialized: "Initialized", 9: "EventType(9)"} {
		if got := typ.String(); got != want {
			t.Errorf("String() = %q, want %q", got, want)
		}
	}
}

// Close while the first load cannot finish (the connection is partitioned
// before the cache starts): Close returns promptly, Events is closed,
// Initialized never is, and Close again is a no-op. The goroutines are gone
// (TestMain's leak check).
func TestCloseWhileLoading(t *testing.T) {
	ns := zktest.NewNamespace(t)
	s, proxy := sessiontest.ConnectProxy(t, ns, longSession)
	proxy.Partition()
	defer proxy.Heal()
	cc, err := cache.NewChildren(s, "/dir")
	if err != nil {
		t.Fatal(err)
	}
	nc, err := cache.NewNode(s, "/node")
	if err != nil {
		t.Fatal(err)
	}
	tc, err := cache.NewTree(s, "/tree")
	if err != nil {
		t.Fatal(err)
	}
	rc, rn, rt := record(cc.Events()), record(nc.Events()), record(tc.Events())
	closed := make(chan struct{})
	go func() {
		cc.Close()
		nc.Close()
		tc.Close()
		close(closed)
	}()
	sessiontest.Recv(t, closed, 10*time.Second, "Close of caches still loading")
	rc.waitClosed(t, wait)
	rn.waitClosed(t, wait)
	rt.waitClosed(t, wait)
	if n := len(rc.Events()) + len(rn.Events()) + len(rt.Events()); n != 0 {
		t.Fatalf("%d events from caches that never loaded", n)
	}
	select {
	case <-cc.Initialized():
		t.Fatal("Initialized closed for a cache that never loaded")
	case <-nc.Initialized():
		t.Fatal("Initialized closed for a cache that never loaded")
	case <-tc.Initialized():
		t.Fatal("Initialized closed for a cache that never loaded")
	default:
	}
	if err := cc.Close(); err != nil {
		t.Fatal(err)
	}
	if err := tc.Close(); err != nil {
		t.Fatal(err)
	}
}

// Closing the session stops the cache: its Events channel is closed after
// the events already read are delivered.
func TestSessionCloseStopsCache(t *testing.T) {
	ns, raw := zktestNS(t)
	mustCreate(t, raw, ns.Path("n"), "v")
	s := sessiontest.Connect(t, ns)
	c := newNode(t, s, "/n")
	r := record(c.Events())
	r.waitInit(t)
	s.Close()
	r.waitClosed(t, wait)
	if evs := r.Events(); len(evs) != 2 || evs[0].Type != cache.Added || evs[1].Type != cache.Initialized {
		t.Fatalf("events %s, want Added, Initialized", fmtEvents(evs))
	}
	if n, ok := c.Get(); !ok || string(n.Data) != "v" {
		t.Fatalf("Get after the session closed = %+v, %v, want the last value", n, ok)
	}
}

// WithEvents(false): Events delivers nothing and is closed at Close, while
// Get follows the node; WithLogger is used.
func TestWithoutEvents(t *testing.T) {
	ns, raw := zktestNS(t)
	full := ns.Path("n")
	mustCreate(t, raw, full, "v0")
	s := sessiontest.Connect(t, ns)
	c := newNode(t, s, "/n", cache.WithEvents(false), cache.WithLogger(zap.NewNop()))
	r := record(c.Events())
	sessiontest.Recv(t, c.Initialized(), wait, "Initialized")
	mustSet(t, raw, full, "v1")
	zktest.Eventually(t, wait, func() bool {
		n, ok := c.Get()
		return ok && string(n.Data) == "v1"
	}, "Get follows the write")
	c.Close()
	r.waitClosed(t, wait)
	if evs := r.Events(); len(evs) != 0 {
		t.Fatalf("events %s with WithEvents(false)", fmtEvents(evs))
	}
}

// One watch per cached node and kind, held by the server alone: two
// caches of the same children on one session, and a node cache of the
// parent, leave the server holding, for the session, one data watch on the
// parent and on each child (wchc; the child watches are not listed there)
// and go-zookeeper none (the session's registrations stay at 0, and a
// reconnect sends no setWatches), also after writes and after a reconnect,
// whose reload sets every watch again: a child created and the parent
// written after it give their events. Session.Watches counts each cache's
// own: 4 + 4 + 1.
func TestOneWatchPerNode(t *testing.T) {
	ns, raw := zktestNS(t)
	dir := ns.Path("dir")
	mustCreate(t, raw, dir, "")
	for _, k := range []string{"a", "b", "c"} {
		mustCreate(t, raw, dir+"/"+k, k)
	}
	s, proxy, tap := sessiontest.ConnectProxyTap(t, ns, longSession)
	rec := sessiontest.Record(t, s)
	c1 := newChildren(t, s, "/dir")
	c2 := newChildren(t, s, "/dir")
	n := newNode(t, s, "/dir")
	r1, r2, rn := record(c1.Events()), record(c2.Events()), record(n.Events())
	r1.waitInit(t)
	r2.waitInit(t)
	rn.waitInit(t)
	nodes := []string{dir, dir + "/a", dir + "/b", dir + "/c"}
	checkServerWatches(t, ns, s, "after the load", 9, nodes...)
	for i := 0; i < 3; i++ {
		mustSet(t, raw, dir+"/a", "a"+string(rune('1'+i)))
		mustSet(t, raw, dir, "d"+string(rune('1'+i)))
	}
	// Writes faster than the cache reads are coalesced: wait for the last.
	r1.WaitFor(t, wait, "the last write of a", func(evs []cache.Event) bool { return hasData(evs, "/dir/a", "a3") })
	rn.WaitFor(t, wait, "the last write of dir", func(evs []cache.Event) bool { return hasData(evs, "/dir", "d3") })
	checkServerWatches(t, ns, s, "after writes", 9, nodes...)
	proxy.Cut()
	rec.Wait(t, wait, session.Reconnected)
	mustSet(t, raw, dir+"/b", "b1") // a change after the reconnect, to know the reload is done
	r2.WaitFor(t, convergeBound, "b's update", func(evs []cache.Event) bool { return hasData(evs, "/dir/b", "b1") })
	noSetWatches(t, tap)
	checkServerWatches(t, ns, s, "after a reconnect", 9, nodes...)
	mustCreate(t, raw, dir+"/d", "d")
	mustSet(t, raw, dir, "d4")
	for _, r := range []*recorder{r1, r2} {
		r.WaitFor(t, wait, "d's Added after the reconnect", func(evs []cache.Event) bool { return hasData(evs, "/dir/d", "d") })
	}
	rn.WaitFor(t, wait, "dir's write after the reconnect", func(evs []cache.Event) bool { return hasData(evs, "/dir", "d4") })
	checkServerWatches(t, ns, s, "after a new child", 11, append(nodes, dir+"/d")...)
}

// checkServerWatches waits until the server holds data (or exists) watches
// for the session of s on exactly the server paths paths (wchc: the server
// keeps one per path, kind and session, whoever sets it) and s.Watches()
// is want, and checks that go-zookeeper holds no registration of the
// session's (the caches' watches are the server's alone).
func checkServerWatches(t *testing.T, ns *zktest.Namespace, s *session.Session, when string, want int, paths ...string) {
	t.Helper()
	same := func(got map[string]bool) bool {
		if len(got) != len(paths) {
			return false
		}
		for _, p := range paths {
			if !got[p] {
				return false
			}
		}
		return true
	}
	var got map[string]bool
	zktest.Eventually(t, wait, func() bool {
		got = sessiontest.Watches(t, ns.Server.Addr(), s.SessionID())
		return same(got) && s.Watches() == want
	}, "the server's data watches "+when)
	if n := sessiontest.Core(s).WatchCount(); n != 0 {
		t.Fatalf("%s: the session holds %d registrations in go-zookeeper", when, n)
	}
}

// noSetWatches checks that the session's connections sent no setWatches:
// go-zookeeper, which lists its own watches in one after a reconnect, had
// none.
func noSetWatches(t *testing.T, tap *zktest.Tap) {
	t.Helper()
	for op, n := range tap.Requests() {
		if name := zktest.OpName(op); name == "setWatches" || name == "setWatches2" {
			t.Fatalf("%d %s requests after a reconnect: go-zookeeper held watches", n, name)
		}
	}
}

// hasData reports whether evs hold an event of the node at p with data.
func hasData(evs []cache.Event, p, data string) bool {
	for _, ev := range evs {
		if ev.Node.Path == p && string(ev.Node.Data) == data {
			return true
		}
	}
	return false
}
