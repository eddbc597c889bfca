// Package zksession is the implementation of package session: it owns one
// go-zookeeper connection and turns its late and lossy view of the
// connection into Curator's states (Connected, Suspended, Reconnected, Lost,
// Closed), session epochs and lease contexts that recipes can trust.
// Package session is a thin facade over it for users; the recipe engine and
// the recipe packages use it directly (Of returns the Session behind a
// *session.Session).
//
// # What recipes get here
//
//   - Epochs: an Epoch is one ZooKeeper session as this Session saw it; a new
//     one begins at Connected and at every Reconnected after Lost. Recipes
//     bind the work on an ephemeral node to the epoch it was created under,
//     so nothing runs across a session loss.
//   - LeaseContext and WaitLease: the context of a lease taken now, canceled
//     as the loss policy says (under Standard at the lease deadline of a
//     connection still down, under EndAtDisconnect at Suspended, under
//     SessionOnly at Lost; at Lost and Close under all), with the reason as
//     its cause.
//   - Retry: runs a request within ctx and the epoch, retrying connection
//     errors with backoff, and reports a request that go-zookeeper replayed
//     on a new session (ErrSessionChanged).
//   - Call and Start: one request on a goroutine of the Session, so that ctx
//     bounds the caller whatever the network does; a late result goes to a
//     cleanup function.
//   - SendOnce, RetryWrite and RetryWriteAcrossSessions: writes that wait
//     for the connection before they are sent and say when their outcome is
//     unknown (ErrUnknownOutcome: sent, answer lost) rather than not sent.
//   - CreateEphemeral: a create checked against its epoch's session and
//     undone when it ran on another.
//   - GuaranteedDelete, GuaranteedDeleteIfData, GuaranteedDeleteOwned,
//     GuaranteedSweep: deletes that outlive their caller and retry across
//     disconnects.
//   - GetW and ChildrenW: watches shared per node, since go-zookeeper cannot
//     remove one.
//   - SubscribeTree with GetServerW, ChildrenServerW and ExistsServerW: the
//     node events below a path through one callback, for watches that only
//     the server holds (a cache of a large tree).
//   - CreatedZxid: the czxid of a create, read off the wire from its reply.
//
// # The files
//
//	session.go    Connect, the state goroutine, the local loss timer, Close
//	wire.go       the dialer wrapper: TLS, the handshake bound, the reply zxids, answer lag
//	hosts.go      the host provider: servers are names, resolved at every pass
//	tracker.go    follows the members the ensemble announces (/zookeeper/config)
//	zkversion.go  the go-zookeeper versions the wire layer was verified with
//	plumbing.go   the methods above, documented; retry.go, call.go, workers.go,
//	              ephemeral.go, delete.go and watch.go implement them
//	outcome.go    writes that tell "sent, answer lost" from "not sent"
//	link.go       Of: the Session behind a *session.Session
//	nodesub.go    node subscriptions and WatchNode; rearm.go sets WatchNode's
//	              server-only watches again after a reconnect
//	treesub.go    tree subscriptions and the server-only reads they follow
//	subscribe.go, state.go, epoch.go, options.go, path.go, refused.go,
//	errors.go, logger.go   the rest
//
// # Goroutines
//
// A Session runs a state goroutine, a guaranteed-delete goroutine, a re-arm
// goroutine (with up to 32 request goroutines while it sets watches again
// after a reconnect), the ensemble tracker (unless WithEnsembleTracking is
// off), one goroutine per Subscription and one worker per
// request in flight (up to four stay parked for the next request), plus
// go-zookeeper's own (the host provider looks names up on goroutines it
// joins before it returns to go-zookeeper). Close returns after all of them have exited. The
// event callback only records the event and wakes the state goroutine, so
// it never blocks go-zookeeper.
//
// docs/design.md derives the loss timer and its margin, the answer-lag
// bound, the handshake bound, the wire layer (and why it refuses other
// go-zookeeper versions), and the go-zookeeper hazards each one answers.
package zksession
