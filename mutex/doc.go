// Package mutex provides distributed locks on ZooKeeper, built on the
// recipes engine and wire-compatible with Apache Curator 5.x:
//
//   - Mutex (New): fair, not reentrant, not tied to goroutines: its lease may
//     be unlocked from any goroutine, as with sync.Mutex;
//   - Reentrant (NewReentrant): fair and reentrant per goroutine, as Curator's
//     InterProcessMutex is per thread;
//   - NonFair: one ephemeral node with a fixed name (not in Curator);
//   - Multi: several locks taken all-or-nothing (InterProcessMultiLock).
//
// Mutex and Reentrant share InterProcessMutex's node layout: on the same path
// they exclude each other and InterProcessMutex holders. They do not exclude
// Curator's InterProcessSemaphoreMutex, which despite its name is a
// semaphore with one lease on a different layout ("<path>/locks" and
// "<path>/leases"): a Java service on InterProcessSemaphoreMutex and a Go
// service on Mutex both enter. The Go type that shares that layout is
// semaphore.NewMutex. NonFair excludes only other NonFair locks.
//
// # Znodes
//
// Mutex and Reentrant queue EPHEMERAL_SEQUENTIAL nodes in the lock
// directory (created as a container node, so it disappears when empty):
//
//	<path>/_c_<uuid>-lock-<seq>     data: participant id (default LocalID())
//
// exactly as InterProcessMutex does; children that are not "lock-" nodes are
// ignored. NonFair uses one EPHEMERAL node:
//
//	<path>/lock                     data: "<uuid> <participant id>"
//
// # Algorithm
//
// A fair Lock creates its node and, pipelined on the same connection, lists
// the directory; the node first in sequence order holds the lock; every other
// node sets one data watch. The second in line watches the holder. With the
// node watch (the default), a waiter further back watches the node two
// places ahead of its own: when that node goes, the waiter's predecessor
// holds, and the waiter reads the directory once and watches its
// predecessor, so that its own turn comes on a deletion notice with no read
// in between (one round trip less per handoff than Curator and
// go-zookeeper's lock, which read the directory after the notice). A release
// thus wakes at most two waiters, whatever the length of the queue (no herd
// effect): the next in line, which takes over, and the one behind it, which
// reads the directory. Without the node watch every waiter watches its
// immediate predecessor, a release wakes exactly one waiter, and it reads
// the directory before it holds. An uncontended Lock and Unlock
// cost three requests in two round trips: the create (a plain create, whose
// reply carries the fencing token, see package recipes), the children read
// pipelined behind it, and the delete. With the node watch (WithNodeWatch,
// default on) a lease held longer than 100 ms, or a waiter that waited next
// in line for longer than that, also sets a data watch on its own node: one
// more request, and one more watch notification at its release; a shorter
// hold and wait cost nothing more. After a connection error during the create, the node is
// found by its UUID and adopted only if its owner is our live session
// (Curator's protected mode, without its CURATOR-498 hole).
//
// # Loss
//
// A Lock returns a *Lease whose Done channel closes when the lock is lost.
// Under the session's standard loss policy (the default) the lease ends as
// soon as the connection is suspended: from then on the server may expire the
// session at any moment and give the lock to someone else, so the holder is
// told before anyone else can acquire. Under the session-only policy
// (session.WithLossPolicy(session.SessionOnly)) a lease survives a short
// disconnect and ends only when the session is lost. That policy accepts a
// window in which two processes may both hold the lock: a holder cut off
// from the server keeps its lease until the session's local timer declares
// the session lost, one session timeout after it last heard from the server;
// the server may expire the session one session timeout after it last heard
// from the holder, and hand the lock to the next waiter. While the holder's
// process runs, the overlap is short, about the network delay between them;
// it grows by any time the holder's process is paused (GC, SIGSTOP, a
// suspended VM), since a paused process runs no timer. Pass the fencing token
// (Token, the node's czxid) to the guarded resource.
//
// With the node watch, a lease also ends with ErrLockLost when someone
// deletes the lock node. Whenever a lease ends other than by Unlock, its node
// is deleted so that it does not block others.
//
// # Reentrancy
//
// Reentrant is reentrant per goroutine: nested Locks by the holding
// goroutine return at once, each needs its own Unlock, and the node goes at
// the last one; an Unlock from another goroutine returns ErrNotOwner. Mutex
// and NonFair are not reentrant and their leases may be unlocked from any
// goroutine; a second Lock while this process holds the lock queues behind
// the holder and waits (until the lease is unlocked or ctx ends).
//
// # ACLs
//
// Every node a lock creates (the lock directory and its parents, created as
// container nodes, and the lock nodes, NonFair's included) gets the session's
// ACL (session.WithACL; default open to all). ZooKeeper checks a create and a
// delete against the parent's ACL, so it is the lock directory's ACL that
// keeps a session without the credentials from queueing, and from deleting a
// holder's node to take the lock: with a creator-only ACL (digest
// credentials and zk.AuthACL) such a session's Lock and TryLock fail at once,
// without retrying, with an error matching zk.ErrNoAuth whose message names
// the node whose ACL refused (a *session.OpError), and leave no node. A
// directory that already exists keeps its own ACL: under one open to all,
// anyone may delete a holder's node whatever that node's ACL (the holder's
// lease then ends with ErrLockLost), and a waiter that may not read the node
// it waits on fails with zk.ErrNoAuth naming that node.
//
// # Cancellation
//
// ctx is the only bound on a wait. A canceled or failed Lock deletes its node
// (detached, bounded by WithCleanupTimeout; while the connection is down the
// delete goes to the session's guaranteed-delete queue, or for NonFair's node,
// which must be checked before it is deleted, to a background goroutine that
// Close waits for) and returns an error
// matching context.Canceled or context.DeadlineExceeded; a lock won just as
// ctx ended is released, not leaked.
package mutex
