package cache

import (
	"strings"

	"github.com/zkrecipes/zkrecipes/session"
)

// ChildrenCache keeps a copy of the children of one node with their data
// and Stats, as Curator's PathChildrenCache does: Get and List read the
// copy without touching the network, Events reports each change. It is safe
// for concurrent use.
type ChildrenCache struct{ c *core }

// NewChildren starts a cache of the children of the node at path on sess.
// It validates its arguments and does no I/O itself: a goroutine loads the
// children (Initialized is closed when it has) and follows their changes
// until Close or until the session is closed. The node at path need not
// exist; the cache never creates it. A nil session, a bad path or a bad
// option (WithMaxDepth included) gives an error matching
// session.ErrBadArgument, and starts nothing.
func NewChildren(sess *session.Session, path string, opts ...Option) (*ChildrenCache, error) {
	c, err := newCore(sess, path, "children", opts)
	if err != nil {
		return nil, err
	}
	return &ChildrenCache{c}, nil
}

// Get returns the child name as last read, and false if the cache does not
// hold it (a child whose read ZooKeeper refuses included: see Skipped). It
// never blocks on the network.
func (c *ChildrenCache) Get(name string) (Node, bool) {
	if name == "" || strings.Contains(name, "/") {
		return Node{}, false
	}
	return c.c.get("/" + name)
}

// List returns the cached children, sorted by name. It never blocks on the
// network.
func (c *ChildrenCache) List() []Node {
	l, _ := c.c.children("")
	return l
}

// Events returns the channel of the cache's events: Added, Updated and
// Removed for each child, those of one child in the order its changes were
// read; Initialized once, after the Added events of the first load. It is
// closed after Close, or after the session is closed and the last event was
// received. With WithEvents(false) it delivers nothing and is closed the
// same way.
func (c *ChildrenCache) Events() <-chan Event { return c.c.q.Out() }

// Initialized returns a channel that is closed once the first load is done.
// It is never closed if the cache is closed first.
func (c *ChildrenCache) Initialized() <-chan struct{} { return c.c.init }

// Skipped returns the nodes the cache leaves out because their ACL refuses
// the session's read, by path (the cache's path, "/", the child's name; the
// cache's path itself when its children may not be listed), each with
// ZooKeeper's refusal (an error matching zk.ErrNoAuth that names the node).
// See the package doc for when they are read again.
func (c *ChildrenCache) Skipped() map[string]error { return c.c.skips() }

// Close stops the cache: it returns after its goroutines have exited;
// undelivered events are dropped and Events is closed. List and Get still
// return the last values. Idempotent; it always returns nil.
func (c *ChildrenCache) Close() error { return c.c.close() }
