package cache

import (
	"fmt"
	"math/rand"
	"strings"
	"testing"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/internal/eventqueue"
)

// testCore returns a core of shape sh on /n with no session: merge alone.
func testCore(sh shape) *core {
	return &core{path: "/n", shape: sh, root: &tnode{path: "/n"}, skipped: map[string]error{}, q: eventqueue.New[Event](true)}
}

// drain returns the events queued so far, closing the queue: call it once.
func drain(c *core) []Event {
	c.q.Finish()
	go c.q.Pump()
	var evs []Event
	for ev := range c.q.Out() {
		evs = append(evs, ev)
	}
	return evs
}

// queued returns the events queued so far as "Type path data" strings,
// closing the queue: call it once.
func queued(c *core) []string {
	var out []string
	for _, ev := range drain(c) {
		out = append(out, strings.TrimSpace(fmt.Sprintf("%v %s %s", ev.Type, ev.Node.Path, ev.Node.Data)))
	}
	return out
}

// merge's decisions on one node, without ZooKeeper: which events lead from
// the cached node to what a read found, and that a read older than the copy
// (an earlier write, an earlier incarnation) changes nothing.
func TestApply(t *testing.T) {
	node := func(data string, czxid, mzxid int64) *fetched {
		return &fetched{state: got, n: Node{Path: "/n", Data: []byte(data), Stat: zk.Stat{Czxid: czxid, Mzxid: mzxid}}}
	}
	missing := func() *fetched { return &fetched{state: gone} }
	cases := []struct {
		name  string
		reads []*fetched
		want  []EventType
		final string // data held at the end, "" for none
	}{
		{"created", []*fetched{node("a", 5, 5)}, []EventType{Added}, "a"},
		{"written", []*fetched{node("a", 5, 5), node("b", 5, 7)}, []EventType{Added, Updated}, "b"},
		{"read again unchanged", []*fetched{node("a", 5, 5), node("a", 5, 5)}, []EventType{Added}, "a"},
		{"deleted", []*fetched{node("a", 5, 5), missing()}, []EventType{Added, Removed}, ""},
		{"missing, missing", []*fetched{missing(), missing()}, nil, ""},
		{"created again", []*fetched{node("a", 5, 5), node("a", 9, 9)}, []EventType{Added, Removed, Added}, "a"},
		{"an older write", []*fetched{node("b", 5, 7), node("a", 5, 5)}, []EventType{Added}, "b"},
		{"an older incarnation", []*fetched{node("b", 9, 9), node("a", 5, 6)}, []EventType{Added}, "b"},
		{"refused", []*fetched{node("a", 5, 5), {state: refused}}, []EventType{Added, Removed}, ""},
	}
	for _, tc := range cases {
		c := testCore(shape{rootData: true})
		for _, f := range tc.reads {
			c.merge(c.root, f)
		}
		var got []EventType
		for _, ev := range drain(c) {
			got = append(got, ev.Type)
		}
		if fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("%s: events %v, want %v", tc.name, got, tc.want)
		}
		n, ok := c.get("")
		if ok != (tc.final != "") || string(n.Data) != tc.final {
			t.Errorf("%s: holds %q (%v), want %q", tc.name, n.Data, ok, tc.final)
		}
	}
}

// tree builds a fetched tree from "path=data@czxid" specs below /n (the
// root first, as "=data@czxid"), every node listed.
func tree(specs ...string) *fetched {
	byRel := map[string]*fetched{}
	var root *fetched
	for _, s := range specs {
		rel, rest, _ := strings.Cut(s, "=")
		data, z, _ := strings.Cut(rest, "@")
		var czxid int64
		fmt.Sscan(z, &czxid)
		f := &fetched{rel: rel, depth: depth(rel), state: got, listed: true,
			n: Node{Path: "/n" + rel, Data: []byte(data), Stat: zk.Stat{Czxid: czxid, Mzxid: czxid}}}
		byRel[rel] = f
		if rel == "" {
			root = f
			continue
		}
		p := byRel[rel[:strings.LastIndexByte(rel, '/')]]
		p.kids = append(p.kids, f)
	}
	return root
}

// A tree's events: parents added before their children, children removed
// before their parents, also when a node is replaced by a new incarnation
// with other children; a deleted root takes the whole tree, children first.
func TestMergeTreeOrder(t *testing.T) {
	c := testCore(shape{rootData: true, maxDepth: 10})
	c.merge(c.root, tree("=r@1", "/a=a@2", "/a/x=ax@3", "/a/x/y=axy@4", "/b=b@5"))
	c.merge(c.root, tree("=r@1", "/a=a2@9", "/a/z=az@10", "/b=b@5", "/c=c@11"))
	c.merge(c.root, &fetched{state: gone})
	want := []string{
		"Added /n r", "Added /n/a a", "Added /n/a/x ax", "Added /n/a/x/y axy", "Added /n/b b",
		"Removed /n/a/x/y axy", "Removed /n/a/x ax", "Removed /n/a a", "Added /n/a a2", "Added /n/a/z az", "Added /n/c c",
		"Removed /n/a/z az", "Removed /n/a a2", "Removed /n/b b", "Removed /n/c c", "Removed /n r",
	}
	if got := queued(c); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("events\n%q\nwant\n%q", got, want)
	}
	if _, ok := c.get(""); ok {
		t.Fatal("the root is held after its delete")
	}
}

// A node's children stay sorted by name through puts, replacements and
// removals in any order, and child finds each one (the copy keeps them in a
// sorted slice, not a map).
func TestChildrenSorted(t *testing.T) {
	p := &tnode{path: "/n"}
	model := map[string]*tnode{}
	rng := rand.New(rand.NewSource(1))
	for i := 0; i < 2000; i++ {
		name := fmt.Sprintf("k%d", rng.Intn(64))
		old, _ := p.child(name)
		if old != model[name] {
			t.Fatalf("child(%s) = %v, want %v", name, old, model[name])
		}
		switch rng.Intn(3) {
		case 0: // put, or replace
			k := &tnode{path: "/n/" + name}
			p.put(old, k)
			model[name] = k
		case 1:
			p.put(old, nil)
			delete(model, name)
		case 2:
			var a, b []*tnode
			for _, k := range p.children() {
				if rng.Intn(2) == 0 {
					a = append(a, k)
				} else {
					b = append(b, k)
				}
			}
			p.setChildren(mergeByName(p, a, b))
		}
		kids := p.children()
		if len(kids) != len(model) {
			t.Fatalf("step %d: %d children, want %d", i, len(kids), len(model))
		}
		for j, k := range kids {
			if model[p.nameOf(k)] != k || j > 0 && p.nameOf(kids[j-1]) >= p.nameOf(k) {
				t.Fatalf("step %d: children out of order or unknown at %d: %s", i, j, p.nameOf(k))
			}
		}
	}
}
