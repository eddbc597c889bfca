package barrier

import (
	"context"
	"fmt"
	"time"

	"github.com/go-zookeeper/zk"
	"go.uber.org/zap"

	"github.com/zkrecipes/zkrecipes/internal/engine"
	"github.com/zkrecipes/zkrecipes/internal/zksession"
	"github.com/zkrecipes/zkrecipes/session"
)

// cleanupTimeout bounds the wait for the delete of a member node that a
// failed or closed call leaves (the delete itself goes on in the session's
// queue).
const cleanupTimeout = 5 * time.Second

// cleanupGrace is how long a call whose ctx has ended still waits for that
// delete, so that on a healthy connection the node is gone when the call
// returns. It is the most by which a failed call overshoots its ctx.
const cleanupGrace = 10 * time.Millisecond

// base is what both barriers share: the session, the path, the close
// signal.
type base struct {
	zs     *zksession.Session
	recipe string // "barrier" or "double barrier"
	path   string // as given
	full   string // server path
	cfg    *config
	lg     *zap.Logger

	ctx    context.Context // canceled by Close
	cancel context.CancelFunc
}

func newBase(sess *session.Session, recipe, p string, opts []Option) (base, error) {
	zs, err := zksession.Of(sess)
	if err != nil {
		return base{}, engine.NewError(recipe, p, err)
	}
	full, err := zs.Path(p)
	if err != nil {
		return base{}, engine.NewError(recipe, p, err)
	}
	if full == "/" {
		return base{}, engine.NewError(recipe, p, fmt.Errorf("%w: the root cannot be a barrier", session.ErrBadArgument))
	}
	cfg, err := buildConfig(opts)
	if err != nil {
		return base{}, engine.NewError(recipe, p, err)
	}
	lg := cfg.lg
	if lg == nil {
		lg = zs.Logger().Named("barrier")
	}
	b := base{zs: zs, recipe: recipe, path: p, full: full, cfg: cfg, lg: lg.With(zap.String("path", full))}
	b.ctx, b.cancel = context.WithCancel(context.Background())
	return b, nil
}

func (b *base) errf(err error) error { return engine.NewError(b.recipe, b.path, err) }

// begin merges ctx with Close; it fails for a nil ctx and after Close.
func (b *base) begin(ctx context.Context) (context.Context, context.CancelFunc, error) {
	actx, end, err := engine.CallContext(ctx, b.ctx)
	if err != nil {
		return nil, nil, b.errf(err)
	}
	return actx, end, nil
}

// result names a call's error: Close's when Close ended it.
func (b *base) result(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	if ctx.Err() == nil && b.ctx.Err() != nil {
		return b.errf(engine.KeepUnknown(err, engine.Closed()))
	}
	return b.errf(err)
}

// do runs op on a live epoch within ctx, retrying connection errors, and
// goes on on the next session after a loss (for operations that do not
// depend on the session: persistent nodes, reads).
func (b *base) do(ctx context.Context, op func(*zk.Conn) error) error {
	return b.zs.RetryAcrossSessions(ctx, op)
}

// waitEvent waits for w to fire, lost to close, or ctx to end (ctx's
// error).
func waitEvent(ctx context.Context, w *zksession.Watch, lost <-chan struct{}) error {
	select {
	case ev, ok := <-w.Events():
		w.Event(ev, ok)
		return nil
	case <-lost:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
