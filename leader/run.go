package leader

import (
	"context"
	"fmt"

	"go.uber.org/zap"

	"github.com/zkrecipes/zkrecipes/recipes"
	"github.com/zkrecipes/zkrecipes/session"
)

// Run makes work highly available: it campaigns for leadership of the election
// at path (Curator's LeaderLatch layout, so it can share an election with
// Latches and with Java LeaderLatch participants), calls work while this
// participant leads, and gives leadership up when work returns.
//
// work's ctx is canceled when leadership is lost (under the standard loss
// policy already when the connection is suspended, before another participant
// can lead) or when ctx ends. The participant's node is deleted only after
// work has returned, even when the connection came back long before, so no
// other participant's work starts before this one has returned, and work
// should return promptly once its ctx is done. The one exception is a session
// that really expires (a partition or a freeze past the session timeout):
// the server deletes the node with the session, and another participant may
// lead while work that is slow to stop still runs. Under the standard policy
// work is told at the suspension, about a third of the session timeout
// before the server can expire the session; under SessionOnly only a little
// before. Fence the guarded resource with the term's token where that
// matters. Once ctx has ended, Run does not wait for the deletion of its
// node: it leaves it to the session's guaranteed-delete queue.
// TermFromContext gives work its *Term (fencing token, cause of the end).
//
// After a term, Run campaigns again (unless WithRequeue(false)) when
// leadership was lost or work returned nil. It returns:
//   - an error matching ctx's error once ctx ends (after work has returned);
//   - the error work returned while it still led, unchanged;
//   - with WithRequeue(false), nil when work returned nil, or the cause of
//     the loss (matching session.ErrSuspended, session.ErrLost, ...);
//   - an error matching session.ErrClosed if the session is closed;
//   - ErrBadArgument for a nil ctx, session or work, ErrBadOption for a bad
//     option, before anything is started;
//   - a permanent ZooKeeper error that entering the election again cannot
//     cure, such as one matching zk.ErrNoAuth when the election path's ACL
//     does not admit the session's credentials (also zk.ErrAuthFailed,
//     zk.ErrInvalidACL, zk.ErrBadArguments, zk.ErrNoChildrenForEphemerals).
//
// Disconnects, lost sessions and transient errors while campaigning are not
// returned: Run enters the election again.
//
// Options: WithID, WithRequeue (default true), WithLogger.
func Run(ctx context.Context, sess *session.Session, path string, work func(ctx context.Context) error, opts ...Option) error {
	if ctx == nil {
		return recipes.NewError("leader", path, errNilContext)
	}
	if work == nil {
		return recipes.NewError("leader", path, fmt.Errorf("%w: nil work", ErrBadArgument))
	}
	cfg, err := buildConfig(opts)
	if err != nil {
		return recipes.NewError("leader", path, err)
	}
	if !cfg.requeueSet {
		cfg.requeue = true
	}
	e, err := newElector(sess, path, latchMarker, cfg)
	if err != nil {
		return err
	}
	defer e.in.Close()
	for {
		lease, err := e.campaign(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return e.ctxErr(ctx)
			}
			return err // already names the election path
		}
		t := newTerm(lease)
		e.lg.Info("leadership gained", zap.String("node", t.Node()), zap.Int64("token", t.Token()))
		stop := context.AfterFunc(ctx, func() { t.end(context.Cause(ctx)) })
		werr := work(t.Context())
		stop()
		lost := t.Err() // nil if work returned while still leading
		t.end(e.errf(ErrResigned))
		e.lg.Info("leadership ended", zap.String("node", t.Node()), zap.NamedError("cause", t.Err()), zap.Error(werr))
		// Bounded by ctx: once ctx has ended, the delete is queued in the
		// session and Run returns without waiting for it.
		e.release(ctx, lease)
		switch {
		case ctx.Err() != nil:
			return e.ctxErr(ctx)
		case werr != nil && lost == nil:
			return werr
		case !cfg.requeue && lost != nil:
			return lost
		case !cfg.requeue:
			return nil
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
