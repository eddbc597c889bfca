// Package session owns a process's ZooKeeper session: one go-zookeeper
// connection, kept alive across disconnects, whose state every recipe of
// this module (mutex, rwlock, semaphore, leader) follows to tell its holders
// the moment a lease stops being safe.
//
//	sess, err := session.Connect(ctx, []string{"zk1:2181", "zk2:2181"},
//		session.WithNamespace("/myapp"))
//	if err != nil {
//		return err
//	}
//	defer sess.Close()
//
// Connect once per process and share the Session between every recipe.
// Connect is bounded by its ctx and by a connect timeout (15 s by default);
// a malformed server list fails at once. Servers are names, looked up again
// at every pass over them: a server that comes back on a new address under
// its name (a Kubernetes pod) is reached again, a name that does not
// resolve is skipped, and the members a 3.5+ ensemble announces are
// followed through reconfigurations (docs/kubernetes.md).
//
// # States
//
// A Session reports Curator's connection states to every Subscription, in
// order, without ever blocking:
//
//   - Connected: the first session is up.
//   - Suspended: the connection is down. The session may still be alive,
//     and a reconnection in time keeps it.
//   - Reconnected: the connection is back, to the same session or, after
//     Lost, to a new one.
//   - Lost: the session is gone, and the server deletes (or has deleted) its
//     ephemeral nodes. The Session declares it on the server's word, when
//     the session id changes, and by its own timer once the connection has
//     been down for the session timeout: go-zookeeper learns of an expiry only
//     when it reconnects, which during a long partition is never.
//   - Closed: Close was called.
//
// # What ends a lease
//
// The loss policy (WithLossPolicy) says when the leases and terms of the
// recipes on this Session end. Standard, the default, ends them at a
// deadline, two thirds of the session timeout T after the send time of the
// newest request a server answered, if the connection is down then: the
// server expires a session no sooner than T after it received that request,
// so the holder has T/3 to stop before anyone else can acquire, and a
// disconnect mended in time (a connection reset, a rolling restart) ends
// nothing. Behind a follower the margin is weaker: the leader hears of the
// session only through the follower's reports, so a follower that dies
// while no other member answers, or one cut off from its leader, can leave
// a lease running past the session's expiry (docs/design.md derives by how
// much). EndAtDisconnect, which ends leases at the first disconnect, keeps a
// margin there for a large enough T, at the price of ending them at every
// rolling restart. SessionOnly
// ends them only at Lost: a holder rides out disconnects, and accepts that
// it may overlap with the next holder when the session expires while it is
// cut off. The lease's error says which: ErrSuspended, ErrLost, ErrClosed.
// Fence the guarded resource with the lease's token where two holders must
// never write.
//
// # Guarantees
//
//   - Every blocking call of the module takes a ctx, the only bound of the
//     call: it returns within ctx plus a few milliseconds whatever the
//     network does (Connect: at most a second more, in a rare race inside
//     go-zookeeper's Close), and what a late reply creates is deleted
//     afterwards.
//   - A request go-zookeeper replays on a new session after an expiry is
//     detected and undone; nothing is retried across a session loss.
//   - A node that must go (a released lock, an abandoned waiter) is deleted
//     as soon as the connection allows, across disconnects.
//   - Close returns after every goroutine the Session started has exited.
//
// # Security
//
// WithTLS connects to the servers' secure client ports; WithDigestAuth and
// WithAuth add credentials, sent again on every connection; WithACL sets the
// ACL of every node the recipes create. ZooKeeper checks a create and a
// delete against the parent's ACL: the recipe directory's ACL decides who may
// queue and who may delete a holder's node. A request ZooKeeper refuses for
// good (zk.ErrNoAuth) fails at once, naming the node whose ACL refused. SASL
// is not supported (go-zookeeper has none).
//
// # Costs
//
// A Session runs a state goroutine, a delete queue, a goroutine that sets
// the watches of held leases again after a reconnection, one that follows
// the ensemble's members (one read of /zookeeper/config per connection to a
// new server; a watch while it follows them), one goroutine per
// Subscription and per request in flight (up to four stay parked for
// reuse), plus go-zookeeper's own. It logs to the zap logger of WithLogger or the
// slog logger of WithSlog (silent by default): transitions at info
// (Suspended at warn), failures no caller sees at error, per-request and
// per-lease details at debug; nothing per lock cycle at info or above.
//
// # Observing
//
// WithHooks sets functions that the Session and every recipe on it call:
// each state transition, each request, each retry, each acquire and each
// lease's end (see Hooks). With none set they cost a nil check. The module
// github.com/zkrecipes/zkrecipes/session/zkotel turns them into
// OpenTelemetry metrics and spans.
//
// The design notes (docs/design.md in the repository) derive the loss timer,
// the handshake bound, the wire-level bookkeeping and the go-zookeeper
// hazards these rest on.
package session
