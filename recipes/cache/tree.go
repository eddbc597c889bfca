package cache

import "github.com/zkrecipes/zkrecipes/session"

// TreeCache keeps a copy of a whole subtree with its data and Stats, as
// Curator's TreeCache does: the node at its path (the root, itself in the
// tree) and every node below it, down to WithMaxDepth. Get and Children read
// the copy without touching the network, Events reports each change. It is
// safe for concurrent use.
type TreeCache struct{ c *core }

// NewTree starts a cache of the subtree at path on sess. It validates its
// arguments and does no I/O itself: a goroutine loads the tree (Initialized
// is closed when it has) and follows its changes until Close or until the
// session is closed. The root need not exist; the cache never creates it. A
// nil session, a bad path or a bad option (a negative WithMaxDepth included)
// gives an error matching session.ErrBadArgument, and starts nothing.
func NewTree(sess *session.Session, path string, opts ...Option) (*TreeCache, error) {
	c, err := newCore(sess, path, "tree", opts)
	if err != nil {
		return nil, err
	}
	return &TreeCache{c}, nil
}

// Get returns the node at path (the cache's path or a path below it, in
// the same form) as last read, and false if the cache does not hold it. It
// never blocks on the network.
func (t *TreeCache) Get(path string) (Node, bool) {
	rel, ok := t.c.relOf(path)
	if !ok {
		return Node{}, false
	}
	return t.c.get(rel)
}

// Children returns the cached children of the node at path, sorted by name,
// and false if the cache does not hold that node (a node at the maximum
// depth has none). It never blocks on the network.
func (t *TreeCache) Children(path string) ([]Node, bool) {
	rel, ok := t.c.relOf(path)
	if !ok {
		return nil, false
	}
	return t.c.children(rel)
}

// Events returns the channel of the cache's events: Added, Updated and
// Removed for each node, those of one node in the order its changes were
// read, a parent's Added before its children's and its children's Removed
// before its own; Initialized once, after the Added events of the first
// load. It is closed after Close, or after the session is closed and the
// last event was received. With WithEvents(false) it delivers nothing and is
// closed the same way.
func (t *TreeCache) Events() <-chan Event { return t.c.q.Out() }

// Initialized returns a channel that is closed once the first load is done.
// It is never closed if the cache is closed first.
func (t *TreeCache) Initialized() <-chan struct{} { return t.c.init }

// Skipped returns the nodes the cache leaves out, with their subtrees,
// because their ACL refuses the session's read (or the listing of their
// children), by path, each with ZooKeeper's refusal (an error matching
// zk.ErrNoAuth that names the node). See the package doc for when they are
// read again.
func (t *TreeCache) Skipped() map[string]error { return t.c.skips() }

// Close stops the cache: it returns after its goroutines have exited;
// undelivered events are dropped and Events is closed. Get and Children
// still return the last values. Idempotent; it always returns nil.
func (t *TreeCache) Close() error { return t.c.close() }
