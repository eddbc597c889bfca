package engine

// Cleanup: a failed or canceled acquire deletes its node, bounded by its
// ctx and the cleanup timeout, and Close waits for what failed acquires
// left to delete.

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/internal/zksession"
)

// Close ends every lease of this Engine (cause matching ErrClosed; their
// nodes are deleted), makes waiting acquires return ErrClosed, and returns
// once every goroutine the engine started has exited and, while the
// connection is up, the nodes of its leases and of every acquire that failed
// or was canceled are deleted. Cleanup is bounded by the cleanup timeout;
// what cannot be deleted then is left to the session's guaranteed-delete
// queue. Idempotent; later
// calls return ErrClosed-matching errors. Returns nil.
func (e *Engine) Close() error {
	return e.CloseWithin(context.Background())
}

// CloseWithin is Close for a call bounded by ctx (leader.Run closes its
// engine on its way out): it waits for the deletes of failed acquires only
// while ctx lives, and for a short grace (the one every acquire allows its
// cleanup) once ctx has ended, besides the cleanup timeout; what is left
// the session's guaranteed-delete queue finishes. Idempotent with Close.
func (e *Engine) CloseWithin(ctx context.Context) error {
	e.closeOnce.Do(func() {
		e.mu.Lock()
		e.closed = true
		e.closedFlag.Store(true)
		closeCancel := e.closeCancel
		var cancels []context.CancelCauseFunc
		for s := e.scopes; s != nil; s = s.next {
			if s.cancel != nil { // else its ctx is the closing context's (scopeCtx)
				cancels = append(cancels, s.cancel)
			}
		}
		var light []*Lease
		for l := e.leases; l != nil; l = l.next {
			light = append(light, l)
		}
		e.mu.Unlock()
		if closeCancel != nil {
			closeCancel(e.closedErr())
		}
		for _, cancel := range cancels {
			cancel(e.closedErr())
		}
		// Light leases end here (their nodes are queued for deletion, which
		// awaitCleanups waits for); monitored ones in their monitor.
		for _, l := range light {
			l.end(e.closedErr())
			l.finish()
		}
		e.wg.Wait()
		e.awaitCleanups(ctx)
	})
	return nil
}

// trackCleanup remembers a delete queued by a failed acquire, which may
// return before the delete is done (its ctx bounds it), so that Close can
// wait for it. Deletes seen done are forgotten here, which bounds the set.
func (e *Engine) trackCleanup(done <-chan struct{}) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for ch := range e.cleanups {
		select {
		case <-ch:
			delete(e.cleanups, ch)
		default:
		}
	}
	select {
	case <-done:
		return
	default:
	}
	if e.cleanups == nil {
		e.cleanups = make(map[<-chan struct{}]struct{})
	}
	e.cleanups[done] = struct{}{}
}

// awaitCleanups waits, at Close, for the deletes that failed acquires
// queued: while the connection is up and within the cleanup timeout in all,
// so that the nodes of canceled waiters are gone when Close returns on a
// healthy connection (what is left the session's queue finishes); and within
// ctx, or a short grace after it ended (see awaitCleanup).
func (e *Engine) awaitCleanups(user context.Context) {
	e.mu.Lock()
	pending := make([]<-chan struct{}, 0, len(e.cleanups))
	for ch := range e.cleanups {
		pending = append(pending, ch)
	}
	e.cleanups = nil
	e.mu.Unlock()
	if len(pending) == 0 {
		return
	}
	w := e.newCleanupWait(user)
	defer w.stop()
	for _, ch := range pending {
		if !w.await(ch) {
			return
		}
	}
}

// fail cleans up after a failed attempt and returns the error to report.
//
// Our node (or a ghost that a create with an unknown outcome may have left)
// goes to the session's durable queue, which deletes it as soon as the
// connection allows, retrying across disconnects for as long as the session
// lives; fail then waits for that delete only briefly (awaitCleanup), so that
// the call still returns within its ctx whatever the network does.
func (a *attempt) fail(err error) error {
	e := a.e
	var done <-chan struct{}
	zs := e.zs
	switch {
	case a.ep == nil:
	case a.fixed != "" && (a.node != "" || a.ghosts):
		// A fixed name may be the next holder's by now: delete it only
		// while it carries our data, unique to this acquire.
		done = zs.GuaranteedDeleteIfData(a.ep, a.fixed, a.data)
	case a.ghosts:
		// A create whose reply was lost may have left a node we cannot
		// name, besides the one we may have adopted or created since (on
		// an ensemble, a lagging member can hide the ghost from findGhost):
		// the queue deletes every child carrying our UUID, ours included.
		done = zs.GuaranteedSweep(a.ep, e.path, ProtectedPrefix(a.uuid))
	case a.node != "":
		done = zs.GuaranteedDelete(a.ep, a.node, -1)
	}
	for _, d := range []<-chan struct{}{done, a.lateCreate} {
		if d != nil {
			e.awaitCleanup(a.user, d)
			e.trackCleanup(d)
		}
	}
	a.node = ""
	// Report the caller's ctx error rather than a wrapped one from below.
	if a.user.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || a.ctx.Err() != nil) {
		return e.errf(ctxError(a.user))
	}
	if e.closedFlag.Load() && a.ctx.Err() != nil {
		return e.closedErr()
	}
	return e.errf(err)
}

// cleanupGrace is how long a call whose ctx has ended still waits for its
// queued cleanup, so that on a healthy connection the node is gone when the
// call returns. It is the most by which a failed or canceled call overshoots
// its ctx.
const cleanupGrace = 10 * time.Millisecond

// awaitCleanup waits for a queued delete (done) while the connection is up:
// within ctx plus cleanupGrace, and at most the cleanup timeout. What is not
// finished by then the session's queue finishes later.
func (e *Engine) awaitCleanup(ctx context.Context, done <-chan struct{}) {
	w := e.newCleanupWait(ctx)
	defer w.stop()
	w.await(done)
}

// cleanupWait bounds the wait for one or more queued deletes: the cleanup
// timeout in all, and ctx plus cleanupGrace.
type cleanupWait struct {
	e       *Engine
	limit   *time.Timer
	ctxDone <-chan struct{}
	grace   *time.Timer // started once ctx has ended
}

func (e *Engine) newCleanupWait(ctx context.Context) *cleanupWait {
	w := &cleanupWait{e: e, limit: time.NewTimer(e.cfg.cleanupTimeout), ctxDone: ctx.Done()}
	if ctx.Err() != nil {
		w.startGrace()
	}
	return w
}

func (w *cleanupWait) startGrace() {
	w.ctxDone = nil
	w.grace = time.NewTimer(cleanupGrace)
}

func (w *cleanupWait) stop() {
	w.limit.Stop()
	if w.grace != nil {
		w.grace.Stop()
	}
}

// await waits for done while the connection is up and within the bounds;
// it returns false once a bound has passed (or the session is closed).
func (w *cleanupWait) await(done <-chan struct{}) bool {
	for {
		// The channel first, then the state: a transition after the check
		// closes the channel taken before it.
		changed := w.e.zs.Changed()
		if !up(w.e.zs) {
			return true
		}
		var grace <-chan time.Time
		if w.grace != nil {
			grace = w.grace.C
		}
		select {
		case <-done:
			return true
		case <-w.limit.C:
			return false
		case <-grace:
			return false
		case <-w.e.zs.Done():
			return false
		case <-w.ctxDone:
			w.startGrace()
		case <-changed:
			// The connection went down (the queue finishes the delete
			// once it is back) or came back: check again.
		}
	}
}

// ctxError returns ctx's error, with its cause when that says more.
func ctxError(ctx context.Context) error {
	err := ctx.Err()
	if cause := context.Cause(ctx); cause != nil && cause != err {
		return fmt.Errorf("%w (cause: %w)", err, cause)
	}
	return err
}

// deleteNode deletes a node of ours created under ep through the session's
// guaranteed-delete queue, and waits for it as awaitCleanup does. The queue
// deletes it as soon as the connection is up on ep's session; once the
// session has been replaced by a new one, it deletes the node from the new
// session if the server has not yet expired the old one (the node is still
// the old session's). After a Lost declared by the local timer the same
// session id may come back with the node still there, and then the queue
// deletes it too.
func (e *Engine) deleteNode(ctx context.Context, ep *zksession.Epoch, node string) {
	if ep == nil {
		return
	}
	e.awaitCleanup(ctx, e.zs.GuaranteedDelete(ep, node, -1))
}

// deleteRetry deletes l's node within its epoch, retrying connection
// errors; a missing node counts as deleted.
func (e *Engine) deleteRetry(ctx context.Context, l *Lease) error {
	return e.zs.RetryOp(ctx, l.ep, (*leaseDelete)(l))
}

// leaseDelete is a Lease seen as the request that deletes its node (see
// deleteRetry): a conversion of the Lease's pointer, so that the delete
// costs no closure. It reads only the lease's node.
type leaseDelete Lease

// Run deletes the node; a missing node counts as deleted.
func (d *leaseDelete) Run(c *zk.Conn) error {
	err := c.Delete(d.node, -1)
	if errors.Is(err, zk.ErrNoNode) {
		return nil
	}
	return zksession.Refused("delete", d.node, err)
}

// Late drops the outcome of an attempt left behind, as Retry does.
func (d *leaseDelete) Late(error) {}

// up reports whether the connection is up (the lease context of a
// standard-policy session is a cheaper proxy, but not under SessionOnly).
func up(s *zksession.Session) bool {
	switch s.State() {
	case zksession.Connected, zksession.Reconnected, zksession.ReadOnly:
		return true
	}
	return false
}

// untilClosed returns a context canceled the cleanup timeout after Close.
func (e *Engine) untilClosed() (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	var mu sync.Mutex
	var timer *time.Timer
	stop := context.AfterFunc(e.closing(), func() {
		mu.Lock()
		timer = time.AfterFunc(e.cfg.cleanupTimeout, cancel)
		mu.Unlock()
	})
	return ctx, func() {
		stop()
		mu.Lock()
		if timer != nil {
			timer.Stop()
		}
		mu.Unlock()
		cancel()
	}
}
