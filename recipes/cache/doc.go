// Package cache keeps local copies of ZooKeeper nodes that a process reads
// often, as Apache Curator's NodeCache and PathChildrenCache do: NewNode
// caches one node's data and Stat, NewChildren the children of a node with
// their data. Reads (Get, List) never touch the network; Events reports
// every change the cache reads, and Initialized says when the first load is
// done.
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
// path (NewNode) or the children of that node (NewChildren), whatever their
// layout. It never creates the path.
//
// # Events
//
// One goroutine per cache reads every change and compares what it read
// with its copy: Czxid tells incarnations of a node apart (one deleted and
// created again gives Removed, then Added, even if its version is back to 0)
// and Mzxid writes (Updated). So the events of one node come in the order of
// its changes, each change read once, and a read older than the copy is
// ignored. ZooKeeper's watches fire once and carry no data: writes that
// come faster than a read give one Updated with the last data, and a node
// created and deleted between two reads gives no event. Replaying the events
// from an empty copy gives the cache's copy.
//
// # Loss
//
// While the connection is down the copy stays as it was, stale. At every
// Reconnected, to the same session or to a new one after Lost, the cache
// reads everything again and reports exactly what differs from its copy:
// the changes made while it was away, and nothing else. When the session is
// closed the cache stops and closes Events.
//
// # Costs
//
// One data watch per cached node, one child watch on the parent
// (NewChildren), shared with every other user of the session (see
// session.Session.Watches), and one goroutine per watched node. A change
// costs one read (a child added or removed: one list, and one read per new
// child); a reconnect costs a read of everything (one list and one read per
// child). While the node (NewNode) or the parent (NewChildren) does not
// exist the cache polls for it, after 50 ms at first, backing off to once a
// second, without an exists watch: go-zookeeper cannot remove one, so it
// would outlive Close. Events not yet received are kept in memory: receive
// them, or pass WithEvents(false).
package cache
