package zksession

import (
	"strings"
	"sync"
	"sync/atomic"

	"github.com/go-zookeeper/zk"
)

// Tree subscriptions: the node events at and below a path, for a cache of a
// subtree, and reads whose watches go-zookeeper does not know of. A cache of
// ten thousand nodes holds twenty thousand watches; go-zookeeper would keep
// a channel and a map entry for each (see serverOnlyBook) and someone would
// have to wait on every channel. Instead the cache reads with GetServerW,
// ChildrenServerW and ExistsServerW, whose watch flag the wire sets: the
// server holds the watch and go-zookeeper nothing, and the server's
// notification reaches the session's event callback, which hands every node
// event at or below a subscribed path to the subscription's target, on
// go-zookeeper's receiving goroutine, in the order the server sent them.
//
// The server keeps one watch per path, kind and session, whoever set it, so
// an event tells which of the session's watches on its path it ended:
// NodeDataChanged the data and exists watches, NodeChildrenChanged the child
// watches, NodeCreated the exists watches, NodeDeleted all of them. The
// event may come of another user's watch on the same node (go-zookeeper's,
// or another subscriber's): a subscriber treats it as news about the node.
//
// Nobody sets these watches again after a reconnect: go-zookeeper's
// SetWatches lists only its own, and the session's re-arm only WatchNode's.
// A subscriber reads again what it watches at every Reconnected, as a cache
// does anyway to report what changed while it was away. They cannot be
// removed either: one left when its subscriber has gone costs the server a
// watch until the node changes, and the client nothing (its event finds no
// subscriber).

// go-zookeeper's opcodes of the other requests whose body is a path and a
// watch flag, as getData's (opGetData).
const (
	opExists       = 3
	opGetChildren2 = 12
)

// TreeEvents is what a TreeSub calls. TreeEvent runs on go-zookeeper's
// receiving goroutine with the subscription table read-locked: it must not
// block, send requests, subscribe or cancel.
type TreeEvents interface {
	TreeEvent(ev zk.Event)
}

// TreeSub is a subscription to the node events at and below one path (see
// SubscribeTree). It is safe for concurrent use.
type TreeSub struct {
	s       *Session
	root    string
	target  TreeEvents
	watches atomic.Int64 // as the subscriber last said (SetWatches)
}

// treeSubs is the Session's table of tree subscriptions, by root.
type treeSubs struct {
	mu sync.RWMutex
	m  map[string][]*TreeSub
	n  atomic.Int32 // subscriptions in m: dispatch skips the lock when 0
}

// SubscribeTree subscribes target to the node events (every type but
// EventSession) of root, a full server path, and of every path below it,
// until Cancel. Subscribe before sending the requests that set the watches.
func (s *Session) SubscribeTree(root string, target TreeEvents) *TreeSub {
	sub := &TreeSub{s: s, root: root, target: target}
	t := &s.trees
	t.mu.Lock()
	if t.m == nil {
		t.m = make(map[string][]*TreeSub)
	}
	t.m[root] = append(t.m[root], sub)
	t.n.Add(1)
	t.mu.Unlock()
	return sub
}

// Cancel ends the subscription: once it has returned, the target is never
// called again. Idempotent.
func (sub *TreeSub) Cancel() {
	t := &sub.s.trees
	t.mu.Lock()
	defer t.mu.Unlock()
	l := t.m[sub.root]
	for i, o := range l {
		if o == sub {
			l = append(l[:i:i], l[i+1:]...) // a new array: nothing shares the old one
			if len(l) == 0 {
				delete(t.m, sub.root)
			} else {
				t.m[sub.root] = l
			}
			t.n.Add(-1)
			sub.watches.Store(0)
			return
		}
	}
}

// SetWatches records how many server-only watches the subscriber holds now
// (set and not yet seen fire), for Session.Watches.
func (sub *TreeSub) SetWatches(n int) { sub.watches.Store(int64(n)) }

// TreeWatches returns the watches the tree subscriptions say they hold
// (SetWatches), summed: two subscribers watching one node count it twice,
// although the server holds one watch.
func (s *Session) TreeWatches() int {
	t := &s.trees
	t.mu.RLock()
	defer t.mu.RUnlock()
	n := int64(0)
	for _, l := range t.m {
		for _, sub := range l {
			n += sub.watches.Load()
		}
	}
	return int(n)
}

// dispatchTree hands a node event to the subscriptions at its path and
// above. It runs on go-zookeeper's receiving goroutine (onEvent).
func (s *Session) dispatchTree(ev zk.Event) {
	t := &s.trees
	if t.n.Load() == 0 || ev.Type == zk.EventSession || ev.Path == "" {
		return
	}
	t.mu.RLock()
	defer t.mu.RUnlock()
	for p := ev.Path; ; {
		for _, sub := range t.m[p] {
			sub.target.TreeEvent(ev)
		}
		i := strings.LastIndexByte(p, '/')
		switch {
		case len(p) <= 1 || i < 0:
			return
		case i == 0:
			p = "/"
		default:
			p = p[:i]
		}
	}
}

// GetServerW reads the data of p as conn.Get does, with a data watch that
// go-zookeeper does not know of: its event reaches the event callback only
// (tree subscriptions, node subscriptions). Call it inside Retry, with the
// connection Retry passes.
func (s *Session) GetServerW(conn *zk.Conn, p string) ([]byte, *zk.Stat, error) {
	s.wire.addServerOnly(p)
	defer s.wire.removeServerOnly(p)
	return conn.Get(p)
}

// ChildrenServerW lists the children of p as conn.Children does, with a
// child watch that go-zookeeper does not know of (see GetServerW).
func (s *Session) ChildrenServerW(conn *zk.Conn, p string) ([]string, *zk.Stat, error) {
	s.wire.addServerOnly(p)
	defer s.wire.removeServerOnly(p)
	return conn.Children(p)
}

// ExistsServerW says whether p exists as conn.Exists does, with an exists
// watch that go-zookeeper does not know of (see GetServerW): it fires when
// p is created, written or deleted.
func (s *Session) ExistsServerW(conn *zk.Conn, p string) (bool, *zk.Stat, error) {
	s.wire.addServerOnly(p)
	defer s.wire.removeServerOnly(p)
	return conn.Exists(p)
}
