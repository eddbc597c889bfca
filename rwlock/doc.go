// Package rwlock provides a distributed read-write lock on ZooKeeper, built
// on the recipes engine and wire-compatible with Apache Curator 5.x's
// InterProcessReadWriteLock: Go and Java processes locking the same path
// queue in one order, any number of readers hold the lock together, and a
// writer holds it alone.
//
//   - RWMutex (New): not tied to goroutines, like sync.RWMutex: its leases
//     may be unlocked from any goroutine; no implicit reentrancy, upgrade or
//     downgrade;
//   - Reentrant (NewReentrant): reentrant per goroutine, as Curator's lock is
//     per thread, with Curator's downgrade (a write holder takes the read
//     lock) and an error, not a deadlock, for an upgrade.
//
// Both kinds offer WriteLease.Downgrade, and both exclude each other and
// Curator on the same path.
//
// # Znodes
//
// One directory (created as a container node, so it disappears when empty)
// holds one node per contender:
//
//	<path>/_c_<uuid>-__READ__<seq>   EPHEMERAL_SEQUENTIAL   a reader
//	<path>/_c_<uuid>-__WRIT__<seq>   EPHEMERAL_SEQUENTIAL   a writer
//	<path>/_c_<uuid>-__READ__<wseq>  EPHEMERAL              a downgrade
//
// as Curator's protected mode names them; the data of every node is the
// participant id (WithID). Nodes sort by the sequence after their marker
// (then by name); children that match neither marker are ignored.
//
// The third form is a downgrade's read node (Curator 5.5+, CURATOR-621): the
// write holder takes the read lock with an EPHEMERAL node named with its
// write node's own sequence wseq, created in one multi with a check that the
// write node still exists. The read node therefore sorts with the write
// node, ahead of every writer that queued while it wrote, so when the write
// node goes no such writer can slip in while the downgraded reader reads.
// Curator 5.4 (the version Debian ships) creates an ordinary sequential read
// node instead, which sorts after the queued writers: that writer then gets
// the lock while the downgraded reader still reads (CURATOR-276). Processes
// of either version that do not downgrade interoperate with this package.
//
// # Algorithm
//
// An acquire creates its node and, pipelined behind the create, lists the
// directory (see package recipes); decisions use sequences, so that a
// downgrade's read node, which shares its writer's sequence, neither blocks
// that writer nor is blocked by it:
//
//   - a writer holds when every node before it has its own sequence (none,
//     or its own downgrade read nodes); otherwise it sets a data watch on its
//     nearest predecessor, as Curator's writer does;
//   - a reader holds when no write node with another sequence sorts before
//     it; otherwise it watches the nearest such writer. Curator's reader
//     watches the first writer instead; both are safe, but a writer is
//     deleted normally only once every writer before it is gone, so the
//     nearest one wakes a queued reader once, where the first one wakes it
//     once per writer queued before it.
//
// Readers that arrive after a queued writer wait for it: a stream of readers
// cannot starve writers. A reader never waits for a writer queued after it
// (the read-write lock of Kazoo 2.8 does, and deadlocks: python-kazoo #649).
// A waiter woken by the deletion of the node it watches takes the lock
// without reading the directory again when its last snapshot showed nothing
// else blocking it (see package recipes): a reader always may (only downgrade
// read nodes can appear before a reader after it read, and they do not block
// it); a writer only when no other writer sorted before it, because a
// writer before it may have placed a downgrade read node before it since it
// read, and then it reads the directory again, as Curator's writer always
// does.
//
// # Loss
//
// Every acquire returns a lease whose Done channel closes when the lock is
// lost, as the mutex's: under the session's standard loss policy (the
// default) as soon as the connection is suspended, so a writer is told it
// lost the lock before the server can expire its session and hand the lock
// to someone else; under the session-only policy when the session is lost;
// with the node watch (WithNodeWatch, default on) also when someone deletes
// our node (ErrLockLost); at Close (ErrClosed). A read lease is lost the same
// way. Whenever a lease ends other than by Unlock its node is deleted, so a
// lost holder never keeps blocking others. Pass the fencing token (Token,
// the node's czxid) to the guarded resource: write leases' tokens grow.
//
// # Upgrade
//
// A read holder asking for the write lock would wait for itself: Curator's
// InterProcessReadWriteLock blocks for ever. Reentrant returns ErrUpgrade at
// once, before any node is created, when the calling goroutine holds the
// read lock and not the write lock. RWMutex cannot tell whether another
// goroutine will unlock this process's read leases (sync.RWMutex has the
// same limit), and in a service sharing one RWMutex between handlers one
// often will: so its Lock waits like any writer, bounded by ctx. A goroutine
// that waits on its own read lease gets ctx's error when ctx ends, and its
// write node is deleted; unlock the read lease first, or use Reentrant.
//
// # ACLs
//
// Every node a lock creates (the lock directory and its parents, created as
// container nodes, and the read and write nodes, a downgrade's included) gets
// the session's ACL (session.WithACL; default open to all). ZooKeeper checks a
// create and a delete against the parent's ACL, so the lock directory's ACL
// decides who may queue and who may delete a holder's node: with a
// creator-only ACL (digest credentials and zk.AuthACL) a session without the
// credentials fails at once in every acquire, without retrying, with an error
// matching zk.ErrNoAuth whose message names the node whose ACL refused (a
// *session.OpError), and leaves no node. A directory that already exists
// keeps its own ACL; under one open to all, a waiter that may not read the
// node it waits on fails with zk.ErrNoAuth naming that node.
//
// # Cancellation
//
// ctx is the only bound on a wait. A canceled or failed acquire deletes its
// node (detached, bounded by WithCleanupTimeout; while the connection is
// down the delete goes to the session's guaranteed-delete queue) and returns
// an error matching context.Canceled or context.DeadlineExceeded; a lock won
// just as ctx ended is released, not leaked.
package rwlock
