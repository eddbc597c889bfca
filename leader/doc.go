// Package leader elects one leader among the processes that take part in an
// election on a ZooKeeper path, with the node layout of Apache Curator 5.x so
// that Go and Java (Curator) participants can share an election.
//
// # Which type to use
//
// Run makes a background worker highly available in a few lines: it
// campaigns, calls work under a context that is canceled when leadership is
// lost, gives leadership up when work returns, and campaigns again, until ctx
// ends:
//
//	err := leader.Run(ctx, sess, "/app/scheduler", func(ctx context.Context) error {
//		return scheduler.Run(ctx) // returns once ctx is done: leadership lost, or shutting down
//	})
//
// Latch (Curator's LeaderLatch) keeps a participant in the election until
// Close; ask IsLeader, block in Await, or follow Changes. Selector (Curator's
// LeaderSelector) calls a function while this participant leads, optionally
// campaigning again after it returns. Participants, Leader and Observe let
// processes that do not campaign see who leads.
//
// # Work: one rule for Run and Selector
//
// Run's work and a Selector's callback follow one rule, meant to keep a
// worker highly available:
//
//   - A term ends when the work returns (nil or an error), panics, is
//     resigned (Term.Resign from the work, Selector.Resign from outside), or
//     when leadership is lost. The work's context is canceled when the term
//     ends other than by its return.
//   - The participant's node is deleted only after the work has returned, so
//     the next leader's work does not start before (unless the session really
//     expires; see Terms).
//   - Then, if the participant requeues (Run: by default; Selector: with
//     WithRequeue(true), as Curator's autoRequeue), it campaigns again: at
//     once after a term that lasted at least a second; after a pause after a
//     shorter one, 100 ms after the first short term, doubling after each
//     further one up to 30 s, reset by a term of a second or more. So work
//     that fails, returns or panics at once does not spin through terms, and
//     another participant can lead during the pause.
//   - An error of the work never stops the campaign: it is logged at error
//     level (unless it only reports the end of the term, such as the
//     context's error after a loss). A panic is recovered, logged with its
//     stack at error level, and handled as the work returning an error
//     matching ErrPanicked; the process does not crash.
//   - Run returns only when its ctx ends (an error matching ctx's, once the
//     work has returned), the session is closed, ZooKeeper refuses the
//     election for good (zk.ErrNoAuth, ...; see below), or, with
//     WithRequeue(false), after its single term, with the work's error (nil
//     if none) or the cause of the loss. A Selector stops only at Close or
//     for the same reasons as Run (see Selector.Err).
//
// Resign gives leadership up without leaving for good, as etcd's Resign:
// Latch.Resign and Selector.Resign end the current term and delete the node
// (a Selector's only after its callback has returned), Term.Resign does the
// same from within the work without waiting. A Latch enters the election
// again at once, at the back; Run and a Selector campaign again as after any
// other term. IsLeader (Latch, Selector; Curator's hasLeadership) says
// without I/O whether this participant leads now.
//
// # Terms
//
// Every stretch of leadership is a *Term, the leader's counterpart of a lock
// lease: Done is closed when leadership ends for any reason, Err says why,
// Context is canceled with that cause (guarded work can run under it), and
// Token is a fencing token (the czxid of the participant's node, which grows
// across the whole ensemble). Done closes before this participant's node is
// deleted, so when a leader gives leadership up (Close, Resign, or its work
// returned) its term has ended before any other participant can lead. Run and a
// Selector keep the node of a term that ended (a suspension, a lost session)
// until its work or callback has returned, so the next leader's work never
// starts while the previous one is still stopping; only a session that
// really expires takes the node earlier (the server deletes it).
//
// Term.Err says why a term ended and is kept up to date: a term that ended
// at a suspension (session.ErrSuspended: the session may still be alive)
// matches session.ErrLost as well once the session is known lost (its node
// is gone, or goes, with it). The cause of the term's Context is the first
// reason and does not change.
//
// # Algorithm and znodes (a wire contract)
//
// Each participant creates one EPHEMERAL_SEQUENTIAL node under the election
// path, named as Curator names protected nodes:
//
//	<path>/_c_<uuid>-latch-<seq>   Latch, Run        (Curator LeaderLatch)
//	<path>/_c_<uuid>-lock-<seq>    Selector          (Curator LeaderSelector: an InterProcessMutex)
//
// The node's data is the participant id in UTF-8 (WithID; by default the local
// IP address as text, as in Curator; at most 512 KiB, no NUL). Parents are created as container nodes.
// Children are sorted by the sequence after the last marker; children that
// match no marker are ignored. The participant whose node is first leads; each
// other participant watches only the node just before its own (a data watch),
// so a change wakes one participant, not all of them. A participant leads only
// when its node is first and the node's ephemeralOwner is its current
// ZooKeeper session: a node left over from an earlier session of the same
// process (Curator's double-leader bug CURATOR-696) or created by a request
// that ran on a newer session never makes it leader. The shared engine
// (package recipes) does the create with ghost-node recovery, the sorting,
// the watch and the cleanup.
//
// Observers (Observe) are not contenders: they watch the children of the
// election path and read the first node's data. They never create the path;
// while it does not exist they poll for it (every 50 ms at first, backing off
// to once a second) rather than set an exists-watch, which would stay
// registered on the server after the observer has gone.
//
// # Loss policy
//
// The session's loss policy decides when a leader stops leading:
//
//   - Standard (default): the term ends at Suspended, as soon as the
//     connection goes down. After about two thirds of the session timeout
//     without a word from the server the client suspends, while the server
//     expires the session only after the full timeout; so the old leader has
//     stopped before its node can disappear and another participant can
//     lead. When the connection is back with the same session, the
//     participant deletes its node (Run and a Selector only once the work or
//     callback has returned) and enters the election again at the back, as
//     Curator's LeaderLatch does (another participant may lead meanwhile).
//   - SessionOnly: the term survives short disconnects and ends only when the
//     session is lost, which the session declares by a local timer one session
//     timeout after it last heard from the server, or when the server says
//     the session expired. The server may expire the session one timeout after
//     it last heard from the client, which can be a round trip earlier: in
//     that window, and for as long as the client process is frozen or starved
//     of CPU, the old leader may still believe it leads while another
//     participant already does. Use it only when a blip-free leader is worth
//     that risk, and fence the guarded resource with Term.Token.
//
// Both policies rely on the client's timers: a process frozen (or starved of
// CPU) for longer than the margin can still overlap with the next leader, so
// a resource that must never see two leaders should also check Term.Token.
//
// In both cases a term also ends when a third party deletes the node (then
// another participant may lead before this one has noticed) and when the
// session is closed. After a lost session a Latch, a Selector that is queued
// and Run enter the election again with the new session.
//
// # Errors while campaigning
//
// A participant enters the election again after every failure that a new
// attempt can cure: a disconnect, a lost session, a transient error. It stops
// only when the session is closed or ZooKeeper refuses it for good: the
// election path's ACL does not admit the session's credentials (zk.ErrNoAuth,
// zk.ErrAuthFailed), the request is invalid (zk.ErrInvalidACL,
// zk.ErrBadArguments, zk.ErrInvalidFlags, zk.ErrInvalidPath, an ephemeral
// election path: zk.ErrNoChildrenForEphemerals), or a layer below reports a
// programming error (recipes.ErrBadDriver, recipes.ErrBadPath, ...). Then
// Run returns the error, a Latch's Await and Err return it and its Changes
// channels are closed, and a Selector closes Done and reports it from Err and
// Requeue. The error names the election path and wraps the cause, so
// errors.Is(err, zk.ErrNoAuth) works.
//
// # ACLs
//
// Every node an election creates (the election directory and its parents,
// created as container nodes, and the participants' latch and lock nodes)
// gets the session's ACL (session.WithACL; default open to all). With a
// creator-only ACL (digest credentials and zk.AuthACL) on the election
// directory, a participant without the credentials cannot enter, nor delete
// the leader's node (ZooKeeper checks a delete against the parent's ACL):
// it stops at once as described above, with one create, and its error names
// the directory whose ACL refused (a *session.OpError).
//
// # Concurrency and cleanup
//
// All exported types are safe for concurrent use. Close is idempotent, ends a
// live term, deletes the participant's node (a guaranteed delete when the
// connection is down) and returns after every goroutine it started has
// exited. A Selector's Close and Run wait for the callback to return before
// the node is deleted: two leaders are worse than a slow shutdown.
package leader
