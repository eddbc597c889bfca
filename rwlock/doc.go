// Package rwlock provides a distributed read-write lock on ZooKeeper,
// wire-compatible with Apache Curator 5.x's InterProcessReadWriteLock: any
// number of readers hold it together, a writer holds it alone, and Go and
// Java processes on one path queue in one order.
//
//   - New: not tied to goroutines, like sync.RWMutex: any goroutine may
//     release a lease;
//   - NewReentrant: reentrant per goroutine, as Curator's lock is per
//     thread; an upgrade (the write lock asked for by a goroutine holding only
//     the read lock) fails at once with ErrUpgrade, where Curator blocks for
//     ever.
//
// Both kinds downgrade (WriteLease.Downgrade: the writer becomes a reader
// with no writer in between), and both exclude each other and Curator on
// one path.
//
// # Znodes
//
//	<path>/_c_<uuid>-__READ__<seq>    EPHEMERAL_SEQUENTIAL   a reader
//	<path>/_c_<uuid>-__WRIT__<seq>    EPHEMERAL_SEQUENTIAL   a writer
//	<path>/_c_<uuid>-__READ__<wseq>   EPHEMERAL              a downgrade
//
// Every node's data is the participant id (WithID). The lock directory is
// created on demand as a container node. A downgrade's read node carries the
// sequence wseq of the writer's node and is created in one transaction with
// a check of that node, as Curator 5.5 and later do: it sorts with the
// writer, ahead of writers queued meanwhile, so none can slip in. Curator 5.4
// downgrades with an ordinary read node instead; processes of either version
// that do not downgrade interoperate.
//
// # Fairness
//
// A writer holds when no node sorts before it but its own downgrade's read
// node; a reader holds when no other writer sorts before it. Readers that arrive after a queued writer wait for
// it, so readers cannot starve writers, and a reader never waits for a
// writer queued after it (Kazoo's lock does, and deadlocks).
//
// # Loss
//
// A lease ends as a mutex's does (see package recipes): when it is released,
// at the first suspension of the connection under the default loss policy,
// when the session is lost or closed, when the lock is closed, and, with
// WithNodeWatch (the default), when someone else deletes its node. A lease
// that ends other than by Release has its node deleted. Fence the guarded
// resource with the token: write leases' tokens grow.
//
// # Costs
//
// Acquiring and releasing either side uncontended costs three requests in
// two round trips (a create, the children read pipelined behind it, and the
// delete). A waiter sets one data watch, on the nearest writer before it (a
// writer: on its predecessor), so a release wakes only the waiters it
// unblocks; a reader woken by its writer's delete holds without a read.
//
// # Cancellation
//
// ctx is the only bound of a wait: when it ends, the call returns its error
// within a few milliseconds, a lock won at that moment is released, and the
// node is deleted, at once on a healthy connection, else as soon as the
// connection allows. An RWMutex's Lock by a goroutine that holds a read lease
// of the same lock waits for that lease like any writer, until ctx ends
// (sync.RWMutex has the same limit): release it first, or use NewReentrant.
//
// The design notes (docs/design.md in the repository) derive the decisions
// on sequences and the downgrade.
package rwlock
