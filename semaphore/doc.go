// Package semaphore provides a distributed counting semaphore on ZooKeeper,
// built on the recipes engine and wire-compatible with Apache Curator 5.x's
// InterProcessSemaphoreV2: Go and Java processes taking leases on the same
// path never hold more leases together than the maximum.
//
//   - Semaphore: leases up to a maximum, fixed (New) or shared through a
//     SharedCount (NewShared); Acquire, AcquireN (all or none), TryAcquire.
//   - Mutex: a Semaphore with a maximum of 1, the Go twin of Curator's
//     InterProcessSemaphoreMutex. It does not exclude package mutex's locks
//     or Curator's InterProcessMutex on the same path (different znodes).
//   - SharedCount: Curator's SharedCount, a 32-bit count in one node, with
//     Get, Set, TrySet (compare-and-set on the version) and Watch.
//
// # Znodes
//
// A semaphore on path uses two directories, created on demand as container
// nodes (so they disappear when empty), exactly as InterProcessSemaphoreV2
// does:
//
//	<path>/locks/_c_<uuid>-lock-<seq>    EPHEMERAL_SEQUENTIAL, data: participant id
//	<path>/leases/_c_<uuid>-lease-<seq>  EPHEMERAL_SEQUENTIAL, data: participant id
//
// locks/ is an InterProcessMutex that serialises acquirers; leases/ holds one
// node per lease. A lease holds when the number of children of leases/ (all
// of them, as Curator counts) is at most the maximum. The maximum is not
// stored by the semaphore: it is a number every participant agrees on, or
// the value of a SharedCount node:
//
//	<countPath>                          PERSISTENT, data: 4-byte big-endian int32
//
// The participant id defaults to the local IP address as text (Curator's
// default node data); set it with WithID.
//
// # Algorithm
//
// Curator's acquirer takes the locks/ mutex, creates its lease node, then
// lists leases/ with a child watch until the count is at most the maximum,
// waiting for the watch in between, and releases the mutex. This package
// keeps that contract with fewer requests:
//
//  1. Queue on the locks/ mutex (the engine's fair mutex: a create and a
//     pipelined children read, then a data watch on the predecessor). The
//     waiter takes over on the predecessor's deletion notice alone, without
//     reading the children again (recipes.TrustHandoff: the mutex only
//     keeps acquirers from crowding leases/ with waiting nodes; nothing
//     below depends on it for safety).
//  2. Holding the mutex, list leases/ with a child watch. While the count
//     plus the leases asked for is above the maximum, wait for the watch
//     (or for the SharedCount to change, or for ctx); while this process
//     holds the mutex nobody following the protocol creates lease nodes, so
//     a change of the children is a lease given back, and when one is enough
//     the acquirer goes on without listing again.
//  3. Create the lease nodes in one transaction (a multi) with an empty
//     setData on leases/ and the delete of our locks/ node. The setData's
//     Stat is the directory right after our create: its NumChildren is the
//     count, taken atomically with the create, and its Mzxid the fencing
//     token. If the count is at most the maximum the leases are held and the
//     mutex released in the same transaction; otherwise (a participant that
//     ignores the mutex created a node meanwhile) our nodes are deleted and
//     the acquirer queues again. If our locks/ node is gone, the transaction
//     fails as a whole and the acquirer queues again.
//
// Counting at the create is safe without the mutex: of any maximum+1 holders,
// the one whose decision came last saw every other holder's node, so it
// cannot have held. The mutex is for liveness, as in Curator: without it,
// waiting acquirers' nodes would fill leases/. This package never creates a
// waiting lease node; a Curator acquirer does (it waits with its node in
// leases/), so a semaphore shared with Java processes may show one node more
// than the maximum, that of the one Java waiter.
//
// On the contended workload of the issue (8 sessions, 3 leases, each held
// 10 ms), an acquisition costs 6 requests (the mutex's create, children read
// and predecessor watch; the children read of leases/; the transaction; the
// release's delete) and 2 watch notifications; a lease held longer than
// 100 ms adds one of each for its own node watch (see WithNodeWatch). Curator's costs about
// 10.
//
// AcquireN takes the n leases in one transaction, when n are free: all or
// none, and never a part held while waiting for the rest.
//
// # Loss
//
// An acquire returns *Lease handles whose Done channel closes when the lease
// is lost. Under the session's standard loss policy (the default) a lease
// ends as soon as the connection is suspended: from then on the server may
// expire the session at any moment and hand the lease to a waiter, so the
// holder is told before anyone else can acquire. Under the session-only
// policy a lease survives a short disconnect and ends when the session is
// lost (see package mutex for the window that accepts). With the node watch
// (WithNodeWatch, default on), a lease also ends with ErrLeaseLost when
// someone deletes its node. Whenever a lease ends other than by Release, its
// node is deleted so that it does not keep a slot from others.
//
// A connection that drops while an acquire waits (holding the mutex) ends
// its hold of the mutex; the acquire queues again once the connection is
// back. A session lost while waiting ends the acquire with session.ErrLost.
//
// # The maximum
//
// As in Curator, a fixed maximum is a convention: nothing stops participants
// that disagree on it from holding more leases together than the smaller
// value. Use a SharedCount (NewShared) to make every participant, Go or Java,
// use the same maximum. Each acquire reads it from the SharedCount's watch
// (as Curator's semaphore reads its SharedCountReader), so a change reaches
// acquirers after a notification's delay. Raising it wakes waiters; lowering
// it ends no lease: holders keep theirs, and nobody is admitted until fewer
// leases than the new maximum are held.
//
// # ACLs
//
// Every node a semaphore creates (its directories, "locks/" and "leases/",
// created as container nodes, the acquirer mutex's nodes, the lease nodes and
// a SharedCount's node) gets the session's ACL (session.WithACL; default open
// to all). ZooKeeper checks a create and a delete against the parent's ACL, so
// the directories' ACL decides who may take or delete a lease; the lease
// nodes' own ACL does not (a lease is counted, not read). With a
// creator-only ACL (digest credentials and zk.AuthACL) a session without the
// credentials fails at once in every acquire, and in SharedCount's Get, Set
// and TrySet, without retrying, with an error matching zk.ErrNoAuth whose
// message names the node whose ACL refused (a *session.OpError), and leaves
// no node.
//
// # Cancellation
//
// ctx is the only bound on a wait. A canceled or failed acquire deletes its
// nodes (detached, bounded by WithCleanupTimeout; while the connection is
// down the delete goes to the session's guaranteed-delete queue) and returns
// an error matching context.Canceled or context.DeadlineExceeded; leases won
// just as ctx ended are released, not leaked. A canceled AcquireN leaves no
// node: its leases are created only in its final transaction.
package semaphore
