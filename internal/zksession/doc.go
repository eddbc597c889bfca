// Package session owns the one *zk.Conn of a process (or of a tenant) and
// turns go-zookeeper's late and lossy view of the connection into Curator's
// connection states, session epochs and lease contexts that recipes can trust.
//
// # States
//
// Connect returns once the first ZooKeeper session exists. From then on the
// Session moves between these states; every transition is delivered, in
// order, to every Subscription:
//
//	Connect --(first session)--> Connected
//	                                 |
//	                                 | connection down
//	                                 v
//	    +----------------------> Suspended --(same session back)--> Reconnected
//	    |                            |                                ^    |
//	    |                            | expired, session id changed,   |    |
//	    |                            | or down for the session        |    |
//	    |                            | timeout (local timer)          |    |
//	    |                            v                                |    |
//	    |                          Lost ---(a session, new Epoch)-----+    |
//	    |                                                                  |
//	    +-------------------------(connection down)------------------------+
//
//	any state --(Close)--> Closed (final)
//
// (When go-zookeeper comes back from Suspended with a new session id before
// the local timer fired, the Session reports Lost and Reconnected at once.)
//
//   - Connected: the first session is up.
//   - Suspended: the connection is down. The session may still be alive, but
//     the server may expire it at any moment: it does so one session timeout
//     after it last heard from us, and go-zookeeper notices the silence only
//     after ⅔ of the timeout. The Session also gives a connection up (and
//     suspends) when ⅔ of the timeout have passed since it sent the newest
//     request the server has answered: an answer read now may be to a request
//     sent long before (a slow or congested network), and only the send time
//     bounds when the server last heard from us. go-zookeeper pings every
//     third of the timeout, so a connection whose answers come back a third
//     of the timeout or more after their requests is given up; otherwise a
//     frozen member behind such a connection could expire the session while
//     the delayed answers still made it look alive, with leases held. So the
//     round trip must stay under a third of the session timeout (under a
//     sixth right after a connect, until the first ping is answered): on a
//     network with round trips of a second, use a session timeout of six
//     seconds or more.
//   - Reconnected: the connection is back. After Suspended it is the same
//     session and the same Epoch; after Lost it is a new Epoch.
//   - Lost: the session is over. Declared on go-zookeeper's StateExpired, when
//     the session id changes, and by a local timer when the connection has
//     been down for the negotiated session timeout, counted from when the
//     server was last heard from minus a small margin (a twentieth of the
//     timeout, at most 100 ms: the server may have last heard from us one
//     network delay before we last heard from it), or from the send time of
//     the newest request it answered if that is earlier: go-zookeeper learns of
//     an expiry only when it reconnects, which during a long partition is
//     never. After Lost, go-zookeeper opens a new session by itself when it
//     can, reported as Reconnected.
//   - ReadOnly: reserved; go-zookeeper v1.0.4 never asks for read-only mode.
//   - Closed: Close was called.
//
// # Epochs
//
// An Epoch is one ZooKeeper session as this Session saw it; a new one begins
// at Connected and at every Reconnected after Lost. Recipes record the epoch
// when they create an ephemeral node and bind later work on it to that epoch
// (Toolkit: Retry, CreateEphemeral, GuaranteedDelete): nothing runs across a session
// loss. If the local timer declared Lost and the SAME session id comes back
// (the server had not expired it yet), the next Reconnected still begins a
// new Epoch: the old epoch stays over, because its holders were already told
// they lost. The old epoch's ephemeral nodes then still exist, owned by the
// same session id; recipes must not adopt them and should delete them
// (GuaranteedDelete does, since it is keyed by session id, not by epoch).
// If a new session id comes instead, the old session may still live on the
// server for a while (a member can answer "expired" before the ensemble has
// expired the session, and a leader election restarts every session's
// timeout): GuaranteedDelete then deletes the old session's node from the new
// session while the node is still the old session's.
//
// go-zookeeper may send a request queued during a partition on the NEW
// session after the old one expired, where it succeeds. CreateEphemeral
// detects this (the node's ephemeralOwner is not the epoch's session) and
// deletes the node; its caller gets ErrSessionChanged, or ErrLost if the epoch
// ended while it waited (the node is then deleted in the background).
//
// # What a lock holder should do
//
// Recipes take Toolkit.LeaseContext when they acquire and end the lease when it is
// canceled; context.Cause says why. Under the two loss policies:
//
//	state        Standard (default)                 SessionOnly
//	Connected    holding                            holding
//	Suspended    lease ends (ErrSuspended): stop    still holding; the session
//	             guarded work now, before the       may expire while we are cut
//	             server can expire the session      off, so another process may
//	             and let another process in         acquire before we learn it
//	Reconnected  leases taken earlier stay ended;   same session: still holding;
//	             acquire again                      new session: leases ended
//	Lost         lease ends (ErrLost), if not yet   lease ends (ErrLost)
//	Closed       lease ends (ErrClosed)             lease ends (ErrClosed)
//
// Toolkit.WaitLease returns a connected epoch together with its lease context, taken
// at the same instant; recipes take it before they create their node.
//
// # The recipe authors' toolkit
//
// Session.Toolkit holds what recipe authors need and everyday users do not;
// every operation there is bound to an epoch and to the caller's ctx:
//
//   - Retry(ctx, ep, op) waits for the connection on ep before each attempt,
//     retries connection-level errors with backoff, and stops with ErrLost
//     once ep is over: nothing is retried across a session loss. An op that
//     succeeded although the connection has moved to another session (a
//     request go-zookeeper re-sent on a new session) is reported with
//     ErrSessionChanged: writes must be conditional to be safe there.
//   - Call (a function: methods cannot be generic) runs one request within
//     ctx and hands a late result to a cleanup function.
//   - CreateEphemeral(ctx, ep, ...) creates an ephemeral node and verifies its
//     ephemeralOwner; a create that ran on another session, or finished after
//     its caller gave up, is deleted again.
//   - GuaranteedDelete(ep, path, version), GuaranteedDeleteIfData and
//     GuaranteedSweep delete in the background, across disconnects and
//     session changes (a delete for an old session only while the node is
//     still that session's).
//   - GetW and ChildrenW share one watch per node, however many callers wait
//     on it or gave up waiting.
//   - LeaseContext and WaitLease give the lease context of the loss policy.
//
// ctx is the only bound of every blocking call: go-zookeeper has no
// per-request context, so each request runs on a goroutine of the Session
// and the caller stops waiting for it when ctx ends; Close waits for those
// goroutines.
//
// # Namespace, ACL, credentials
//
// WithNamespace sets a chroot: Path("/x") returns namespace+"/x", and every
// ZooKeeper call, EnsureContainers included, uses such full paths. EnsureContainers creates the
// namespace's own nodes as persistent nodes (a container namespace root
// could be reaped between uses, which is harmless but noisy) and every node
// below it as a container node, with the ACL given by WithACL (default
// zk.WorldACL(zk.PermAll)). Credentials given with WithDigestAuth or WithAuth
// are added when the first session is established; go-zookeeper sends them
// again on every connection, including those that open a new session.
//
// Every node the Session and the recipes create gets that ACL: namespace
// nodes, containers, ephemeral nodes, lock, lease, latch and count nodes. To
// admit only sessions with the same credentials, pair WithDigestAuth(user,
// password) with WithACL(zk.AuthACL(zk.PermAll)) (or zk.DigestACL(zk.PermAll,
// user, password)). ZooKeeper checks a create and a delete against the
// parent's ACL, a read, a watch or a write against the node's own. A request
// it refuses (zk.ErrNoAuth, zk.ErrInvalidACL, ...) is permanent: Retry does
// not retry it, and the Session's calls and the recipes fail at once with an
// *OpError that names the request and the node whose ACL refused
// (OpError.ACLPath), which errors.As finds and errors.Is(err, zk.ErrNoAuth)
// matches.
//
// SASL (Kerberos) is not supported: go-zookeeper v1.0.4, the client below
// this package, has no SASL. Credentials are the schemes of AddAuth: digest
// (WithDigestAuth) or any other scheme the server has an authentication
// provider for (WithAuth).
//
// # TLS
//
// WithTLS(cfg) connects over TLS to the servers' secure client ports
// (ZooKeeper's secureClientPort, served by NettyServerCnxnFactory): each
// connection is dialed with the dialer (WithDialer's or the default), then a
// TLS handshake runs on it, bounded by go-zookeeper's dial timeout (one
// second). The session sees the decrypted stream, so everything above works
// as over plaintext. cfg is cloned, never modified; an empty ServerName is
// filled in with the host of each server's address. ZooKeeper requires a
// client certificate by default (ssl.clientAuth=need): give it in
// cfg.Certificates.
//
//	pool := x509.NewCertPool()
//	pool.AppendCertsFromPEM(caPEM)
//	cert, err := tls.LoadX509KeyPair("client.pem", "client-key.pem")
//	...
//	s, err := session.Connect(ctx, []string{"zk1:2281", "zk2:2281"},
//		session.WithTLS(&tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}}))
//
// A failed handshake is a failed dial to go-zookeeper, which tries the next
// server and so on until Connect's ctx ends: a wrong CA, a plaintext port or
// a server that refuses our certificate makes Connect fail at ctx's end,
// with an error naming the last failure ("TLS handshake with ...: x509:
// certificate signed by unknown authority"). A client without WithTLS on a
// TLS-only port gets no answer at all (the server closes the connection);
// Connect's error says so and suggests WithTLS. zktest.WithTLS starts servers
// that serve TLS, with a throwaway CA, for tests.
//
// # Limits inherited from go-zookeeper
//
//   - A request in flight cannot be interrupted: the caller returns at its
//     ctx's end, while go-zookeeper fails the request itself only when the
//     connection drops (after ⅔ of the session timeout of silence). What such
//     a late request creates is cleaned up (see Call).
//   - With a single server address go-zookeeper pauses one second before each
//     reconnect, so with session timeouts under about 3 s a short cut can
//     outlast the local timer and end in Lost.
//   - Closing while the connection is up but the server has gone silent
//     takes about a second (zk.Conn.Close waits that long for the reply to its
//     close request); with the connection known down it is immediate.
//
// # A server that accepts but does not answer
//
// go-zookeeper waits up to 10 × ⅔ of the session timeout for a server to
// answer the ZooKeeper handshake, so one member that accepts connections but
// never answers (a frozen process, a stalled machine) would keep the client
// from the healthy members for several session timeouts, long enough to
// lose the session and then to have no connection at all. The session's
// dialer wrapper cuts that wait to the session timeout divided by the number
// of servers, as the Java client bounds its connect, but to no less than a
// second (or the whole timeout, if that is shorter); go-zookeeper then fails
// the handshake and dials the next server. With two servers and a 4 s
// timeout, a reconnect that meets the silent one first is connected through
// the other in about 3 s (2 s of handshake, go-zookeeper's 1 s pause), where
// it took about 27 s. A server that answers handshakes more slowly than the
// bound is given up on, as by the Java client.
//
// # The last zxid
//
// The session, not go-zookeeper, keeps the zxid of the last reply it
// received: go-zookeeper v1.0.4 writes its copy from its receive goroutine
// while another goroutine reads it to re-set the watches after a reconnect,
// without synchronisation (a data race that -race reports). The dialer
// wrapper takes the zxid out of each reply header, writes it into each
// ConnectRequest (a server that is behind it refuses the connection, so
// reads never go back in time across servers) and writes into the
// SetWatches requests the last zxid seen before the connection, as the Java
// client does: a watched node changed while the client was away fires at the
// reconnect, one left alone does not.
//
// # Goroutines
//
// A Session runs a state goroutine, a guaranteed-delete goroutine, one
// goroutine per Subscription, and one worker per request in flight, plus
// go-zookeeper's own. A worker whose request is done stays parked for the
// next one (at most 4 per Session; more exit), so that a request does not
// start a goroutine and grow its stack each time. Close returns after all of
// them have exited. The event
// callback only records the event and wakes the state goroutine, so it never
// blocks go-zookeeper. Logging goes to the injected zap logger (nop by
// default); go-zookeeper's own log lines go to it at debug level.
package zksession
