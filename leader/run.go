package leader

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/zkrecipes/zkrecipes/internal/engine"
	"github.com/zkrecipes/zkrecipes/recipes"
	"github.com/zkrecipes/zkrecipes/session"
)

// Run makes work highly available: it campaigns for leadership of the election
// at path (Curator's LeaderLatch layout, so it can share an election with
// Latches and with Java LeaderLatch participants), calls work while this
// participant leads, and gives leadership up when work returns. It is meant
// for a background worker that should run on exactly one replica at a time,
// for as long as the process lives: Run keeps campaigning until ctx ends.
//
// A term ends when work returns (nil or an error), when work panics, when
// the term is resigned (Term.Resign, through TermFromContext), or when
// leadership is lost. work's ctx is canceled at once when leadership is lost
// (under the standard loss policy already at the lease deadline of a
// connection still down, before another participant can lead), when the term
// is resigned, or when
// ctx ends. The participant's node is deleted only after work has returned,
// even when the connection came back long before, so no other participant's
// work starts before this one has returned, and work should return promptly
// once its ctx is done. The one exception is a session that really expires
// (a partition or a freeze past the session timeout): the server deletes the
// node with the session, and another participant may lead while work that
// is slow to stop still runs. Under the standard policy work is told at the
// lease deadline, at least a third of the session timeout before the server
// can expire the session (docs/design.md: less behind a follower cut off
// from the ensemble's leader); under SessionOnly only a little before. Fence the
// guarded resource with the term's token where that matters. Once ctx has
// ended, Run does not wait for the deletion of its node: it leaves it to the
// session's guaranteed-delete queue. TermFromContext gives work its *Term
// (fencing token, cause of the end, Resign).
//
// After every term Run campaigns again (unless WithRequeue(false)): at once
// after a term that lasted at least a second, and after a pause after a term
// that ended sooner (100 ms after the first short term, doubling after each
// further one up to 30 s; a term of a second or more resets it). The pause
// begins once the node is deleted, so another participant can lead
// meanwhile. Work that fails, returns nil or panics at once thus runs about
// five times in its first two seconds, and once every 30 s in the long run. An error returned by work never stops Run:
// it is logged at error level (with the term's node and token) unless it
// only reports the end of the term (work's ctx error after a loss, a resign
// or the end of ctx). A panic in work is recovered, logged with its stack at
// error level, and handled as work returning an error matching ErrPanicked
// (it does not crash the process).
//
// Run returns only:
//   - when ctx ends: an error matching ctx's error, once work has returned;
//   - when the session is closed: an error matching session.ErrClosed;
//   - on a permanent ZooKeeper error that entering the election again cannot
//     cure, such as one matching zk.ErrNoAuth when the election path's ACL
//     does not admit the session's credentials (also zk.ErrAuthFailed,
//     zk.ErrInvalidACL, zk.ErrBadArguments, zk.ErrNoChildrenForEphemerals);
//   - with WithRequeue(false), after its single term: the error work
//     returned (unchanged; one matching ErrPanicked if it panicked), or nil,
//     when work returned while it led or after Term.Resign (an error of work
//     matching context.Canceled after Term.Resign gives nil); the cause of
//     the loss (matching session.ErrSuspended, session.ErrLost, ...) when
//     leadership was lost first;
//   - session.ErrBadArgument for a nil ctx, session or work or a bad option,
//     before anything is started.
//
// Disconnects, lost sessions and transient errors while campaigning are not
// returned: Run enters the election again.
//
// Options: WithID, WithRequeue (default true), WithLogger.
func Run(ctx context.Context, sess *session.Session, path string, work func(ctx context.Context) error, opts ...Option) error {
	if ctx == nil {
		return engine.NewError("leader", path, errNilContext)
	}
	if work == nil {
		return engine.NewError("leader", path, fmt.Errorf("%w: nil work", session.ErrBadArgument))
	}
	cfg, err := buildConfig(opts)
	if err != nil {
		return engine.NewError("leader", path, err)
	}
	if !cfg.requeueSet {
		cfg.requeue = true
	}
	e, err := newElector(sess, path, latchMarker, cfg)
	if err != nil {
		return err
	}
	// Bounded by ctx too: once ctx has ended, Run leaves the deletes of
	// canceled campaigns to the session's queue after a short grace.
	defer e.in.CloseWithin(ctx)
	pace := newPacer()
	for {
		lease, err := e.campaign(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return e.ctxErr(ctx)
			}
			return err // already names the election path
		}
		t := newTerm(lease, e.errf(recipes.ErrReleased))
		e.lg.Info("leadership gained", zap.String("node", t.Node()), zap.Int64("token", t.Token()))
		stop := context.AfterFunc(ctx, func() { t.end(context.Cause(ctx)) })
		werr, cause := e.call(t, work)
		stop()
		t.end(t.resigned)
		lasted := time.Since(t.Started())
		e.ended(t, werr, cause)
		// Bounded by ctx: once ctx has ended, the delete is queued in the
		// session and Run returns without waiting for it.
		e.release(ctx, lease)
		t.markReleased()
		switch {
		case ctx.Err() != nil:
			return e.ctxErr(ctx)
		case cfg.requeue:
			e.waitPause(ctx, pace.pause(lasted))
			continue
		case cause == nil:
			return werr
		case errors.Is(cause, recipes.ErrReleased):
			if errors.Is(werr, context.Canceled) {
				return nil
			}
			return werr
		default:
			return cause
		}
	}
}

// ctxErr is Run's error once the caller's ctx has ended: it matches ctx.Err()
// and names the cause when the caller gave one.
func (e *elector) ctxErr(ctx context.Context) error {
	if cause := context.Cause(ctx); cause != nil && cause != ctx.Err() {
		return e.errf(fmt.Errorf("%w (cause: %v)", ctx.Err(), cause))
	}
	return e.errf(ctx.Err())
}
