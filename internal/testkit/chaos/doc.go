// Package chaos is the chaos run: every recipe of the library used
// at once by many sessions on a 3-member ZooKeeper ensemble while faults are
// injected at random, and a check of the safety invariants from what the
// holders and the server saw, not from what the library believes.
//
// It is run by the program internal/testkit/chaos/cmd/chaos (`make chaos ROUNDS=1000`)
// and, in short form (50 rounds, 8 sessions, shorter rounds), by TestChaos in
// the test suite. Run returns a Report; its String is what both print.
//
// # The run
//
// zktest starts a 3-member ensemble (tickTime 200 ms). Each of Config.Sessions
// sessions (default 12) reaches member i by the name zk-i.chaos.test, which a
// zktest.Resolver (session.WithResolver) maps to the member's address, and its
// dialer sends every connection through a zktest proxy of its own in front of
// that member, so that its faults can be injected on its own connection; even
// sessions use the standard loss policy, odd ones session-only. The
// observer's raw connections dial each member where it serves now. Each session
// runs one worker per recipe, all on their own path under Config.Root:
//
//   - mutex.New (fair), mutex.NewReentrant (which also re-enters on the holding
//     goroutine a third of the time) and mutex.NewNonFair;
//   - rwlock.New: two thirds reads, one third writes, a quarter of the writes
//     downgraded to a read with WriteLease.Downgrade;
//   - semaphore.New with a maximum of 3 (SemaphoreMax);
//   - leader.Run, whose work lasts 1 to 1.6 s (a term of a second or more does
//     not make Run pause before campaigning again);
//   - a cache.NewChildren of Root+"-cache" and a cache.NewNode of
//     Root+"-cache-flag", which the observer changes (creates, writes,
//     deletes, a delete and a create at once, every 10 to 60 ms from an RNG
//     of its own) while each round's fault is held;
//   - a discovery.Register of one Dynamic instance ("s<i>") of the service
//     "chaos" under Root+"-services", and a discovery.Cache of that service;
//     while each fault is held a session's instance is updated
//     (Registration.Update, with a ctx of 0.2 to 2 session timeouts) every
//     50 to 250 ms;
//   - a cache.NewTree of Root+"-tree" (session 1's with WithMaxDepth(2)),
//     under which the observer changes a tree three levels deep while each
//     fault is held: writes (creating missing parents), creates, deletes of
//     leaves, deletes of inner nodes with their children (one at a time,
//     children first, or in one multi), a delete and a create again at once.
//
// A worker acquires with a ctx of 0.2 to 2 session timeouts (so some acquires
// time out while queued), holds for 10 to 150 ms (the leader's work: its
// term), and releases with a 2 s ctx, or notices the loss on the lease's Done
// (and then still calls the release, as a user's defer would: it returns nil,
// and a Reentrant counts the goroutine's hold until it is called).
//
// # Faults
//
// Each round draws one fault from a RNG seeded by Config.Seed, holds it for
// DwellMin to DwellMax, heals it and pauses 0.1 to 0.4 s. Faults that target
// sessions prefer sessions that hold something at the time.
//
//   - cut: the proxies of 1 to 3 sessions close their connections
//     (zktest.Proxy.Cut); the clients reconnect to the same session.
//   - partition past the session timeout: one session's proxies black-hole
//     everything (Partition) until the client has declared its session lost,
//     then heal.
//   - instant kill: zktest.ExpireSession ends one session on the server at
//     once, through the member that serves it (found with `cons`) or, half of
//     the time, through another member (see below why that matters).
//   - ensemble leader kill and restart: SIGKILL of the member that leads,
//     restart after 0.2 to 0.8 s, then wait until every member serves.
//   - member moved to a new address: zktest's Server.Move of a member (the
//     leader a quarter of the time, else one of the three at random), which
//     restarts it with its data on a new loopback address, as a pod that
//     comes back with a new IP; once it serves, each session gets a proxy in
//     front of the new address (the old one is closed) and the member's name
//     resolves there, then wait until every member serves. A session that
//     did not look the name up again would never reach the member again.
//   - member frozen and thawed: SIGSTOP of a member (the leader a quarter of
//     the time, else one of the three at random) for 0.3 s plus up to 1.5
//     session timeouts, then SIGCONT.
//   - swallowed reply (ghost create): one session's next create or multi on
//     the recipe paths goes through, its reply is dropped and the connection
//     closed (Proxy.OnRequest with SwallowReply).
//   - latency spike: 50 ms to half a session timeout added each way on the
//     proxies of 1 to 3 sessions.
//   - third-party delete: the observer deletes a node of a recipe: half of
//     the time the first in line (the holder's), else one picked at random,
//     so that waiters' nodes go too (for the semaphore, one of the lease
//     nodes).
//
// # What is recorded
//
// Every hold is an Interval on the monotonic clock of this process (all
// sessions live in it: one clock): it begins when the acquire returned (when
// the leader's work started) and ends just before the holder's release call,
// or when the holder's goroutine noticed Done (for leader work, its ctx). Both
// ends are on the holder's side of any scheduling delay, so the intervals are
// never shorter than what the holder could act on: a check on them is, if
// anything, stricter than reality. Every bounded call records when its ctx
// ended and when it returned. Every fault records when it was injected and
// healed. The observer, a raw go-zookeeper connection straight to the members
// (no proxy, no session package), watches the semaphore's lease nodes and
// records every snapshot with more than SemaphoreMax of them.
//
// # Invariants and how each is checked
//
//   - Never two holders of a mutex (per path), never two leaders' work at once,
//     never a reader during a write: no two conflicting Intervals of different
//     workers overlap (an Interval of one worker may overlap its own downgrade).
//   - Never more semaphore holders than 3: at no instant do more than 3
//     semaphore Intervals overlap; and on the server, a lease node that a
//     snapshot shows past the first 3 in sequence order was created while 3
//     others existed (sequence order is creation order), so it must never be
//     the node of a hold. Lease nodes past the maximum do appear: the acquirer
//     creates its node and counts in one transaction and deletes it again when
//     the count is over; the report counts them.
//   - Each holder's lease ended before another holder acquired: the same
//     overlap check, which is why the report lists an overlap with both holds
//     (node, session, policy, token, how each ended).
//   - Fencing: the guarded resource is one znode per exclusive recipe under
//     Root+"-guard", written only by a holder, with its lease's Token, as a
//     conditional write on the holder's own session: read data and version,
//     refuse if the stored token is higher than ours, else set with the version
//     read. Checked: ordered by the version the server gave them, accepted
//     writes carry tokens that never go down (no stale write accepted); a write
//     refused while its lease was live belongs to a hold that another acquired
//     during; and every hold's token is higher than that of every conflicting
//     hold that ended before it began (tokens grow).
//   - Guarded commits: every fenced hold but the non-fair lock's also writes
//     its token with its lease's Commit to Root+"-guard/<recipe>+commit", an
//     unconditional setData behind the server's check of the lease's node.
//     Checked as the fenced writes: ordered by version, committed tokens
//     never go down (a stale guarded write never commits). A commit refused
//     with ErrNotHeld while its holder still believed it held is the guard at
//     work, counted, not a violation.
//   - Every call returns within its ctx: each acquire (Lock, RLock, Acquire),
//     release, Downgrade and leader.Run (at the stop) returns at most
//     Config.Tolerance after its ctx ended (and so does each
//     Registration.Update). The default of 100 ms is the
//     library's "ctx plus a few milliseconds" widened for what is outside its
//     control on a shared 2-core machine with three JVMs: the
//     scheduling delay of the returning goroutine, and the recorder's own
//     work. A ctx ends when this process ends it, not at its deadline: the
//     deadline is a runtime timer whose function cancels the ctx, and until
//     it has run no code can see that the ctx has ended. Timers live on the
//     scheduler's Ps; on a busy machine the kernel leaves one P's thread
//     unscheduled for tens of milliseconds or more, and that P's timers
//     wait while the other P, and the canary below, run on (see
//     golang/go#38860 for the same delay from busy goroutines). So each call
//     registers a probe on its ctx (context.AfterFunc) that notes when the
//     ctx ended; the probe's goroutine is readied by the same cancellation as
//     the call's, and the call is judged from then (Call.Late; a call that
//     returned before the probe ran is not late). Beyond that, the whole
//     process is sometimes not scheduled at all for a few hundred
//     milliseconds (a JVM restarting takes both cores): a canary goroutine
//     that asks to be woken every 5 ms records every such stall, and the
//     part of a call's overshoot after its ctx ended that a stall covers is
//     not counted against the call (no goroutine could have returned then).
//     The report gives the raw overshoot of all calls from their deadlines
//     and how many exceeded the tolerance by it, how late the process ended
//     the ctxs of those that overshot, the stalls, and p50, p99 and the
//     maximum per call after both deductions, so a tolerance or a deduction
//     that hides something is visible.
//   - No node left behind by an ended hold while its session lives: after
//     every round the observer reads the node first in line of each recipe
//     (mutexes, read-write lock, leader), with its czxid, which is the token
//     of the hold on it (the non-fair lock's node always has the same path,
//     so nodes are told apart by czxid). A node still first in line more than
//     3 s after the hold on it ended (or after the heal of a fault that hit
//     its session and was under way then: a frozen ensemble leader deletes
//     nothing) blocks every other holder until its session ends: a violation.
//   - Caches converge: at the end of every round, after the heal and the
//     pause, every session's caches match the server (read by the observer
//     after a sync: the same children, data, czxid and mzxid) within 15 s;
//     at the end of the run each cache's events, replayed from nothing, are
//     consistent (Added of a node not held, Updated of the same incarnation
//     with a later write, Removed of the node held, one Initialized) and
//     give its copy.
//   - Registrations stay: at the end of every round, within the same 15 s,
//     every registration whose session is live is on the server (read after
//     a sync), owned by that session and holding the registration's data,
//     no other instance is, and every discovery cache's Instances equal the
//     server's. Throughout the run a raw connection of its own lists the
//     service's children at every change (and at its own reconnections): a
//     registration absent from that list while its session was Connected or
//     Reconnected is an outage (the time that connection was down is
//     deducted), counted in the report; one over 10 s is a violation (a
//     connected client re-creates its node with one request).
//   - Tree caches converge: at the end of every round, within the same
//     15 s, every tree cache matches the server's subtree (read after a
//     sync, down to the cache's maximum depth: paths, data, czxid, mzxid)
//     and skips nothing; at the end of the run each one's events, replayed
//     from nothing, are consistent as above, in tree order (no Added below a
//     node not held, no Removed of a node that still has children), and give
//     its copy.
//   - Nothing left behind: once every session is closed, no node exists below
//     any recipe path (read by the observer, waiting up to 20 s for the
//     server; the service's instances too), and, once the observers are closed too, runtime.NumGoroutine
//     is back to its value before the observers and sessions started (waiting
//     up to 20 s; the stacks are in the report if not). The test's TestMain
//     adds goleak.
//
// # Why intervals and the server, not the library's state
//
// The library's own view (Held, a lease's Err) is what is under test: a bug
// that makes two holders both believe they hold would make them agree with
// the library. The intervals are what holders acted on, timed by a clock
// outside the library, and the server's nodes are the ground truth the
// recipes are built on; neither can be talked into agreement by the code they
// check.
//
// # Overlaps that are not violations
//
// Some overlaps cannot be prevented by any client, or are accepted by the
// configuration; they are counted apart, with the longest of each kind and a
// few in full, and they are not violations. An overlap of holds A (earlier)
// and B is classified by A, the holder that had not stopped yet:
//
//   - unknowable: instant kill through another member. The kill attaches to
//     A's session on a member that does not serve it; A's serving member
//     learns of the close only when it commits, the same moment the other
//     clients' watches fire, so A's connection closes no earlier than B can
//     acquire. Classified when a kill of A's session through another
//     member began before B acquired and ended after A began.
//   - race: instant kill through the serving member. The member closes A's
//     connection as it deletes A's nodes; under EndAtDisconnect A's client
//     hears of it on the wire only about a round trip before B's can act,
//     and under Standard the close looks like any reset, so A's lease ends
//     at its reconnection (the session is gone) or at its deadline, two
//     thirds of the session timeout after its last answer, whichever is
//     first. The library promises no more (see leader.Term.Done); a real
//     expiry, by contrast, is preceded by the lease deadline or the local
//     loss timer, a margin of a third of the session timeout or more, and
//     an overlap there is a violation. Classified when such a kill of A's
//     session began before B acquired and A learned within a second plus
//     two thirds of the session timeout of B's acquire; and the other way round,
//     when the kill was of B's session, B's node was granted before the kill
//     deleted it, B's acquire returned after A's, and B's lease ended within
//     that bound of its acquire.
//   - unknowable: third-party delete. Someone deleted A's node: the next in
//     line acquires on the deletion, and A learns of it from its own node
//     watch, a notification that races with B's. Classified when the fault
//     deleted A's node before B acquired. Or someone deleted B's node while
//     B waited next in line, before B watched it, and B was granted on its
//     predecessor's deletion notice all the same: the library bounds such a
//     lease (engine.WithNodeWatch: it ends within 100 ms and a round trip
//     of the acquire). Classified when the fault deleted B's node before B
//     acquired and B's hold ended with "node deleted" within a second, or
//     B released it within 100 ms, before its watch was due (a downgrade's
//     read node deleted as it was placed is seen so).
//   - session-only policy window. A's session uses session.SessionOnly, that
//     session ended (A's hold ended with its loss, or it was no longer live
//     when the run stopped: Interval.SessionEnded), and A's hold ended by a
//     loss or a fault that disconnects or expires sessions (every kind but a
//     third-party delete) hit A's session between A's start and B's acquire:
//     that policy keeps a lease through a disconnect until the session is
//     known lost, and documents that the server may expire it (and let B in)
//     first; A may even end its work on its own before it learns (a leader's
//     term that ran out while its session had already been killed). A
//     session that rode the fault out kept A's node, so nothing excuses B
//     then. The fenced resource must still refuse A's late writes; that is
//     checked as for every hold.
//
// Any other overlap is a violation, under either policy. Nothing is set aside
// for the one case the standard policy's deadline does not cover, a follower
// cut off from its leader that keeps answering pings (docs/design.md): the
// proxies sit between clients and members, not between members, so the run
// cannot produce it, and an overlap that looked like it counts.
//
// # Losses and gaps
//
// For every hold that ended by a loss, the report gives the time from the
// injection of the latest fault that hit its session (or its start, if it
// acquired during the fault) to the moment its holder noticed, per kind of
// fault (p50, p99, max); "no fault" counts losses with no fault in the 4
// session timeouts before. It also gives, per recipe, the longest time
// without any holder and the faults around it (a liveness figure, not an
// invariant). It also lists nodes that stayed first in line on the server for
// 5 s or more (read by the observer after every round) without ever being the
// node of a hold: a lock that nobody holds and nobody can take until its
// owner's session ends.
//
// Finally it compares the members: one more raw connection per member, given
// that member's address alone, syncs and lists every recipe path after every
// round. A node that one member shows in three rounds or more over 5 s while
// the other members that answered do not is listed: after a sync a member
// must be at least as recent as the sync, so such a node is a member serving
// a state the ensemble has left (a server-side finding, not the library's).
//
// # Replaying a run
//
// The report prints the seed. The same seed draws the same faults, targets
// and durations, and the same choices in every worker:
//
//	go run ./internal/testkit/chaos/cmd/chaos -rounds 1000 -seed <seed>
//	ZKRECIPES_CHAOS_SEED=<seed> go test -count=1 -run TestChaos ./internal/testkit/chaos/
//
// Timing is not replayed: which session holds what when a fault lands depends
// on the scheduler, so a replay repeats the schedule, not the interleaving.
//
// # Without the race detector
//
// The run is built without -race: the detector slows every goroutine
// several times over, and the run's checks are about time (a call back
// within its ctx, a holder told before the next one acquires), which it would
// turn into noise. The data race go-zookeeper v1.0.4 has on Conn.lastZxid
// does not happen here: the session's wire layer zeroes the zxid of every
// reply, so go-zookeeper never writes that field (docs/design.md, "The wire
// layer"), and the packages' own tests, which run under -race, reconnect
// with watches set (TestWatchesAcrossReconnects).
package chaos
