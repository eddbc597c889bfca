// Package recipes is the engine shared by the ordered ZooKeeper recipes of
// this module (mutex, rwlock, semaphore, leader): the Go counterpart of
// Apache Curator's LockInternals, wire-compatible with it.
//
// # Znodes
//
// A recipe directory (created on demand as a container node, so an empty
// directory disappears) holds one EPHEMERAL_SEQUENTIAL node per contender,
// named as Curator's protected mode names them:
//
//	<dir>/_c_<uuid>-<marker><seq>
//
// where uuid is a random UUID in its 36-character dashed form, marker is the
// Driver's marker ("lock-", "latch-", "lease-", "__READ__", "__WRIT__") and
// seq the server's %010d sequence. The node's data is the participant id.
// Children are sorted by the number after the marker occurring last in the
// name, then by name; children that match no marker are ignored.
//
// The sequence is the directory's cversion, a signed 32-bit counter: after
// 2^31 changes of the directory's children it wraps, and the server writes
// negative numbers ("-2147483648", ..., "-000000001"). Those nodes were
// created after every node with a non-negative sequence, so the engine reads
// a sequence as an unsigned 32-bit number, which keeps creation order (until
// the counter reaches 0 again, after 2^32 changes); read as signed, a new node
// would sort before the holder's and hold too. Curator compares the text
// after the marker instead, which orders a negative sequence ('-' sorts
// before digits) before the non-negative ones: in a directory shared with
// Curator processes the two would disagree on the holder once it passes 2^31
// child changes. Such a directory must stay below that; a container directory
// starts again from 0 when it is reaped empty and recreated, so a lock that
// is regularly free for longer than the server's container check interval
// (60 s by default) never gets near it.
//
// # Algorithm
//
// Acquire waits for a connected session and captures its epoch and lease
// context, then creates our node and, in parallel, lists the directory:
// requests of one session are answered in order, so a list read after the
// create contains our node (found by its UUID) and the first decision costs
// no extra round trip (the list is read again when the read overtook the
// create). The Driver decides on the sorted snapshot: held, or the name of
// the child to wait for. A waiter sets a data watch (GetW) on that child only,
// never on the directory, so a release wakes one waiter (two with a
// LooksAhead driver, below), never a herd. The wait wakes on the
// watch, on the end of the session epoch, on ctx and on Close. A woken waiter
// normally reads the directory again; with a Monotone driver and the node
// watch, a waiter whose last snapshot showed only the deleted child before it
// takes over on the deletion notice alone (children sorting before ours were
// all created before ours, so none can have appeared since), or on the reply
// that finds that child gone when it sets the watch. With a LooksAhead driver
// (the fair mutex) and the node watch, a waiter with two or more children
// before its own watches the one two places ahead instead: when that child
// goes, its predecessor holds (in a queue left in order), and the waiter
// reads the directory with a data watch on the predecessor sent beside the
// read, so that by its turn it is next in line and takes over on the notice.
// The read then happens while the predecessor holds, not between its
// release and ours: a handoff costs the delete and one notification. A
// release wakes at most two waiters then, the next in line and the one after
// it, whatever the queue's length. Such a waiter
// (next in line) is the only one that watches its own node while it waits,
// and only once it has waited 100 ms: that watch, or a notice within the
// 100 ms followed by the lease's own watch 100 ms after the acquire, is what
// lets it skip the read (a third party's delete of our node cannot go
// unnoticed for longer than WithNodeWatch says); deeper waiters read the
// directory when woken, which finds such a delete, and their lease sets the
// watch once held.
//
// Before the read that decides, the engine captures the session's lease
// context and never grants a lease while the connection is suspended or when
// our node's owner is not the live session (the errors behind Curator's
// CURATOR-604 and CURATOR-696).
//
// A create whose reply is lost (connection error) is recovered as Curator's
// protected mode does: list the directory, find the child starting with
// "_c_<uuid>-", adopt it only if its ephemeralOwner is our live session,
// otherwise delete it and create again. A create that succeeded on a session
// other than the one the attempt is bound to (go-zookeeper may send a queued
// request on a new session) is detected without an extra request, by the
// connection's session id after the reply, and undone.
//
// The fencing token is our node's czxid. go-zookeeper v1.0.4 has no create2
// and returns only the path of a create, but the reply's header carries the
// zxid of the create's transaction, which is the node's czxid: the session
// reads it off the wire (zksession.Toolkit.CreatedZxid), so a plain create
// gives the token with no other request, and an ordinary acquire does not
// write the recipe directory. (Should the session not have it, the engine
// reads our node.) The transactions of a placed node (a Placed driver: a
// read-write lock's downgrade) and of counted leases (AcquireCounted) still
// carry an empty setData on the directory, for the token and the count.
// WithMultiCreate(true) restores the earlier way: a multi of the create and
// a setData of empty data on the directory, whose Stat carries the same zxid.
// An uncontended acquire and release is thus three requests in two round
// trips: the create and the children read (pipelined), and the delete.
//
// # Leases and loss
//
// A lease is derived from the session's lease context: under the standard
// loss policy it ends at the first suspension of the connection
// (zksession.ErrSuspended), under the session-only policy at the loss of the
// session (zksession.ErrLost). A goroutine of the lease (its monitor) also
// ends it on Close (ErrClosed) and, with WithNodeWatch (default on), when our
// node is deleted by someone else (ErrNodeDeleted): it keeps a data watch on our
// own node, set 100 ms after the acquire returned (or inherited from a waiter
// that waited next in line for longer than 100 ms), so a hold shorter than
// that costs nothing; a longer one costs a request and an extra watch
// notification at release. A sequential lease without an inherited watch
// starts that goroutine only when it has something to do (the 100 ms have
// passed, the lease context ended, or Close): a shorter hold released before
// costs two context callbacks and a timer (with the node watch), no
// goroutine. A waiter next in line likewise watches its own
// node only once it has waited 100 ms: a handoff within that time costs the
// predecessor's delete and one notification, with no read (see
// WithNodeWatch for the bound this gives on a third party's delete). When a
// lease ends for any reason other than Release or ErrNodeDeleted, the engine
// deletes its node (through the session's guaranteed-delete queue while the
// connection is down; a fixed node by the lease's own goroutine, see below),
// so a holder told it lost the lock never keeps blocking others. With
// WithKeepNodeUntilRelease it leaves the node to Release instead (or to
// Close), so that the owner can finish what it was doing before anyone else
// takes over (package leader does so); a session that expires takes its
// nodes with it regardless.
//
// Lease.Err is the up-to-date reason: after zksession.ErrSuspended it also
// matches zksession.ErrLost once the lease's session is known lost; the cause
// of the lease's Context stays the first reason.
//
// # Fixed-node locks
//
// AcquireFixed (not a Curator recipe) creates one EPHEMERAL node with a fixed
// name, <dir>/<name>, whose data is "<uuid> <participant id>" with a uuid new
// for every acquire. Because the name is reused by every holder, the engine
// deletes a fixed node only while it carries our data (and, for a release,
// our session as ephemeralOwner), never by name alone (the session's queue
// has a conditional delete for it, GuaranteedDeleteIfData), and it checks the
// data, not only the
// owner, before it grants (two acquirers of one process share a session).
// Each delete is conditional on the version it read, and is sent only after
// checking that go-zookeeper is connected on the session it is meant for:
// go-zookeeper re-sends a request still queued when a connection drops on
// the next connection, which may belong to a NEW session, where a delete of
// version 0 would remove the next holder's node. One window remains: a
// delete queued in the instant between that check and the connection
// dropping, then sent on a new session after the old one expired and the
// next holder created the node with the same version. It needs a disconnect
// within that instant and an expiry and a new holder before the reconnect;
// go-zookeeper offers no way to withdraw a queued request to close it. The
// ordered recipes are not exposed to it: their node names are unique.
//
// # Cancellation and cleanup
//
// ctx is the only bound of every call: each ZooKeeper request runs on a
// goroutine of the session (zksession.Call, Toolkit.Retry), and the caller
// stops waiting for it when ctx ends, whatever the network does. A failed or
// canceled acquire hands its node to the session's durable queue
// (Toolkit.GuaranteedDelete, or GuaranteedDeleteIfData for a fixed node),
// which deletes it as soon as the connection allows and keeps trying across
// disconnects and session changes (a node of a session the client has left
// is deleted while it is still that session's, not left to the server's
// expiry of it); the acquire waits for that
// delete only while the connection is up, at most its ctx plus a grace of
// 10 ms (bounded by the cleanup timeout, WithCleanupTimeout): on a healthy
// connection the node is then usually gone when the call returns, but the
// only promise is that it goes as soon as the connection allows (check with
// a read, not with the call's return). A create whose reply
// comes after its caller gave up, or never comes (a lost reply: the ghost
// case), is swept by the same queue once it has completed: every child
// carrying the attempt's protected UUID (or, for a fixed node, its data) is
// deleted, on whichever session is current. If the recipe was won just as
// ctx ended, it is released and the ctx error returned. Errors match
// context.Canceled or context.DeadlineExceeded.
//
// # ACLs
//
// Every node the engine creates (contender nodes, placed and fixed nodes,
// counted leases; directories through Toolkit.EnsureContainers) gets the
// session's ACL, Session.ACL. A request that ZooKeeper refuses for good
// (zk.ErrNoAuth, zk.ErrInvalidACL, ...) is never retried: the call fails at
// once, after cleaning up, with a *zksession.OpError (see zksession.Refused)
// naming the request and the node whose ACL refused, inside the recipe's
// *Error.
//
// # Watches
//
// go-zookeeper cannot remove a watch, so a watch whose waiter gave up stays
// registered until its node changes. Watches are therefore shared per node
// (Toolkit.GetW): waiters on one node, and waiters that gave up on it, hold
// one registration between them, in the client and on the server. A
// try-acquire sets no watch it will not wait on.
//
// # Reentrancy
//
// GoroutineHolds keeps per-goroutine hold counts (keyed by goroutine id, as
// Curator keys by thread) for the recipes that are reentrant.
package engine
