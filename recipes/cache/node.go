package cache

import "github.com/zkrecipes/zkrecipes/session"

// NodeCache keeps a copy of one node's data and Stat, as Curator's
// NodeCache does: Get reads the copy without touching the network, Events
// reports each change. It is safe for concurrent use.
type NodeCache struct{ c *core }

// NewNode starts a cache of the node at path on sess. It validates its
// arguments and does no I/O itself: a goroutine loads the node (Initialized
// is closed when it has) and follows its changes until Close or until the
// session is closed. The node need not exist. A nil session, a bad path or
// a bad option (WithMaxDepth included) gives an error matching
// session.ErrBadArgument, and starts nothing.
func NewNode(sess *session.Session, path string, opts ...Option) (*NodeCache, error) {
	c, err := newCore(sess, path, "node", opts)
	if err != nil {
		return nil, err
	}
	return &NodeCache{c}, nil
}

// Get returns the node as last read, and false if it did not exist then, if
// ZooKeeper refused its read (see Skipped), or if the first load has not
// finished. It never blocks on the network.
func (n *NodeCache) Get() (Node, bool) { return n.c.get("") }

// Events returns the channel of the cache's events: Added, Updated and
// Removed in the order the node's changes were read, then Initialized once
// after the first load's event (if the node existed). It is closed after
// Close, or after the session is closed and the last event was received.
// With WithEvents(false) it delivers nothing and is closed the same way.
func (n *NodeCache) Events() <-chan Event { return n.c.q.Out() }

// Initialized returns a channel that is closed once the first load is done.
// It is never closed if the cache is closed first.
func (n *NodeCache) Initialized() <-chan struct{} { return n.c.init }

// Skipped returns the node's path with ZooKeeper's refusal (an error
// matching zk.ErrNoAuth that names the node) while the cache leaves the
// node out because its ACL refuses the session's read; an empty map
// otherwise. See the package doc for when the node is read again.
func (n *NodeCache) Skipped() map[string]error { return n.c.skips() }

// Close stops the cache: it returns after its goroutines have exited;
// undelivered events are dropped and Events is closed. Get still returns the
// last value. Idempotent; it always returns nil.
func (n *NodeCache) Close() error { return n.c.close() }
