package cache_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/go-zookeeper/zk"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/zkrecipes/zkrecipes/internal/testkit/sessiontest"
	"github.com/zkrecipes/zkrecipes/recipes/cache"
	"github.com/zkrecipes/zkrecipes/session"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// ownerACL is a digest ACL of another user than the cache's session, which
// has no credentials: its reads of such a node get zk.ErrNoAuth.
var ownerACL = zk.DigestACL(zk.PermAll, "owner", "secret")

// createOwned creates p with data under ownerACL on conn.
func createOwned(t *testing.T, conn *zk.Conn, p, data string) {
	t.Helper()
	if _, err := conn.Create(p, []byte(data), 0, ownerACL); err != nil {
		t.Fatalf("create %s: %v", p, err)
	}
}

// openUp makes p world-readable (SetACL as its owner), then writes data to
// it: SetACL fires no watch, the write does.
func openUp(t *testing.T, owner *zk.Conn, p, data string) {
	t.Helper()
	if _, err := owner.SetACL(p, zk.WorldACL(zk.PermAll), -1); err != nil {
		t.Fatalf("setACL %s: %v", p, err)
	}
	if _, err := owner.Set(p, []byte(data), -1); err != nil {
		t.Fatalf("set %s: %v", p, err)
	}
}

// skipWarnings counts the warnings logged about a node left out, by node.
func skipWarnings(logs *observer.ObservedLogs) map[string]int {
	out := map[string]int{}
	for _, e := range logs.FilterLevelExact(zapcore.WarnLevel).All() {
		if strings.Contains(e.Message, "left out") {
			out[e.ContextMap()["node"].(string)]++
		}
	}
	return out
}

// checkSkipped checks that Skipped holds exactly the paths want, each with
// an error matching zk.ErrNoAuth that names its node.
func checkSkipped(t *testing.T, got map[string]error, want ...string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("Skipped = %v, want %v", got, want)
	}
	for _, p := range want {
		err, ok := got[p]
		if !ok || !errors.Is(err, zk.ErrNoAuth) || !strings.Contains(err.Error(), p) {
			t.Fatalf("Skipped[%s] = %v (%v), want an error matching zk.ErrNoAuth naming it", p, err, ok)
		}
	}
}

// A child the session may not read (a digest ACL of another user) is left
// out, not retried: the children cache and the tree cache reach
// Initialized with the readable children, Skipped reports the child with
// ZooKeeper's refusal, one warning is logged for it (none more at a
// reconnect's reload, which finds the same refusal), and no read of it
// comes between two watch events. Once its owner makes it world-readable and
// writes it, its exists watch reads it again and it is Added.
func TestSkipsUnreadableChild(t *testing.T) {
	for _, kind := range []string{"children", "tree"} {
		t.Run(kind, func(t *testing.T) {
			ns := zktest.NewNamespace(t)
			owner := sessiontest.DigestConn(t, ns, "owner", "secret")
			dir := ns.Path("dir")
			mustCreate(t, owner, dir, "")
			mustCreate(t, owner, dir+"/a", "a0")
			createOwned(t, owner, dir+"/b", "b0")
			mustCreate(t, owner, dir+"/c", "c0")
			if kind == "tree" {
				createOwned(t, owner, dir+"/b/deep", "x") // below a skipped node: left out with it
			}
			s, proxy, tap := sessiontest.ConnectProxyTap(t, ns, longSession)
			rec := sessiontest.Record(t, s)
			core, logs := observer.New(zap.InfoLevel)
			var (
				events  <-chan cache.Event
				list    func() []cache.Node
				skipped func() map[string]error
				init    <-chan struct{}
			)
			if kind == "children" {
				c := newChildren(t, s, "/dir", cache.WithLogger(zap.New(core)))
				events, list, skipped, init = c.Events(), c.List, c.Skipped, c.Initialized()
			} else {
				c := newTree(t, s, "/dir", cache.WithLogger(zap.New(core)))
				events, skipped, init = c.Events(), c.Skipped, c.Initialized()
				list = func() []cache.Node { l, _ := c.Children("/dir"); return l }
			}
			r := record(events)
			evs := r.waitInit(t)
			sessiontest.Recv(t, init, wait, "Initialized")
			want := []expect{{cache.Added, "/dir/a", "a0"}, {cache.Added, "/dir/c", "c0"}, {cache.Initialized, "", ""}}
			if kind == "tree" {
				want = append([]expect{{cache.Added, "/dir", ""}}, want...)
			}
			checkEvents(t, evs, want)
			if d := sameAs(list(), map[string]rawNode{"/dir/a": raw(t, owner, dir+"/a"), "/dir/c": raw(t, owner, dir+"/c")}); d != "" {
				t.Fatal(d)
			}
			checkSkipped(t, skipped(), "/dir/b")

			// No read of b between two writes of a: nothing retries it.
			base := reads(tap)
			mustSet(t, owner, dir+"/a", "a1")
			r.WaitFor(t, wait, "a1", func(evs []cache.Event) bool { return hasData(evs, "/dir/a", "a1") })
			mustSet(t, owner, dir+"/a", "a2")
			r.WaitFor(t, wait, "a2", func(evs []cache.Event) bool { return hasData(evs, "/dir/a", "a2") })
			waitReads(t, tap, base, [2]int64{0, 2}, "two reads of a, none of b")

			// A reconnect reads b again, finds the same refusal, and says
			// nothing more.
			proxy.Cut()
			rec.Wait(t, wait, session.Reconnected)
			mustSet(t, owner, dir+"/a", "a3")
			r.WaitFor(t, convergeBound, "a3", func(evs []cache.Event) bool { return hasData(evs, "/dir/a", "a3") })
			checkSkipped(t, skipped(), "/dir/b")
			if w := skipWarnings(logs); len(w) != 1 || w["/dir/b"] != 1 {
				t.Fatalf("skip warnings %v, want one for /dir/b", w)
			}

			openUp(t, owner, dir+"/b", "b1")
			evs = r.WaitFor(t, wait, "b's Added", func(evs []cache.Event) bool { return hasData(evs, "/dir/b", "b1") })
			if kind == "tree" {
				// Its child is still refused: b is in, b/deep is skipped now.
				checkSkipped(t, skipped(), "/dir/b/deep")
			} else {
				checkSkipped(t, skipped())
			}
			if _, err := replay(evs); err != nil {
				t.Fatal(err)
			}
			if d := sameAs(list(), rawChildren(t, owner, dir, "/dir")); d != "" {
				t.Fatal(d)
			}
		})
	}
}

// A node cache on a node it may not read reaches Initialized with Get false,
// reports the node in Skipped, and gets it once its owner makes it
// world-readable and writes it.
func TestNodeCacheSkipsUnreadable(t *testing.T) {
	ns := zktest.NewNamespace(t)
	owner := sessiontest.DigestConn(t, ns, "owner", "secret")
	full := ns.Path("n")
	createOwned(t, owner, full, "v0")
	s := sessiontest.Connect(t, ns)
	c := newNode(t, s, "/n")
	r := record(c.Events())
	checkEvents(t, r.waitInit(t), []expect{{cache.Initialized, "", ""}})
	if _, ok := c.Get(); ok {
		t.Fatal("Get found a node it may not read")
	}
	checkSkipped(t, c.Skipped(), "/n")
	openUp(t, owner, full, "v1")
	evs := r.WaitFor(t, wait, "Added", func(evs []cache.Event) bool { return hasData(evs, "/n", "v1") })
	checkEvents(t, evs, []expect{{cache.Initialized, "", ""}, {cache.Added, "/n", "v1"}})
	checkSkipped(t, c.Skipped())
	if n, ok := c.Get(); !ok || string(n.Data) != "v1" {
		t.Fatalf("Get = %+v, %v", n, ok)
	}
}

// raw reads one node as a rawNode.
func raw(t *testing.T, conn *zk.Conn, p string) rawNode {
	t.Helper()
	data, st, err := conn.Get(p)
	if err != nil {
		t.Fatalf("raw get %s: %v", p, err)
	}
	return rawNode{data, st.Czxid, st.Mzxid}
}
