package leader

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/go-zookeeper/zk"
	"go.uber.org/zap"

	"github.com/zkrecipes/zkrecipes/internal/engine"
	"github.com/zkrecipes/zkrecipes/internal/zksession"
	"github.com/zkrecipes/zkrecipes/recipes"
	"github.com/zkrecipes/zkrecipes/session"
)

// Node markers (Curator-compatible): LeaderLatch creates
// <path>/_c_<uuid>-latch-<seq>; LeaderSelector is an InterProcessMutex on the
// leader path and creates <path>/_c_<uuid>-lock-<seq>.
const (
	latchMarker = "latch-"
	lockMarker  = "lock-"
)

// cleanupTimeout bounds the deletion of our node when a term ends or a
// campaign is abandoned; the engine falls back to a guaranteed delete when the
// connection is down.
//
// The engine keeps the node of a term that ended without Release
// (engine.WithKeepNodeUntilRelease): this package releases the lease only
// after the term's work (Run) or callback (Selector) has returned, or, for a
// Latch, after it has published the term's end, so no other participant can
// lead before then. Only a session that really expires takes the node
// earlier: the server deletes it with the session.
const cleanupTimeout = 5 * time.Second

// elector is what Latch, Selector and Run share: one engine instance on the
// election path, the driver for the node layout and the participant id.
type elector struct {
	sess *session.Session
	zs   *zksession.Session
	path string // as the caller gave it
	in   *engine.Engine
	drv  *engine.Driver
	data []byte
	id   string
	lg   *zap.Logger
}

func newElector(sess *session.Session, path, marker string, cfg config) (*elector, error) {
	zs, err := zksession.Of(sess)
	if err != nil {
		return nil, engine.NewError("leader", path, err)
	}
	lg := cfg.logger
	if lg == nil {
		lg = zs.Logger()
	}
	lg = lg.Named("leader")
	in, err := engine.New(sess, path,
		engine.WithName("leader"), engine.WithLogger(lg),
		engine.WithKeepNodeUntilRelease(true), engine.WithObserved("", cfg.name))
	if err != nil {
		return nil, engine.NewError("leader", path, err)
	}
	return &elector{
		sess: sess,
		zs:   zs,
		path: path,
		in:   in,
		drv:  engine.Standard(marker, 1),
		data: []byte(cfg.id),
		id:   cfg.id,
		lg:   lg.With(zap.String("path", in.Path())),
	}, nil
}

// campaign blocks until this participant leads, and returns the lease of its
// node. It enters the election again after every failure that a new attempt
// can cure (connection suspended, session lost, transient errors), so it
// returns an error only when ctx ends (an error matching ctx's), the session
// or the engine is closed, or ZooKeeper refuses the election for good (see
// permanent). Its errors name the election path.
func (e *elector) campaign(ctx context.Context) (*engine.Lease, error) {
	// One campaign is one acquire for the session's hooks, whatever its
	// attempts; the term reports its end (newTerm).
	octx, o := e.in.ObserveAcquire(ctx, "leader", 0)
	lease, err := e.campaignAs(octx, o)
	o.Done(err)
	return lease, err
}

// campaignAs is campaign, observed by o.
func (e *elector) campaignAs(ctx context.Context, o *engine.Observation) (*engine.Lease, error) {
	var bo backoff.BackOff
	for attempt := 1; ; attempt++ {
		if _, err := e.zs.WaitConnected(ctx); err != nil {
			return nil, e.errf(err)
		}
		lease, err := e.in.AcquireObserved(ctx, e.drv, e.data, o)
		if err == nil {
			if lerr := lease.Err(); lerr == nil {
				return lease, nil
			} else {
				// Won just as the connection went away: the lease is already
				// over. Give the node back and enter again.
				e.release(context.Background(), lease)
				err = e.errf(lerr)
			}
		}
		if ctx.Err() != nil || fatal(err) {
			return nil, err // the engine's errors name the path
		}
		if sessionTrouble(err) {
			if ce := e.lg.Check(zap.DebugLevel, "campaign interrupted; entering again"); ce != nil {
				ce.Write(zap.Int("attempt", attempt), zap.Error(err))
			}
		} else {
			e.lg.Warn("campaign failed; entering again", zap.Int("attempt", attempt), zap.Error(err))
		}
		if bo == nil {
			eb := backoff.NewExponentialBackOff()
			eb.InitialInterval = 10 * time.Millisecond
			eb.MaxInterval = 2 * time.Second
			eb.MaxElapsedTime = 0
			eb.Reset() // the constructor took its default first interval (500 ms)
			bo = eb
		}
		if err := sleep(ctx, e.sess, bo.NextBackOff()); err != nil {
			return nil, e.errf(err)
		}
	}
}

// fatal reports errors after which campaigning cannot go on: the session or
// the engine is closed, or entering the election again would fail the same
// way (zksession.Permanent: retrying them would only warn for ever while
// Await blocks, so a Latch, a Selector and Run stop on them).
func fatal(err error) bool {
	return errors.Is(err, session.ErrClosed) || zksession.Permanent(err)
}

// sessionTrouble reports errors that are the expected outcome of a
// disconnect or a session loss: not worth a warning.
func sessionTrouble(err error) bool {
	return errors.Is(err, session.ErrSuspended) || errors.Is(err, session.ErrLost) ||
		errors.Is(err, zksession.ErrSessionChanged) || zksession.IsConnectionError(err) ||
		errors.Is(err, zk.ErrSessionExpired) || errors.Is(err, recipes.ErrNodeDeleted)
}

// sleep waits for d, ctx or the session's Close.
func sleep(ctx context.Context, sess *session.Session, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-sess.Done():
		return session.ErrClosed
	}
}

// release gives the lease back (deletes our node) within ctx, and at most
// cleanupTimeout. The engine queues a guaranteed delete when the connection
// is down, ctx ends (at once if ctx has already ended: then release does not
// block) or the lease's epoch is over (the same session id may come back
// after a local-timer Lost, with the node still on the server).
func (e *elector) release(ctx context.Context, l *engine.Lease) {
	ctx, cancel := context.WithTimeout(ctx, cleanupTimeout)
	defer cancel()
	if err := l.Release(ctx); err != nil {
		if ce := e.lg.Check(zap.DebugLevel, "release"); ce != nil {
			ce.Write(zap.String("node", l.Node()), zap.Error(err))
		}
	}
}

// errf wraps err with the election path as the caller gave it.
func (e *elector) errf(err error) error { return engine.NewError("leader", e.path, err) }

// errNilContext is the cause of a call given a nil ctx.
var errNilContext = fmt.Errorf("%w: nil context", session.ErrBadArgument)

// participants lists the contenders in election order; the first leads
// (Holds). A missing election path means no participants.
func participants(ctx context.Context, in *engine.Engine, drv *engine.Driver) ([]recipes.Participant, error) {
	ps, err := in.Participants(ctx, drv)
	if errors.Is(err, zk.ErrNoNode) {
		return nil, nil
	}
	return ps, err
}
