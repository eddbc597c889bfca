// Package barrier provides barriers on ZooKeeper, wire-compatible with
// Apache Curator 5.x: Barrier (Curator's DistributedBarrier), which one
// process sets and removes while others wait for its removal, and
// DoubleBarrier (DistributedDoubleBarrier), whose members start together
// (Enter returns once the stated number have entered) and finish together
// (Leave returns once all have left). Go and Java processes can share one.
//
// # Znodes
//
//	<path>          PERSISTENT   Barrier: set while it exists; data: the id (WithID)
//	<path>/<uuid>   EPHEMERAL    DoubleBarrier: one per member that entered; data: the id
//	<path>/ready    PERSISTENT   DoubleBarrier: created when enough members have entered
//
// Missing parents, and a double barrier's directory, are created as
// container nodes. A member node is named by a random UUID, as Curator names
// its own. The member that finds enough member nodes creates "ready"; the
// members that see no member node left delete it, as Curator's do.
//
// # Reuse
//
// The path can serve another round only once every Leave of the round
// before has returned nil: until then "ready" may still be there (a member
// deletes it only after a listing found no member node, and a Leave that
// ends with an error may not have deleted it), and a member of the next
// round that sees it passes Enter at once, however few have entered. If
// every member of a round loses its session without calling Leave, nobody
// deletes "ready" (it is persistent) and every later Enter returns at once:
// delete it by hand. Curator's members behave the same.
//
// # Loss
//
// Barrier.Wait waits through disconnects and session losses: it only reads.
// A DoubleBarrier member's node is ephemeral: Enter waits through a
// disconnect shorter than the session, but if the session is lost before
// the barrier opens, the node is gone, the other members no longer count
// it, and Enter returns an error matching session.ErrLost (call it again to
// join on the new session). A member whose session is lost after entering
// has left: its node goes with the session, and the others' Leave does not
// wait for it. Leave waits through disconnects and session losses.
//
// Curator's member whose node sorts first keeps its node until the others
// have left; the other members, and every member of this package, delete
// their node when they start to leave. Both wait until no member node is
// left, so they mix.
//
// # Costs
//
// Set: a create, after making sure the parents exist. Remove: a delete. Wait: one read with a data watch, one
// notification at the removal. Enter: a create, then, while it waits, a
// listing of the directory with a child watch at each change of it: each
// member that joins wakes every member waiting. Leave: a delete, then a
// listing at each change until no member is left, and a delete of "ready".
package barrier
