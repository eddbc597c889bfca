package chaos

import (
	"strings"
	"testing"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/recipes/cache"
)

// TestTreeOrdered: no Added below a node not held (the root excepted), no
// Removed of a node that still holds children.
func TestTreeOrdered(t *testing.T) {
	ev := func(typ cache.EventType, p string) cache.Event {
		return cache.Event{Type: typ, Node: cache.Node{Path: p}}
	}
	ok := []cache.Event{
		ev(cache.Added, "/t"), ev(cache.Added, "/t/a"), ev(cache.Added, "/t/a/b"), ev(cache.Initialized, ""),
		ev(cache.Removed, "/t/a/b"), ev(cache.Removed, "/t/a"), ev(cache.Added, "/t/a"),
	}
	if err := treeOrdered(ok, "/t"); err != nil {
		t.Errorf("tree order: %v", err)
	}
	for _, bad := range [][]cache.Event{
		{ev(cache.Added, "/t"), ev(cache.Added, "/t/a/b")},
		{ev(cache.Added, "/t"), ev(cache.Added, "/t/a"), ev(cache.Added, "/t/a/b"), ev(cache.Removed, "/t/a")},
	} {
		if err := treeOrdered(bad, "/t"); err == nil {
			t.Errorf("%v: no error", bad)
		}
	}
}

// TestWithin: a cache with a maximum depth is compared with the server's
// nodes down to that depth only.
func TestWithin(t *testing.T) {
	tree := map[string]treeNode{
		"/t":       {cacheNode{czxid: 1}, 0},
		"/t/a":     {cacheNode{czxid: 2}, 1},
		"/t/a/b":   {cacheNode{czxid: 3}, 2},
		"/t/a/b/c": {cacheNode{czxid: 4}, 3},
	}
	if n := len(within(tree, -1)); n != 4 {
		t.Errorf("no bound: %d nodes, want 4", n)
	}
	got := within(tree, 2)
	if len(got) != 3 || got["/t/a/b"].czxid != 3 {
		t.Errorf("max depth 2: %v, want the root and two levels", got)
	}
	nodes := []cache.Node{{Path: "/t", Stat: zk.Stat{Czxid: 1}}, {Path: "/t/a", Stat: zk.Stat{Czxid: 2}}}
	if d := differs(nodes, within(tree, 1)); d != "" {
		t.Errorf("max depth 1: %s", d)
	}
	if d := differs(nodes, within(tree, 2)); !strings.Contains(d, "2 nodes cached, 3 on the server") {
		t.Errorf("max depth 2 against a copy of depth 1: %q", d)
	}
}
