// Package group keeps a znode that stays and builds group membership on it,
// as Apache Curator's PersistentNode and GroupMember do, on their node
// layout, so that Go and Java members can share a group.
//
//	m, err := group.NewMember(sess, "/workers", "worker-7", []byte("10.0.0.7:8080"))
//	if err != nil {
//		return err
//	}
//	defer m.Close() // leaves the group
//	if err := m.Start(); err != nil {
//		return err
//	}
//	for view := range m.Changes(ctx) { // id -> data, this member included
//		rebalance(view)
//	}
//
// A Node (Curator's PersistentNode; a Go name that does not suggest
// ZooKeeper's PERSISTENT mode, which it never uses) creates an ephemeral
// node and creates it again whenever it is gone; Wait blocks until it
// exists, SetData changes its data. A Member is a Node at <path>/<id> plus a
// view of the group: Members, and Changes, a channel of views.
//
// # Znodes
//
//	<path>                         Ephemeral                      Node (Curator PersistentNode, EPHEMERAL)
//	<parent>/_c_<uuid>-<name>      ProtectedEphemeral             Node (EPHEMERAL, with protection)
//	<parent>/_c_<uuid>-<name><seq> ProtectedEphemeralSequential   Node (EPHEMERAL_SEQUENTIAL, with protection)
//	<path>/<id>                    Ephemeral, data = member data  Member (Curator GroupMember)
//
// Missing parents are created as container nodes. Nil data, theirs
// included, is written as empty data: Curator's GroupMember fails on a
// null. A Member sees every child of the group path as a member, whose id
// is the child's name, as Curator does. There is no plain
// EPHEMERAL_SEQUENTIAL mode: a create whose reply is lost would leave a node
// nobody can recognise; the protected name is what lets a Node find it and
// adopt it.
//
// # Loss and recovery
//
// The node is ephemeral: it goes with its session. A Node creates it again:
//
//   - after a session loss, as soon as the session is connected on a new
//     ZooKeeper session: its first requests after the Reconnected event
//     create the node (a create and the read that checks its owner; for the
//     protected modes, a listing of the parent first), so it is back a few
//     request round trips after Reconnected (the tests allow 5 s on a
//     loaded machine);
//   - after someone else deleted it, at once (its data watch fires);
//   - after a suspension that the session survived, it reads the node
//     again and creates it if it is gone, as Curator does at RECONNECTED.
//
// A node left by this Node's own earlier session (a create whose reply was
// lost, or a session that the client declared lost but the server kept) is
// adopted when the current session owns it, and deleted otherwise (protected
// modes). When the fixed name of an Ephemeral node is held by another
// session, the Node waits until that node is gone, then creates its own; it
// never writes another session's node it has read (Curator writes its data
// into it). SetData writes with the node's version as last read (see
// Node.SetData for the one case ZooKeeper cannot rule out). A Member's view
// is read again after every change of the group and after every new
// session; while the connection is down it is the last view read.
// ZooKeeper refusing the node for good (zk.ErrNoAuth, ...) stops the Node:
// Wait returns the error.
//
// # Costs
//
// A Node holds one data watch on its node; keeping it costs nothing more
// while nothing happens. A Member holds one child watch on the group path
// and one data watch per member (shared with the session's other users of
// those nodes). When a member joins or leaves, and after a new session, it
// reads the whole group: one listing plus one read per member, so n+1
// requests of each of n members; when a member changes its data, one read
// of that member's node (rarely two). While the group path does not exist,
// a Member reads it again once its own node (and so the path) is created,
// else polls it every half second to a second, rather than leave an
// exists-watch.
//
// # Close
//
// Close deletes the node (waiting a few seconds at most; when the connection
// is down the session's background queue deletes it later, or it goes with
// the session) and returns after every goroutine it started has exited. The
// delete reads the node first and is sent only while the node is the one
// this Node created (its czxid and owner), at the version read: another
// session's node under the same name is left alone (see Node.Close for the
// one case ZooKeeper cannot rule out).
package group
