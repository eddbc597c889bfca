package cache

import (
	"testing"

	"github.com/go-zookeeper/zk"
)

// apply's decisions, without ZooKeeper: which events lead from the cached
// node to what a read found, and that a read older than the copy (an
// earlier write, an earlier incarnation) changes nothing.
func TestApply(t *testing.T) {
	node := func(data string, czxid, mzxid int64) Node {
		return Node{Path: "/n", Data: []byte(data), Stat: zk.Stat{Czxid: czxid, Mzxid: mzxid}}
	}
	type read struct {
		n      Node
		exists bool
	}
	cases := []struct {
		name  string
		reads []read
		want  []EventType
		final string // data held at the end, "" for none
	}{
		{"created", []read{{node("a", 5, 5), true}}, []EventType{Added}, "a"},
		{"written", []read{{node("a", 5, 5), true}, {node("b", 5, 7), true}}, []EventType{Added, Updated}, "b"},
		{"read again unchanged", []read{{node("a", 5, 5), true}, {node("a", 5, 5), true}}, []EventType{Added}, "a"},
		{"deleted", []read{{node("a", 5, 5), true}, {Node{}, false}}, []EventType{Added, Removed}, ""},
		{"missing, missing", []read{{Node{}, false}, {Node{}, false}}, nil, ""},
		{"created again", []read{{node("a", 5, 5), true}, {node("a", 9, 9), true}}, []EventType{Added, Removed, Added}, "a"},
		{"an older write", []read{{node("b", 5, 7), true}, {node("a", 5, 5), true}}, []EventType{Added}, "b"},
		{"an older incarnation", []read{{node("b", 9, 9), true}, {node("a", 5, 6), true}}, []EventType{Added}, "b"},
	}
	for _, tc := range cases {
		c := &core{nodes: map[string]Node{}, q: newQueue(true)}
		for _, r := range tc.reads {
			c.apply("", r.n, r.exists)
		}
		var got []EventType
		for _, ev := range c.q.q {
			got = append(got, ev.Type)
		}
		if len(got) != len(tc.want) {
			t.Errorf("%s: events %v, want %v", tc.name, got, tc.want)
			continue
		}
		for i := range got {
			if got[i] != tc.want[i] {
				t.Errorf("%s: events %v, want %v", tc.name, got, tc.want)
				break
			}
		}
		n, ok := c.nodes[""]
		if ok != (tc.final != "") || string(n.Data) != tc.final {
			t.Errorf("%s: holds %q (%v), want %q", tc.name, n.Data, ok, tc.final)
		}
	}
}
