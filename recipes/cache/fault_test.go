package cache_test

import (
	"errors"
	"fmt"
	"math/rand"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/recipes/cache"
	"github.com/zkrecipes/zkrecipes/session"
)

// After a reconnect to the same session, and after a new session (the old
// one expired while the cache was away), the cache reports exactly what
// changed while it was away: a write, a delete, a delete and create again
// with the same data, a create; nothing for the child that did not change.
// A sentinel create made after the reload comes right after those events,
// so nothing else was reported in between.
func TestReconnectReportsExactlyWhatChanged(t *testing.T) {
	for _, newSession := range []bool{false, true} {
		name := "same session"
		if newSession {
			name = "new session"
		}
		t.Run(name, func(t *testing.T) {
			ns, raw := zktestNS(t)
			dir := ns.Path("dir")
			mustCreate(t, raw, dir, "")
			for _, k := range []string{"a", "b", "c", "d"} {
				mustCreate(t, raw, dir+"/"+k, k+"0")
			}
			var c *cache.ChildrenCache
			r, mark := changeWhileAway(t, ns, newSession, func(s *session.Session) *recorder {
				c = newChildren(t, s, "/dir")
				return record(c.Events())
			}, func() {
				mustSet(t, raw, dir+"/a", "a1")
				mustDelete(t, raw, dir+"/b")
				mustDelete(t, raw, dir+"/c")
				mustCreate(t, raw, dir+"/c", "c0")
				mustCreate(t, raw, dir+"/e", "e0")
			})
			evs := upToSentinel(t, raw, r, mark, func(evs []cache.Event) bool { return hasData(evs, "/dir/e", "e0") }, dir+"/z", "/dir/z")
			checkEvents(t, evs[mark:], []expect{
				{cache.Updated, "/dir/a", "a1"},
				{cache.Removed, "/dir/b", "b0"},
				{cache.Removed, "/dir/c", "c0"},
				{cache.Added, "/dir/c", "c0"},
				{cache.Added, "/dir/e", "e0"},
				{cache.Added, "/dir/z", "sentinel"},
			})
			if _, err := replay(evs); err != nil {
				t.Fatal(err)
			}
			if d := sameAs(c.List(), rawChildren(t, raw, dir, "/dir")); d != "" {
				t.Fatal(d)
			}
		})
	}
}

// startChildrenWriter changes the children of dir and the node flag
// (server paths) on a raw connection, at random, until halted: creates,
// writes, deletes, and deletes followed at once by a create.
func startChildrenWriter(raw *zk.Conn, dir, flag string, seed int64) *writer {
	rng := rand.New(rand.NewSource(seed))
	acl := zk.WorldACL(zk.PermAll)
	return startWriter(func(n int) error {
		p := fmt.Sprintf("%s/k%d", dir, rng.Intn(6))
		if rng.Intn(4) == 0 {
			p = flag
		}
		data := []byte(fmt.Sprintf("v%d", n))
		var e error
		switch op := rng.Intn(10); {
		case op < 5:
			_, e = raw.Set(p, data, -1)
			if errors.Is(e, zk.ErrNoNode) {
				_, e = raw.Create(p, data, 0, acl)
			}
		case op < 8:
			e = raw.Delete(p, -1)
		default:
			if e = raw.Delete(p, -1); e == nil || errors.Is(e, zk.ErrNoNode) {
				_, e = raw.Create(p, data, 0, acl)
			}
		}
		if e != nil && !errors.Is(e, zk.ErrNoNode) && !errors.Is(e, zk.ErrNodeExists) {
			return e
		}
		return nil
	})
}

// Under each fault, while a writer changes the children and the node, a
// children cache and a node cache converge to the server's state (a raw
// read) within convergeBound of the writer's stop after the connection is
// back, and the events of each, replayed from nothing, are consistent with
// each other (every Added of a node not held, every Updated of the same
// incarnation with a later write, every Removed of the node held, one
// Initialized) and give the cache's copy.
func TestConvergesUnderFaults(t *testing.T) {
	for i, f := range convergeFaults {
		t.Run(f.name, func(t *testing.T) {
			ns, raw := zktestNS(t)
			dir, flag := ns.Path("dir"), ns.Path("flag")
			mustCreate(t, raw, dir, "")
			mustCreate(t, raw, dir+"/k0", "x")
			seed := time.Now().UnixNano() + int64(i)
			var cc *cache.ChildrenCache
			var nc *cache.NodeCache
			var rc, rn *recorder
			run := convergeThrough(t, ns, f, func(s *session.Session) (*writer, func(string), func() bool) {
				cc = newChildren(t, s, "/dir")
				nc = newNode(t, s, "/flag")
				rc, rn = record(cc.Events()), record(nc.Events())
				rc.waitInit(t)
				rn.waitInit(t)
				w := startChildrenWriter(ns.Conn(t), dir, flag, seed)
				// The caches follow the writer before the fault, and again
				// after it, before the writer stops.
				following := func(when string) {
					t.Helper()
					nc, nn := len(rc.Events()), len(rn.Events())
					rc.WaitFor(t, convergeBound, "children events "+when, func(evs []cache.Event) bool { return len(evs) >= nc+20 })
					rn.WaitFor(t, convergeBound, "node events "+when, func(evs []cache.Event) bool { return len(evs) >= nn+5 })
				}
				return w, following, func() bool {
					return sameAs(cc.List(), rawChildren(t, raw, dir, "/dir")) == "" && sameAs(nodeList(nc), rawOne(t, raw, flag, "/flag")) == ""
				}
			})
			for _, c := range []struct {
				name   string
				r      *recorder
				cached []cache.Node
			}{{"children", rc, cc.List()}, {"node", rn, nodeList(nc)}} {
				evs := c.r.Events()
				cp, err := replay(evs)
				if err != nil {
					t.Fatalf("%s cache (seed %d): %v\nevents %s", c.name, seed, err, fmtEvents(evs))
				}
				if d := sameAsNodes(nodesOf(cp), c.cached); d != "" {
					t.Fatalf("%s cache: the replayed events differ from the copy: %s", c.name, d)
				}
			}
			t.Logf("seed %d: %d writes; states %v; converged %v after the writer stopped; %d + %d events",
				seed, run.ops, run.rec.States(), run.took.Round(time.Millisecond), len(rc.Events()), len(rn.Events()))
		})
	}
}

// sameAsNodes says how two lists of nodes differ ("" if not).
func sameAsNodes(a, b []cache.Node) string {
	raw := make(map[string]rawNode, len(b))
	for _, n := range b {
		raw[n.Path] = rawNode{n.Data, n.Stat.Czxid, n.Stat.Mzxid}
	}
	return sameAs(a, raw)
}
