// Package recipes is the vocabulary that every recipe of this module shares:
// the errors a lease or an acquire can end with, and the participant type
// that Participants, Holder and Leader return. The recipes themselves are in
// packages mutex, rwlock, semaphore and leader, on a session of package
// session.
//
// # Leases
//
// Every successful acquire returns a lease (mutex.Lease, rwlock.Lease,
// semaphore.Lease; a leader's term, leader.Term, is the same idea), and every
// lease has the same methods:
//
//	Done() <-chan struct{}      closed once, when the lease ends for any reason
//	Err() error                 nil while held, then why it ended
//	Context() context.Context   canceled at the end, with Err as its cause
//	Token() int64               a fencing token: the node's czxid, which only grows
//	Node() string               the name of the lease's node
//	Release(ctx) error          give it up (leader.Term: Resign)
//	Commit(ctx, ops...)         write to ZooKeeper only while it holds (rwlock: the write lease)
//
// Run the guarded work under Context, and give Token to the guarded resource
// so that it can refuse a holder that has been replaced. Writes to ZooKeeper
// itself need no token: Commit runs them in one transaction with a check
// that the lease's node still exists, so they commit only while the lease
// holds on the server, and fail with ErrNotHeld otherwise. A Commit whose
// answer was lost fails with ErrUnknownOutcome: it may or may not have
// committed.
//
// # What ends a lease
//
//	recipes.ErrReleased      the holder released it (Release, Resign, a leader's work returned)
//	recipes.ErrNodeDeleted   someone else deleted its node
//	session.ErrSuspended     the connection was down at the lease deadline (Standard) or went down (EndAtDisconnect)
//	session.ErrLost          the session expired, or was declared lost
//	session.ErrClosed        the recipe or the session was closed
//
// Err is kept up to date: a lease that ended at a suspension also matches
// session.ErrLost once its session is known lost; Context's cause stays the
// first reason. Whenever a lease ends other than by its release, its node is
// deleted (or goes with the session), so that a holder that lost never
// blocks the others; a leader's node stays until its work has returned.
//
// # Errors of the calls
//
// A call on a recipe returns an error that names the recipe and its path
// once, then the cause, e.g. `mutex "/locks/billing": busy`. Match causes with
// errors.Is:
//
//	recipes.ErrBusy          a try-acquire would have to wait
//	recipes.ErrNotHeld       a Commit whose lease no longer holds (nothing committed)
//	recipes.ErrUnknownOutcome  a write was sent and its answer was lost: it may or may not have applied
//	recipes.ErrNotOwner      a reentrant lease released from another goroutine
//	session.ErrBadArgument   bad input: nil ctx or session, bad path, bad id or count
//	session.ErrClosed        the recipe or the session is closed
//	session.ErrLost          the session ended while the call waited
//	context.Canceled, context.DeadlineExceeded   ctx ended (the call cleaned up first; a write still waiting for the connection sent nothing)
//	zk.ErrNoAuth and go-zookeeper's other errors  ZooKeeper refused the request
//
// # Options
//
// Every recipe package takes the same options where they apply: WithID (the
// participant id stored in its nodes, by default the local IP address, as
// Curator's), WithLogger, WithNodeWatch (whether a held lease watches its
// own node, so that a third party's delete ends it with ErrNodeDeleted), and
// WithName (the name the session's hooks report, see session.Hooks).
package recipes
