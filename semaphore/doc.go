// Package semaphore provides a distributed counting semaphore on ZooKeeper,
// wire-compatible with Apache Curator 5.x's InterProcessSemaphoreV2: Go and
// Java processes taking leases on one path never hold more leases together
// than the maximum.
//
//   - New: leases up to a fixed maximum; NewShared: up to the value of a
//     SharedCount, which any process can change.
//   - NewMutex: a semaphore of one lease, the Go twin of Curator's
//     InterProcessSemaphoreMutex. It does not exclude package mutex's locks
//     or Curator's InterProcessMutex on the same path (other znodes).
//   - NewSharedCount: Curator's SharedCount, a 32-bit count in one node, with
//     Get, Set, TrySet (compare-and-set on the version) and Watch.
//
// # Znodes
//
//	<path>/locks/_c_<uuid>-lock-<seq>     EPHEMERAL_SEQUENTIAL   the acquirers' mutex
//	<path>/leases/_c_<uuid>-lease-<seq>   EPHEMERAL_SEQUENTIAL   one node per lease
//	<count path>                          PERSISTENT             a SharedCount: 4-byte big-endian int32
//
// Node data is the participant id (WithID). The directories are created on
// demand as container nodes. A lease holds when the leases/ directory has at
// most the maximum children. The maximum is never stored by the semaphore:
// it is a number every participant agrees on, or a SharedCount's value.
//
// # Algorithm
//
// An acquirer queues on the locks/ mutex; holding it, it waits until enough
// leases are free, then creates its lease nodes in one transaction that also
// counts the leases and deletes its locks/ node. The count is taken
// atomically with the create, so the maximum holds whatever other processes
// do; the mutex only keeps waiting acquirers out of leases/. AcquireN takes
// its n leases in that one transaction: all or none. Raising a SharedCount's
// value wakes waiters; lowering it ends no lease.
//
// # Loss
//
// A lease ends as a lock's does (see package recipes): when it is released,
// at the first suspension of the connection under the default loss policy,
// when the session is lost or closed, when the semaphore is closed, and,
// with WithNodeWatch (the default), when someone else deletes its node. A
// lease that ends other than by Release has its node deleted, so it does not
// keep a slot from others. A semaphore shared with Java processes may show
// one node more than the maximum: Curator waits with its node in leases/.
//
// # Costs
//
// A contended acquisition costs six requests (the mutex's create, children
// read and watch; the read of leases/; the transaction; the release's
// delete) and two watch notifications; Curator's costs about ten requests.
// A hold longer than 100 ms adds the node watch: one request, one
// notification.
//
// # Cancellation
//
// ctx is the only bound of a wait: when it ends, the call returns its error
// within a few milliseconds, leases won at that moment are released, and the
// nodes are deleted, at once on a healthy connection, else as soon as the
// connection allows. A canceled AcquireN leaves no node.
//
// The design notes (docs/design.md in the repository) show why counting at
// the create keeps the maximum without the mutex.
package semaphore
