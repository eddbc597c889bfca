// Package counter provides atomic counters in ZooKeeper, wire-compatible
// with Apache Curator 5.x's DistributedAtomicLong (New: 64 bits) and
// DistributedAtomicInteger (New32: 32 bits): Go and Java processes can
// change one counter together, and no change applies twice while the
// counter's node is not deleted (see Loss).
//
// # Znodes
//
//	<path>                             PERSISTENT   the value: 8 bytes big-endian (New), 4 (New32)
//	<lock path>/_c_<uuid>-lock-<seq>   EPHEMERAL_SEQUENTIAL   WithPromotion's mutex (Curator's InterProcessMutex)
//
// A missing node reads as 0, as does empty data (as in Curator); data of
// another length is an error matching ErrBadData, and is left alone. The
// first write creates the node, its parents as container nodes.
//
// # Algorithm
//
// A change reads the node and writes the new value conditional on the
// version read; when another writer got there first, it pauses (WithRetry)
// and starts over, or, with WithPromotion, goes on under a fair mutex, as
// Curator's PromotedToLock does. The writes stay conditional under the
// mutex, so processes that do not take it stay correct. Unlike Curator, an
// Add that would leave the counter's range fails with ErrOverflow instead of
// wrapping around.
//
// # Loss
//
// A counter holds nothing while idle. A write whose connection drops is sent
// again, with the same version, once the connection is back, on the same
// session or the next: a write conditional on one version applies at most
// once. While the connection is down a call waits within ctx for it before
// it sends anything: a call whose ctx ends then sent nothing, and fails with
// ctx's error. When the answer to a write may have been lost, the call
// returns an error matching recipes.ErrUnknownOutcome (ErrUnknownOutcome here
// is the same value) and the Value the write was conditional on. To apply
// the change at most once, retry with TrySet and that Value:
//
//	v, err := c.Increment(ctx)
//	for errors.Is(err, recipes.ErrUnknownOutcome) {
//		var ok bool
//		v, ok, err = c.TrySet(ctx, v, v.Value+1) // applies only if nothing was written since v
//		if err == nil && !ok {
//			// something was written since v, perhaps this increment: it is not applied again
//		}
//	}
//
// Calling Add again instead may apply the change twice.
//
// All of this holds while the counter's node lives. ZooKeeper numbers a
// node's versions from 0 again when it is deleted and created again, and a
// Value does not tell the two nodes apart: a write conditional on a version
// of the old node, a TrySet with a Value read from it included, may apply
// to the new one, and a create sent again after its answer was lost may
// create the node again after someone deleted it. Do not delete a
// counter's node while calls on it may be in flight or retried.
//
// # Costs
//
// A change costs two requests (a read and a conditional write; the first
// one creates the node instead) and no watch. Under contention every lost
// race costs two more; docs/performance.md has increments per second
// beside Curator's.
package counter
