// Package cache keeps local copies of ZooKeeper nodes that a process reads
// often, as Apache Curator's NodeCache, PathChildrenCache and TreeCache do:
// NewNode caches one node's data and Stat, NewChildren the children of a
// node with their data, NewTree a node and its whole subtree (WithMaxDepth
// bounds it; depth 0 is the root alone). Reads (Get, List, Children) never
// touch the network; Events reports every change the cache reads, and
// Initialized says when the first load is done.
//
//	flags, err := cache.NewNode(sess, "/config/flags/new-checkout")
//	...
//	defer flags.Close()
//	for ev := range flags.Events() {
//		n, ok := flags.Get() // the node as last read; ok is false while it does not exist
//		...
//	}
//
// # Znodes
//
// A cache reads and writes nothing of its own: it follows the node at its
// path, the children of that node or the subtree below it, whatever their
// layout. It never creates the path.
//
// # Events
//
// One goroutine per cache applies every change it reads to its copy:
// Czxid tells incarnations of a node apart (one deleted and created again
// gives Removed, then Added, even if its version is back to 0) and Mzxid
// writes (Updated). So the events of one node come in the order of its
// changes, each change read once, and a read older than the copy is
// ignored. In a tree a parent's Added comes before its children's, and
// children's Removed before their parent's. ZooKeeper's watches fire once
// and carry no data: writes that come faster than a read give one Updated
// with the last data, and a node created and deleted between two reads
// gives no event. Replaying the events from an empty copy gives the copy.
//
// # Loss
//
// While the connection is down the copy stays as it was, stale. At every
// Reconnected, to the same session or to a new one after Lost, the cache
// reads everything again (setting its watches again: the server dropped
// them with the connection) and reports exactly what differs from its copy:
// the changes made while it was away, and nothing else. When the session is
// closed the cache stops and closes Events.
//
// # Nodes the session may not read
//
// A node whose read ZooKeeper refuses (zk.ErrNoAuth: its ACL does not let
// the session read it, or list its children) is skipped, as Curator's
// caches skip a failed read: it is left out of the copy with its subtree (a
// NodeCache reports its node as absent), the cache still reaches
// Initialized, and one warning is logged per node and change of refusal.
// Skipped lists the nodes left out with ZooKeeper's refusals: a method
// rather than an event, so that it says what is missing now, also with
// WithEvents(false), and the events stay a replay of the copy. A skipped
// node gets an exists watch (ZooKeeper does not check exists against the
// ACL) and is read again when it fires, at its next write or delete, and at
// every reconnect's reload: an ACL fixed later shows at the next write. It
// is never read again in a loop.
//
// # Costs
//
// One data watch per cached node, one child watch per node above the
// maximum depth (a ChildrenCache: on the parent alone), one exists watch
// per skipped node. Only the server holds them (one per node, kind and
// session, whoever else on the session watches the node): their events
// reach the cache through one callback of the session's, so a watch costs
// the client no memory and no goroutine, and a cache runs two goroutines
// whatever its size. session.Session.Watches counts them, each cache its
// own. A write costs one read; a new node one list of its parent and a read
// (and a list) of each node of its subtree; a reconnect a read of
// everything. Loads keep up to 64 reads in flight. While the node
// (NodeCache, TreeCache) or the parent (ChildrenCache) does not exist the
// cache polls for it, after 50 ms at first, backing off to once a second,
// without an exists watch, which could not be removed at Close. Events not
// yet received are kept in memory: receive them, or pass WithEvents(false).
// BenchmarkTreeVsCurator measures a tree of 10,101 nodes beside Curator's
// TreeCache: about 220 bytes per node against 1,030, as many watches, a
// first load as long, a change seen sooner (docs/design.md has the figures).
package cache
