// Package leader elects one leader among the processes that take part in an
// election on a ZooKeeper path, on the node layout of Apache Curator 5.x, so
// that Go and Java participants can share an election.
//
// Run keeps a background worker running on exactly one replica:
//
//	err := leader.Run(ctx, sess, "/election/scheduler", func(ctx context.Context) error {
//		return scheduler.Run(ctx) // ctx is canceled as soon as this process stops leading
//	})
//
// Run campaigns, calls work while this process leads, and campaigns again
// after work returns, until its ctx ends. NewLatch (Curator's LeaderLatch)
// keeps a participant in the election until Close: ask IsLeader, block in
// Await, or follow Changes. NewSelector (Curator's LeaderSelector) calls a
// function while it leads. Participants, Leader and Observe show who leads
// to processes that do not campaign.
//
// # Terms
//
// Every stretch of leadership is a *Term, a lease (see package recipes): Done,
// Err, Context, Token and Node, and Resign to give it up. Run's work and a
// Selector's callback run under the term's Context (TermFromContext gives
// the term back), which is canceled when leadership is lost: under the
// default loss policy at the first suspension of the connection, before the
// server can expire the session and let another participant lead. The
// participant's node is deleted only after the work has returned, so the
// next leader's work never starts while this one still runs, unless the
// session really expires (then the server deletes the node): fence the
// guarded resource with the term's token where that matters.
//
// # One rule for Run and Selector
//
//   - A term ends when the work returns (nil or an error), panics, is
//     resigned, or when leadership is lost; a panic is recovered, logged,
//     and becomes an error matching ErrPanicked.
//   - After a term, Run (and a Selector with WithRequeue(true)) campaigns
//     again: at once after a term of a second or more, after a pause growing
//     from 100 ms to 30 s after shorter ones, so failing work does not spin.
//   - An error of the work never stops the campaign; it is logged at error
//     level. Run returns only when its ctx ends, when the session is closed,
//     when ZooKeeper refuses the election for good (zk.ErrNoAuth), or, with
//     WithRequeue(false), after its single term.
//
// # Znodes
//
//	<path>/_c_<uuid>-latch-<seq>   EPHEMERAL_SEQUENTIAL   Run, NewLatch (Curator LeaderLatch)
//	<path>/_c_<uuid>-lock-<seq>    EPHEMERAL_SEQUENTIAL   NewSelector (Curator LeaderSelector)
//
// Node data is the participant id (WithID). The election directory is
// created on demand as a container node. The first node leads, and only if
// its owner is its participant's current session (a node left from an
// earlier session of the same process never makes it leader, unlike in
// Curator before 5.7). Latch and Run exclude each other and Curator's
// LeaderLatch; a Selector excludes Selectors, Curator's LeaderSelector and
// the fair locks of package mutex (the same layout): do not mix the latch and
// lock layouts on one path.
//
// # Costs
//
// A waiting participant sets one data watch, on the node just before its
// own, so a failover wakes one participant. Observers watch the election's
// children; while the path does not exist they poll it (from 50 ms, backing
// off to a second) rather than leave an exists-watch on the server.
//
// # Cancellation and Close
//
// ctx bounds every blocking call. Close ends a live term (after the
// Selector's callback has returned), deletes the participant's node and
// returns after every goroutine it started has exited.
//
// The design notes (docs/design.md in the repository) give the rules of the
// loss policies and of requeueing in detail.
package leader
