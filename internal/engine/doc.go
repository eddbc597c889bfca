// Package engine is the engine behind every ordered recipe of this module
// (mutex, rwlock, semaphore, leader): the Go counterpart of Apache Curator's
// LockInternals, wire-compatible with it. A recipe describes its queue with a
// Driver (its one extension point) and acquires through an Engine, which
// hands out a Lease that ends when ownership ends.
//
// # Znodes
//
// A recipe directory, created on demand as a container node, holds one
// EPHEMERAL_SEQUENTIAL node per contender, named as Curator's protected mode
// names them:
//
//	<dir>/_c_<uuid>-<marker><seq>
//
// where uuid is a random UUID in its 36-character dashed form, marker is the
// driver's ("lock-", "latch-", "lease-", "__READ__", "__WRIT__") and seq the
// server's %010d sequence, read as an unsigned 32-bit number so that a
// directory past 2^31 child changes keeps its order. The node's data is the
// participant id. Children that match no marker are ignored. A fixed-node
// lock (AcquireFixed) uses one EPHEMERAL node with a fixed name instead.
//
// # The files
//
//	engine.go        the Engine and the acquires in progress (options.go: its options)
//	acquire.go       an acquire: the attempt loop and the decision on a snapshot
//	create.go        the directory, the create pipelined with the first read, ghost recovery
//	wait.go          reading the children and waiting on the watched child
//	cleanup.go       what a failed acquire and Close delete, within their bounds
//	lease.go         the Lease and its monitor (what ends it, its node's watch)
//	driver.go        the Driver and Standard
//	placed.go        nodes placed beside an anchor (a read-write lock's downgrade)
//	counted.go       counted leases (the semaphore's transaction)
//	fixed.go         fixed-node locks (the non-fair mutex)
//	participants.go  reading a recipe's participants
//	reentrant.go     per-goroutine hold counts (GoroutineHolds; reentrant_held.go)
//	heldleases.go    the leases a recipe value holds (for Held)
//	names.go         protected names, UUIDs and the sort order
//	error.go         Error: the recipe and path, named once; errors.go: the sentinels
//	refused.go       the refusals of a transaction, named by operation
//
// # Guarantees
//
// Every call is bounded by its ctx: each request runs on a goroutine of the
// session, and the caller stops waiting when ctx ends. A failed or canceled
// acquire deletes its node, through the session's guaranteed-delete queue
// while the connection is down; a create whose reply is lost or late is
// swept by its protected UUID once it has completed. A lease is never
// granted while the connection is suspended or when its node's owner is not
// the live session (Curator's CURATOR-604 and CURATOR-696). A lease that ends
// other than by Release has its node deleted, unless the engine was built
// WithKeepNodeUntilRelease (the leader keeps its node until its work has
// returned).
//
// docs/design.md derives each step: the handoff on a deletion notice without
// a read, looking ahead, the node watch's 100 ms bound, placed and counted
// nodes, and the one window left to fixed-node locks.
package engine
