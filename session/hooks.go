package session

import (
	"context"
	"time"

	"github.com/zkrecipes/zkrecipes/internal/zksession"
)

// Hooks observe a Session and every recipe on it, for metrics, traces and
// logs (package zkotel, a module of its own, turns them into OpenTelemetry
// metrics and spans). Set them with WithHooks; every field is optional, and
// a nil field costs nothing.
//
// Hooks run synchronously on the library's goroutines (Request on the one
// that reads the connection), several at once: they must be safe for
// concurrent use, return quickly, not block, and not call into the Session
// or a recipe, except State, which runs on a goroutine of its own and may
// read the Session (PendingDeletes, Watches, SessionTimeout, ...) but not
// close it: Close waits for it. One Hooks value may serve several Sessions.
type Hooks struct {
	// State is called for every state transition of s, in order, from the
	// first Connected (once Connect has returned s) to Closed.
	State func(s *Session, ev Event)
	// Request is called for every ZooKeeper request the session's
	// connection carries, recipes' and Conn's alike, when it is answered
	// or its connection breaks first: op is the request's operation, named
	// as in ZooKeeper's OpCode ("create", "delete", "exists", "getData",
	// "setData", "getChildren2", "multi", "ping", "setWatches", ...), d the
	// time from its write to its answer's read, err the error the server
	// answered (zk.ErrNoNode, ...), nil for success, or
	// zk.ErrConnectionClosed for a request never answered.
	Request func(op string, d time.Duration, err error)
	// Retry is called each time a recipe's request is sent again after a
	// connection error (err).
	Retry func(err error)
	// Acquire is called when a recipe begins to acquire (a lock, a read or
	// write side, a semaphore lease, a leader's campaign); the context it
	// returns is the one the acquire goes on with (for a span), and the
	// function it returns, if not nil, is called once, when the acquire
	// returns. A semaphore's AcquireN(n) is n acquires; a leader's
	// campaign is one, however many attempts it takes. Re-entering a
	// reentrant lock the goroutine holds, and the read lease of a
	// downgrade, are not acquires.
	Acquire func(ctx context.Context, r Recipe) (context.Context, func(AcquireEnd))
	// LeaseEnd is called once for every lease an acquire returned (a
	// leader's term included), as its Done channel closes.
	LeaseEnd func(r Recipe, e LeaseEnd)
}

// Recipe identifies what acquires or holds, for Hooks.Acquire and
// Hooks.LeaseEnd. Kind and Name are meant as metric attributes (few values);
// Path names one lock among many (one per order, say), for traces and logs.
type Recipe struct {
	// Kind is "mutex" (every kind of package mutex), "rwlock.read",
	// "rwlock.write", "semaphore" or "leader".
	Kind string
	// Name is the name the recipe was given with its package's WithName
	// option ("" when none was).
	Name string
	// Path is the recipe's path, as given to its constructor.
	Path string
	// Max is a semaphore's maximum number of leases when it is fixed (0
	// for a SharedCount's and for other kinds).
	Max int
}

// AcquireEnd is how an acquire ended, for the function Hooks.Acquire returns.
type AcquireEnd struct {
	// Err is nil when the acquire returned a lease, else the error it
	// returned (recipes.ErrBusy, ctx's error, session.ErrLost, ...).
	Err error
	// Handoff, for an acquire of a queue (mutex.New and NewReentrant,
	// rwlock, leader) that waited and then held after the deletion notice
	// of the node it waited on, is the time from the last such notice to
	// the grant (for a leader: its part of a failover); 0 otherwise (a
	// NonFair lock and a semaphore have no queue to measure).
	Handoff time.Duration
}

// LeaseEnd is how a lease ended, for Hooks.LeaseEnd.
type LeaseEnd struct {
	// Held is from the acquire's return to the lease's end.
	Held time.Duration
	// Cause is why it ended: the lease's Err at that moment, matching
	// recipes.ErrReleased, recipes.ErrNodeDeleted, ErrSuspended, ErrLost or
	// ErrClosed.
	Cause error
	// Delay, for a lease ended by a suspension or a loss, is the time from
	// the last answer heard from ZooKeeper before the connection broke
	// (when the fault began, as far as the client can tell) to the lease's
	// end; 0 for other causes.
	Delay time.Duration
}

// WithHooks sets the hooks that observe the Session and the recipes on it
// (default: none). A nil State, Request, Retry, Acquire or LeaseEnd is
// skipped.
func WithHooks(h Hooks) Option {
	return func(c *config) error {
		hc := h
		zh := &zksession.Hooks{User: &hc}
		if hc.State != nil {
			zh.State = func(pub any, ev zksession.Event) { hc.State(pub.(*Session), publicEvent(ev)) }
		}
		zh.Request = hc.Request
		zh.Retry = hc.Retry
		return zksession.WithHooks(zh)(c)
	}
}

// PendingDeletes returns how many deletes the Session's guaranteed-delete
// queue holds: nodes of ended leases and failed acquires that wait for the
// connection (or retry). It stays near 0 while the connection is up.
func (s *Session) PendingDeletes() int {
	if s == nil || s.s == nil {
		return 0
	}
	return s.s.PendingDeletes()
}

// Watches returns how many ZooKeeper watches the Session's recipes have set
// and not yet seen fire (one per node and kind, however many waiters share
// it; each cache of package cache counts its own).
func (s *Session) Watches() int {
	if s == nil || s.s == nil {
		return 0
	}
	return s.s.WatchCount() + s.s.NodeSubs() + s.s.TreeWatches()
}
