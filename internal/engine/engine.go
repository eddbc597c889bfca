package engine

// The Engine: one per recipe instance and path, with the acquires in
// progress that Close cancels and waits for.

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/zkrecipes/zkrecipes/internal/zksession"
	"github.com/zkrecipes/zkrecipes/session"
)

// Engine is the engine behind every ordered-children recipe (Curator's
// LockInternals): one per recipe instance and path. It creates protected
// EPHEMERAL_SEQUENTIAL contender nodes in the recipe directory, decides with a
// Driver on sorted snapshots of the directory, waits on the predecessor with
// a data watch, cleans up after every failure, and hands out Leases that end
// when ownership ends. It is safe for concurrent use; it keeps no per-goroutine
// state (see GoroutineHolds for that).
type Engine struct {
	zs       *zksession.Session
	hooks    *session.Hooks // the session's, nil when none
	path     string         // full server path of the recipe directory
	userPath string         // the path as the caller gave it (for errors)
	cfg      config
	lg       atomic.Pointer[zap.Logger] // see log

	// closeCtx (see closing) is made at its first use and canceled by
	// Close; closedFlag is set by Close.
	closeCtx    context.Context
	closeCancel context.CancelCauseFunc
	wg          sync.WaitGroup // acquires in progress, lease monitors, helper goroutines

	mu       sync.Mutex
	scopes   *scope                       // acquires in progress (see begin)
	leases   *Lease                       // light leases held (see Lease)
	cleanups map[<-chan struct{}]struct{} // deletes queued by failed acquires, not yet seen done
	closed   bool

	closeOnce  sync.Once
	closedFlag atomic.Bool
	dirReady   atomic.Bool // the directory was seen to exist (cache; redone on ErrNoNode)
	noMulti    atomic.Bool // create with a plain create (see createNode)

	// The cause of a lease ended by its own Release (see releasedErr), made
	// at the Engine's first Release: a process with a lock per key pays
	// for it only on the keys it releases.
	released atomic.Pointer[releasedBox]
}

// releasedBox is the cause of a lease ended by its own Release
// (errf(ErrReleased)) and an error holding it, whose address a lease keeps
// as its end cause (see Lease.end): a Release allocates neither.
type releasedBox struct {
	err   Error
	cause error // &err
}

// New returns the engine for the recipe directory path (a recipe path,
// without the session's namespace; Path returns the full server path). It
// validates its arguments and does no I/O.
func New(sess *session.Session, path string, opts ...Option) (*Engine, error) {
	cfg := defaultConfig()
	if err := ApplyOptions(&cfg, opts); err != nil {
		return nil, NewError(cfg.name, path, err)
	}
	zs, err := zksession.Of(sess)
	if err != nil {
		return nil, NewError(cfg.name, path, err)
	}
	full, err := zs.Path(path)
	if err != nil {
		return nil, NewError(cfg.name, path, err)
	}
	e := &Engine{zs: zs, hooks: hooksOf(zs), path: full, userPath: path, cfg: cfg}
	e.noMulti.Store(cfg.create == createPlain)
	return e, nil
}

// closing returns a context canceled by Close (at once if Close has begun),
// made at its first use: a light lease needs none (see Lease), and a
// service that makes a lock per key pays for it (once) only when an acquire
// waits, an acquire's ctx cannot be canceled (see scopeCtx) or a lease has a
// monitor.
func (e *Engine) closing() context.Context {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closeCtx == nil {
		e.closeCtx, e.closeCancel = context.WithCancelCause(context.Background())
		if e.closed {
			e.closeCancel(e.closedErr())
		}
	}
	return e.closeCtx
}

// log returns the Engine's logger: the session's (or WithLogger's), named
// after the recipe, with the path. It is made at the first log line, not
// with the Engine: a service that makes a lock per key and logs nothing
// pays nothing for it.
func (e *Engine) log() *zap.Logger {
	if lg := e.lg.Load(); lg != nil {
		return lg
	}
	base := e.cfg.lg
	if base == nil {
		base = e.zs.Logger().Named(e.cfg.name)
	}
	e.lg.CompareAndSwap(nil, base.With(zap.String("path", e.path)))
	return e.lg.Load()
}

// check is zap's Check on the Engine's logger, which it makes only if the
// level is enabled.
func (e *Engine) check(lvl zapcore.Level, msg string) *zapcore.CheckedEntry {
	base := e.cfg.lg
	if base == nil {
		base = e.zs.Logger()
	}
	if !base.Core().Enabled(lvl) {
		return nil
	}
	return e.log().Check(lvl, msg)
}

// UserPath returns the recipe's path as its caller gave it.
func (e *Engine) UserPath() string { return e.userPath }

// Path returns the full server path of the recipe directory (namespace
// included).
func (e *Engine) Path() string { return e.path }

// Session returns the session the engine uses.
func (e *Engine) Session() *zksession.Session { return e.zs }

// NodeWatch reports whether held leases watch their own node (WithNodeWatch).
func (e *Engine) NodeWatch() bool { return e.cfg.nodeWatch }

// closedErr returns the error for use after Close: it matches ErrClosed
// (zksession.ErrClosed).
func (e *Engine) closedErr() error { return e.errf(errClosed) }

// releasedErr is errf(ErrReleased), the same value for every lease of the
// Engine: only a lease's own Release (or forget), which runs once, ends it
// with this cause, so a lease may still compare its cause with it.
func (e *Engine) releasedErr() error { return e.releasedBox().cause }

// releasedBox returns the Engine's releasedBox, made at its first use.
func (e *Engine) releasedBox() *releasedBox {
	if b := e.released.Load(); b != nil {
		return b
	}
	b := &releasedBox{err: Error{Recipe: e.cfg.name, Path: e.userPath, Err: ErrReleased}}
	b.cause = &b.err
	if !e.released.CompareAndSwap(nil, b) {
		return e.released.Load()
	}
	return b
}

// errf wraps err with the recipe name and the path as the caller gave it.
func (e *Engine) errf(err error) error { return NewError(e.cfg.name, e.userPath, err) }

// enter registers an operation for Close to wait for; false after Close.
func (e *Engine) enter() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return false
	}
	e.wg.Add(1)
	return true
}

// scope is the context of an acquire in progress: the caller's ctx, which
// Close also cancels (with the closed error). The Engine links the scopes in
// progress, which costs less than a callback on its own context each (a
// thousand waiting acquires are a thousand scopes).
type scope struct {
	ctx        context.Context // the caller's ctx, also canceled by Close
	cancel     context.CancelCauseFunc
	prev, next *scope
	held       scopeCtx // ctx, when the caller's ctx cannot be canceled (see begin)
}

// scopeCtx is the context of an acquire whose caller's ctx cannot be
// canceled (its Done is nil: context.Background, WithoutCancel...): only
// Close ends it, so it is the Engine's closing context (see closing) with
// the caller's values, kept in the acquire's scope: it costs the acquire no
// allocation, where a context of its own would cost three. Its Done, Err and
// cause (context.Cause) are the closing context's, which Close cancels with
// the same cause as it cancels the other acquires; a context derived from
// it is a child of the closing context, with no goroutine, as a context
// derived from a cancelable context is. Unlike a context of its own, it is
// not canceled when the acquire returns, so an acquire must leave nothing
// that uses it behind (a pipelined read is waited for before the acquire
// returns), and every context derived from it must be canceled (a child of
// the closing context would stay until Close).
type scopeCtx struct {
	user    context.Context // Done is nil, and so no deadline
	closing context.Context
}

// Deadline returns the caller's ctx's (none).
func (c *scopeCtx) Deadline() (time.Time, bool) { return c.user.Deadline() }

// Done returns the closing context's.
func (c *scopeCtx) Done() <-chan struct{} { return c.closing.Done() }

// Err returns the closing context's.
func (c *scopeCtx) Err() error { return c.closing.Err() }

// Value returns the closing context's value for key (the context package's
// own, which gives it the closing context's cause and children), else the
// caller's ctx's.
func (c *scopeCtx) Value(key any) any {
	if v := c.closing.Value(key); v != nil {
		return v
	}
	return c.user.Value(key)
}

// begin registers an acquire, s, with the Engine: Close waits for it and
// cancels s.ctx, which begin derives from ctx. end must be called when the
// acquire returns. It fails once the Engine is closed.
func (e *Engine) begin(ctx context.Context, s *scope) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return e.closedErr()
	}
	e.wg.Add(1)
	if ctx.Done() == nil {
		// Only Close can end it: see scopeCtx.
		if e.closeCtx == nil {
			e.closeCtx, e.closeCancel = context.WithCancelCause(context.Background())
		}
		s.held = scopeCtx{user: ctx, closing: e.closeCtx}
		s.ctx, s.cancel = &s.held, nil
	} else {
		s.ctx, s.cancel = context.WithCancelCause(ctx)
	}
	s.prev, s.next = nil, e.scopes
	if e.scopes != nil {
		e.scopes.prev = s
	}
	e.scopes = s
	return nil
}

// end unregisters the acquire s and releases its context.
func (e *Engine) end(s *scope) {
	e.mu.Lock()
	if s.prev != nil {
		s.prev.next = s.next
	} else {
		e.scopes = s.next
	}
	if s.next != nil {
		s.next.prev = s.prev
	}
	s.prev, s.next = nil, nil
	e.mu.Unlock()
	if s.cancel != nil {
		s.cancel(nil)
	}
	e.wg.Done()
}
