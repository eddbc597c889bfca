package cache

import (
	"sort"
	"strings"

	"github.com/go-zookeeper/zk"
)

// The copy: a tree of tnodes, kept small since a cache may hold millions of
// nodes. A tnode is a Node without its Stat's DataLength (the length of its
// data) and without Stat's padding, and its children are a slice sorted by
// name behind a pointer (nil for a leaf), not a map: 112 bytes a node, and
// 8 a child.

// tnode is a node of the copy. The root's tnode anchors the tree and is in
// the copy only while core.rootIn: it is out while the root is missing or
// skipped, and always for a ChildrenCache (its parent is not cached).
type tnode struct {
	path string // as the cache was given it (Node.Path)
	data []byte
	st   stat
	kids *[]*tnode // sorted by name; nil when none
}

// stat is a zk.Stat without DataLength (len(data)), its fields ordered so
// that it has no padding.
type stat struct {
	czxid, mzxid, ctime, mtime, ephemeralOwner, pzxid int64
	version, cversion, aversion, numChildren          int32
}

func packStat(s *zk.Stat) stat {
	return stat{
		czxid: s.Czxid, mzxid: s.Mzxid, ctime: s.Ctime, mtime: s.Mtime,
		ephemeralOwner: s.EphemeralOwner, pzxid: s.Pzxid,
		version: s.Version, cversion: s.Cversion, aversion: s.Aversion, numChildren: s.NumChildren,
	}
}

// node returns tn as a Node.
func (tn *tnode) node() Node {
	s := &tn.st
	return Node{Path: tn.path, Data: tn.data, Stat: zk.Stat{
		Czxid: s.czxid, Mzxid: s.mzxid, Ctime: s.ctime, Mtime: s.mtime,
		Version: s.version, Cversion: s.cversion, Aversion: s.aversion,
		EphemeralOwner: s.ephemeralOwner, DataLength: int32(len(tn.data)),
		NumChildren: s.numChildren, Pzxid: s.pzxid,
	}}
}

// set makes tn hold n's data and Stat (its path stays).
func (tn *tnode) set(n *Node) { tn.data, tn.st = n.Data, packStat(&n.Stat) }

// children returns tn's children, sorted by name; do not modify.
func (tn *tnode) children() []*tnode {
	if tn.kids == nil {
		return nil
	}
	return *tn.kids
}

// setChildren makes l (sorted by name) tn's children.
func (tn *tnode) setChildren(l []*tnode) {
	switch {
	case len(l) == 0:
		tn.kids = nil
	case tn.kids == nil:
		tn.kids = &l
	default:
		*tn.kids = l
	}
}

// nameOf returns the name of k, a child of tn.
func (tn *tnode) nameOf(k *tnode) string { return k.path[len(tn.path)+1:] }

// child returns tn's child name, or nil, and where it is or would go.
func (tn *tnode) child(name string) (*tnode, int) {
	l := tn.children()
	i := sort.Search(len(l), func(i int) bool { return tn.nameOf(l[i]) >= name })
	if i < len(l) && tn.nameOf(l[i]) == name {
		return l[i], i
	}
	return nil, i
}

// put makes k (a new node, or nil to remove it) tn's child in place of old
// (the child of that name, or nil).
func (tn *tnode) put(old, k *tnode) {
	if old == k {
		return
	}
	var name string
	if old != nil {
		name = tn.nameOf(old)
	} else {
		name = tn.nameOf(k)
	}
	_, i := tn.child(name)
	l := tn.children()
	switch {
	case k == nil:
		l = append(l[:i], l[i+1:]...)
		l[:cap(l)][len(l)] = nil // let it go
	case old == nil:
		l = append(l, nil)
		copy(l[i+1:], l[i:])
		l[i] = k
	default:
		l[i] = k
	}
	tn.setChildren(l)
}

// inCopy reports whether tn is in the copy.
func (c *core) inCopy(tn *tnode) bool { return tn != c.root || c.rootIn }

// anchored reports whether the root can have children in the copy: it is
// in the copy, or it is a ChildrenCache's parent (never in the copy).
func (c *core) anchored() bool { return c.rootIn || !c.shape.rootData }

// find returns the tnode at rel in the copy (the root's anchor for ""),
// and its parent; nil when it is not in the copy (tn) or has no parent in
// the copy (parent).
func (c *core) find(rel string) (tn, parent *tnode) {
	tn = c.root
	for rel != "" {
		if tn == c.root && !c.anchored() {
			return nil, nil
		}
		name, rest := rel[1:], ""
		if i := strings.IndexByte(name, '/'); i >= 0 {
			name, rest = name[:i], name[i:]
		}
		parent = tn
		if tn, _ = tn.child(name); tn == nil {
			return nil, parent
		}
		rel = rest
	}
	return tn, parent
}

// merge brings the copy at f.rel to what f read, where old is the node
// held there (the root's anchor for the root; nil for none), pushing the
// events that lead there: parents added before their children, children
// removed before their parents. It returns the node now at f.rel in the
// copy (nil for none), for the caller to put in its parent's children.
// c.mu held.
func (c *core) merge(old *tnode, f *fetched) *tnode {
	if f.rel == "" {
		c.absent = f.state == gone
		c.rootListed = !c.shape.rootData && f.listed
	}
	if f.state != got {
		c.remove(old)
		return nil
	}
	tn := old
	if c.shape.hasData(f.depth) {
		switch {
		case old == nil || !c.inCopy(old):
			tn = c.add(old, f)
		case f.n.Stat.Czxid > old.st.czxid:
			// Another incarnation: the old one and its subtree went.
			c.remove(old)
			tn = c.add(old, f)
		case f.n.Stat.Czxid < old.st.czxid:
			return old // older than the copy: ignore it
		case f.n.Stat.Mzxid > old.st.mzxid:
			tn.set(&f.n)
			c.q.Push(Event{Type: Updated, Node: f.n})
		}
	}
	if !f.listed {
		return tn
	}
	// The union of the children held and read, both sorted by name: each
	// one's events in turn, and the new list in one pass.
	held := tn.children()
	out := make([]*tnode, 0, len(f.kids))
	for i, j := 0, 0; i < len(f.kids) || j < len(held); {
		var k *tnode
		switch {
		case j == len(held) || i < len(f.kids) && f.kids[i].rel[len(f.rel)+1:] < tn.nameOf(held[j]):
			k = c.merge(nil, f.kids[i])
			i++
		case i == len(f.kids) || f.kids[i].rel[len(f.rel)+1:] > tn.nameOf(held[j]):
			c.remove(held[j])
			j++
		default:
			k = c.merge(held[j], f.kids[i])
			i, j = i+1, j+1
		}
		if k != nil {
			out = append(out, k)
		}
	}
	if len(out) == 0 {
		out = nil
	}
	tn.setChildren(out)
	return tn
}

// add makes a node of what f read (the root's anchor when old is it) and
// pushes Added. The caller puts it in its parent's children. c.mu held.
func (c *core) add(old *tnode, f *fetched) *tnode {
	c.q.Push(Event{Type: Added, Node: f.n})
	c.held += c.watchesAt(f.depth)
	if old == c.root {
		c.root.set(&f.n)
		c.rootIn = true
		return c.root
	}
	return &tnode{path: f.n.Path, data: f.n.Data, st: packStat(&f.n.Stat)}
}

// remove removes tn (nil for none) and its subtree from the copy, children
// first, pushing Removed for each. The caller takes it out of its parent's
// children (the root's anchor stays). c.mu held.
func (c *core) remove(tn *tnode) {
	if tn == nil {
		return
	}
	for _, k := range tn.children() {
		c.remove(k)
	}
	tn.kids = nil
	if !c.inCopy(tn) {
		return
	}
	c.q.Push(Event{Type: Removed, Node: tn.node()})
	c.held -= c.watchesAt(depth(tn.path[len(c.path):]))
	if tn == c.root {
		c.rootIn = false
		tn.data, tn.st = nil, stat{}
	}
}

// removeAt removes tn, a child of parent (or the root's anchor when parent
// is nil), with its subtree. c.mu held.
func (c *core) removeAt(parent, tn *tnode) {
	c.remove(tn)
	if parent != nil && tn != nil {
		parent.put(tn, nil)
	}
}

// get returns the node at rel from the copy.
func (c *core) get(rel string) (Node, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	tn, _ := c.find(rel)
	if tn == nil || !c.inCopy(tn) {
		return Node{}, false
	}
	return tn.node(), true
}

// children returns the children of the node at rel in the copy, sorted by
// name; false when the node is not in the copy (for a ChildrenCache's
// parent, never false).
func (c *core) children(rel string) ([]Node, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	tn, _ := c.find(rel)
	if tn == nil || !c.inCopy(tn) && !(tn == c.root && !c.shape.rootData) {
		return nil, false
	}
	kids := tn.children()
	out := make([]Node, len(kids))
	for i, k := range kids {
		out[i] = k.node()
	}
	return out, true
}

// mergeByName returns the children of tn in a and b (each sorted by name,
// no name in both) as one list sorted by name.
func mergeByName(tn *tnode, a, b []*tnode) []*tnode {
	if len(b) == 0 {
		return a
	}
	out := make([]*tnode, 0, len(a)+len(b))
	for len(a) > 0 && len(b) > 0 {
		if tn.nameOf(a[0]) < tn.nameOf(b[0]) {
			out, a = append(out, a[0]), a[1:]
		} else {
			out, b = append(out, b[0]), b[1:]
		}
	}
	return append(append(out, a...), b...)
}
