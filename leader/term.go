package leader

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/internal/engine"
	"github.com/zkrecipes/zkrecipes/recipes"
	"github.com/zkrecipes/zkrecipes/session"
)

// Term is one term of leadership: from the moment this participant's node
// became the first of the election (and was verified to belong to the current
// ZooKeeper session) until leadership ended for any reason. A participant has
// at most one live term at a time; a new term is a new *Term.
//
// A Term is safe for concurrent use. A nil *Term behaves as a term that has
// ended: Done is closed, Err and the cause of Context match session.ErrBadArgument
// (naming the nil term), and the other methods return zero values.
type Term struct {
	ctx      context.Context // canceled when the term ends; carries the term
	cancel   context.CancelCauseFunc
	lease    *engine.Lease
	started  time.Time
	resigned error         // the cause Resign gives (recipes.ErrReleased, naming the path)
	released chan struct{} // closed once the owner has deleted the node (or queued its delete)
}

type termKey struct{}

// newTerm starts a term on lease; resigned is the cause Resign gives it.
func newTerm(lease *engine.Lease, resigned error) *Term {
	t := &Term{lease: lease, started: time.Now(), resigned: resigned, released: make(chan struct{})}
	// The term's context is a child of the lease's: it ends at the same moment
	// the engine ends the lease (its deadline under the standard policy, Lost,
	// node deleted, Closed), and also when this package ends the term first
	// (Close, callback returned) before it deletes the node.
	ctx, cancel := context.WithCancelCause(lease.Context())
	t.ctx = context.WithValue(ctx, termKey{}, t)
	t.cancel = cancel
	lease.ObserveEnd("leader", t)
	return t
}

// end ends the term with cause unless it has already ended.
func (t *Term) end(cause error) { t.cancel(cause) }

// markReleased records that the owner has given the term's node back (or
// queued its deletion): Latch.Resign and Selector.Resign wait for it.
func (t *Term) markReleased() { close(t.released) }

// Resign gives the term up: it ends the term now, with a cause matching
// recipes.ErrReleased, unless it has already ended. It does not wait and does no I/O.
//
// Called by Run's work or a Selector's callback (through TermFromContext), it
// ends the term as if the work had returned: the work's context is canceled,
// and once the work has returned its node is deleted, so another participant
// can lead, and this participant campaigns again or not as after any other
// term (see Run and Selector). On a Latch's term it is Latch.Resign without
// the wait: the latch deletes its node and enters the election again at the
// back. On a nil *Term it does nothing.
func (t *Term) Resign() {
	if t == nil {
		return
	}
	t.end(t.resigned)
}

// Done returns a channel that is closed when the term ends: leadership was
// lost (under the standard loss policy already when the connection is still
// down at the lease deadline, two thirds of the session timeout after the
// newest answered request; under end-at-disconnect at the suspension; under
// session-only when the session is lost), our node was
// deleted by someone else, the holder gave leadership up, or Close was called.
// It is closed before this participant's node is deleted, so no other
// participant can lead before it closes, except when the node disappears
// without warning: a third party deletes it, or the session is ended on the
// server at once (an operator's kill, not an expiry). Through another ensemble
// member such a kill gives this client no warning at all; through its own
// member the server closes the connection as it deletes the node, which to
// this client looks like any reset: under end-at-disconnect it hears of it
// only about a round trip before the others, a lead that a busy machine can
// overtake; under the standard policy only at the lease deadline or when it
// reconnects and learns that the session is gone. The node itself stays until the term's work (Run)
// or callback (Selector) has returned, unless the session really expires:
// then the server deletes the node with the session, and another participant
// may lead while work that is slow to stop still runs.
func (t *Term) Done() <-chan struct{} { return t.Context().Done() }

// Err returns nil while the term lasts, and afterwards why it ended, as an
// error matching:
//   - session.ErrSuspended: the connection was down at the lease deadline
//     (standard policy) or went down (end-at-disconnect); the session may
//     still be alive and this participant's node still there;
//   - session.ErrLost: the session is gone (expired on the server, replaced,
//     or declared lost by the local timer), and the node with it; a term that
//     ended at a suspension matches session.ErrLost too (as well as
//     session.ErrSuspended) once its session is known lost;
//   - session.ErrClosed: the participant or the session was closed (the
//     message says which);
//   - recipes.ErrNodeDeleted: the node was deleted by a third party;
//   - recipes.ErrReleased: the work or callback returned while still leading, or
//     leadership was given up by Resign (Term, Latch or Selector);
//   - ErrPanicked: Run's work or a Selector's callback panicked while still
//     leading (the error carries the panic value);
//   - for Run, the caller's context error.
//
// Err is the up-to-date reason; the cause of Context stays the first one.
func (t *Term) Err() error {
	if t == nil {
		return errNilTerm()
	}
	if t.ctx.Err() == nil {
		return nil
	}
	cause := context.Cause(t.ctx)
	if errors.Is(cause, session.ErrSuspended) && !errors.Is(cause, session.ErrLost) {
		// The lease says whether the session has been lost since.
		if lerr := t.lease.Err(); errors.Is(lerr, session.ErrSuspended) && errors.Is(lerr, session.ErrLost) {
			return lerr
		}
	}
	return cause
}

// Context returns a context that is canceled when the term ends. Work
// guarded by leadership can run under it. Its cause (context.Cause) is the
// first reason the term ended and does not change afterwards; Err is the
// up-to-date reason (session.ErrLost after session.ErrSuspended).
// TermFromContext recovers the term from it and from contexts derived from it.
func (t *Term) Context() context.Context {
	if t == nil {
		return engine.EndedContext(errNilTerm())
	}
	return t.ctx
}

// errNilTerm is the error of a nil *Term.
func errNilTerm() error { return fmt.Errorf("leader: %w: nil term", session.ErrBadArgument) }

// Commit runs ops in one ZooKeeper transaction behind a check that this
// participant's node still exists: the writes commit only while the term
// lasts on the server, whatever this process believes (a leader whose
// session expired while it was cut off cannot overwrite its successor's
// work), and never after the term has ended here. ops are go-zookeeper's
// *zk.CreateRequest, *zk.SetDataRequest, *zk.DeleteRequest and
// *zk.CheckVersionRequest with recipe paths (under the session's namespace);
// a create without an ACL gets the session's. It returns their responses.
//
// While the connection is down, Commit waits within ctx for it to be back
// before it sends anything; the transaction is sent once.
//
// Errors: recipes.ErrNotHeld when the term has ended or the server found its
// node gone (nothing committed; also when the term ends while Commit waits for
// the connection); the error of the first operation ZooKeeper refused
// (zk.ErrBadVersion, ...; nothing committed); session.ErrBadArgument for a bad
// operation; recipes.ErrUnknownOutcome when the transaction was sent and its
// answer was lost (wrapping the connection error, or ctx's error or
// session.ErrClosed when the call ended while it was in flight): it may have
// committed or not, and is not sent again; ctx's error or session.ErrClosed
// when the call ended while it waited for the connection: nothing was sent,
// and the error does not match recipes.ErrUnknownOutcome.
func (t *Term) Commit(ctx context.Context, ops ...any) ([]zk.MultiResponse, error) {
	if t == nil {
		return nil, errNilTerm()
	}
	if err := t.Err(); err != nil {
		p := t.lease.RecipePath()
		return nil, engine.NewError("leader", p, fmt.Errorf("%w: %w", recipes.ErrNotHeld, engine.Within("leader", p, err)))
	}
	return t.lease.CommitWhile(ctx, t, ops...)
}

// Token returns a fencing token for the term: the czxid of this participant's
// node. It grows across the whole ensemble, so a resource that remembers the
// highest token it has seen can refuse a deposed leader's late writes.
func (t *Term) Token() int64 {
	if t == nil {
		return 0
	}
	return t.lease.Token()
}

// Node returns the name of this participant's node, e.g.
// "_c_6f1c…-latch-0000000003".
func (t *Term) Node() string {
	if t == nil {
		return ""
	}
	return t.lease.Node()
}

// Started returns the local time at which the term began.
func (t *Term) Started() time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.started
}

// TermFromContext returns the term whose Context is ctx or an ancestor of
// ctx, such as the context given to a Selector callback or to Run's work. A
// nil ctx holds no term.
func TermFromContext(ctx context.Context) (*Term, bool) {
	if ctx == nil {
		return nil, false
	}
	t, ok := ctx.Value(termKey{}).(*Term)
	return t, ok
}
