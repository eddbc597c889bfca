// Package keeper holds the pieces that the keepers of a node that stays
// share: group.Node, which keeps an ephemeral node, and service discovery's
// keeper of a Static or Permanent instance's persistent node. Each piece has
// one meaning and no state of its own beyond what it is given:
//
//   - Changes wakes the waiters on a keeper's state at every change of it
//     (a channel closed and replaced, under the keeper's mutex).
//   - Changes.UntilHeld waits for new data to be held and, when ctx ends
//     first, tells held after all, unknown (a write went out on the
//     session's connection since the data was stored), or not written.
//   - Loop is the keeper's goroutine: wait for a connected session, establish
//     the node, keep it, and after a failed round back off (NewBackOff: an
//     exponential backoff that never gives up) until Close or a refusal for
//     good.
//   - Get, GetW and AwaitChange read a node and wait out a change of it;
//     SetVersioned writes data conditional on a version, reading the version
//     again while the node is the same one (its czxid).
//
// It owns no znodes: the keepers' own documentation says which nodes they
// create and what a loss means for them.
package keeper
