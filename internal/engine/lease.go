package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"
	"go.uber.org/zap"

	"github.com/zkrecipes/zkrecipes/internal/zksession"
)

// Lease is the handle of a held recipe: it outlives the acquire and tells the
// holder when ownership ends. Done is closed exactly once, when ownership ends
// for any reason; Err then says why:
//
//   - ErrReleased: Release was called;
//   - session.ErrSuspended: the connection was still down at the lease
//     deadline (standard loss policy) or went down (end-at-disconnect), the
//     server may expire the session soon; once the session is
//     known lost, Err matches session.ErrLost as well (see below);
//   - session.ErrLost: the session ended (expired, replaced, or declared lost
//     by the local timer), so the server deletes (or has deleted) our node;
//   - session.ErrClosed: the session was closed;
//   - ErrNodeDeleted: our node was deleted by someone else;
//   - ErrClosed: the Engine (the recipe) was closed.
//
// Errors are wrapped (with the path or session id); match them with
// errors.Is. Err is the up-to-date reason: a lease that ended at a suspension
// whose session was then lost (expired on the server, or declared lost by the
// local timer) reports an error matching both session.ErrSuspended and
// session.ErrLost, so errors.Is(err, session.ErrLost) tells a holder that its
// node is gone with its session, while errors.Is(err, session.ErrSuspended)
// alone means the session may still be alive. Context's cause cannot change
// once the context is canceled: it stays the first reason.
//
// Whenever a lease ends for a reason other than Release or ErrNodeDeleted, the
// engine deletes its node (through the session's guaranteed-delete queue if
// the connection is down), so a holder told it lost the lock never keeps
// blocking others; with WithKeepNodeUntilRelease the node stays instead until
// Release (or Close), unless the session expires. A Lease is safe for
// concurrent use; it is not tied to a goroutine (see GoroutineHolds).
//
// A nil *Lease behaves as a lease that has ended: Done is closed, Err, the
// cause of Context and Release's error match ErrBadArgument (naming the nil
// lease), and the other methods return zero values.
type Lease struct {
	e     *Engine
	ep    *zksession.Epoch
	node  string // full path
	data  []byte // the participant id (the caller's bytes, never written)
	token int64

	// The lease ends with its lease context (lctx: a suspension or loss
	// ends every lease of it at once) or by end, whose first cause it
	// keeps (endCause). Its own context is made only when asked for
	// (Context; at once for a monitored lease), as a child of lctx: a
	// service holding ten thousand leases that never asks for their
	// contexts pays for none.
	lctx     context.Context
	endCause atomic.Pointer[error]
	own      atomic.Pointer[leaseCtx]

	// Release's outcome, nil until Release (or forget) is first called
	// (relMu): that call decides, setting it to &noErr at once; later ones
	// return *relErr.
	relMu  sync.Mutex
	relErr *error

	// Err's error once the session of a suspended lease is known lost.
	lostErr atomic.Pointer[error]

	// A light lease (x == nil) has no goroutine while it is held: the
	// session calls it when its lease context ends (endHook) or its node
	// changes (sub), the Engine when it closes (prev, next), the session's
	// arm queue when it is time to watch its node. finished is set by the
	// first of them, or Release, to run finish.
	sub        zksession.NodeSub
	endHook    zksession.EndHook
	prev, next *Lease                             // the Engine's light leases (e.mu)
	armStop    atomic.Pointer[context.CancelFunc] // ends a watch request in flight
	finished   atomic.Bool
	subscribed atomic.Bool // sub was subscribed once (finish unsubscribes it)
	// The acquire's observation, while the LeaseEnd hook is to be told
	// of this light lease's end (see Observation.Done); nil otherwise.
	obs atomic.Pointer[Observation]

	x *monitored // a lease with a monitor goroutine, else nil
}

// leaseCtx is a lease's own context (see Lease.Context).
type leaseCtx struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
}

// end ends the lease with cause, unless it has ended already (then it keeps
// the first cause). A lease context that has ended already is the first
// cause.
func (l *Lease) end(cause error) {
	if l.lctx.Err() != nil {
		cause = context.Cause(l.lctx)
	}
	if !l.endCause.CompareAndSwap(nil, l.e.causeRef(cause)) {
		return
	}
	if lc := l.own.Load(); lc != nil {
		lc.cancel(cause)
	}
}

// causeRef returns a pointer to cause for Lease.endCause: the Engine's own
// for its released error, a new one for any other cause.
func (e *Engine) causeRef(cause error) *error {
	if b := e.released.Load(); b != nil {
		if r, ok := cause.(*Error); ok && r == &b.err {
			return &b.cause
		}
	}
	return boxError(cause)
}

// boxError returns a pointer to a copy of err.
//
//go:noinline
func boxError(err error) *error { return &err }

// ended reports whether the lease has ended.
func (l *Lease) ended() bool {
	return l.endCause.Load() != nil || l.lctx.Err() != nil
}

// cause returns the first reason the lease ended, or nil while it is held.
// Once it is not nil it never changes: every decision about the node
// (finish, Release) reads it. The lease's own context, once made, is
// canceled with it, except when the lease context ends in the instant
// between end's record and that cancel: then the context's cause is the
// lease context's.
func (l *Lease) cause() error {
	if c := l.endCause.Load(); c != nil {
		return *c
	}
	if l.lctx.Err() != nil {
		return context.Cause(l.lctx)
	}
	return nil
}

// monitored is the state of a lease that has a monitor goroutine (see
// grant): a fixed node, a watch inherited from the wait, or
// WithKeepNodeUntilRelease.
type monitored struct {
	id string // the participant id of a fixed node (whose data is more)

	released chan struct{} // closed when Release is first called
	// With WithKeepNodeUntilRelease, the delete of a sequential node that
	// outlived its lease is done once: by Release, or by the monitor at Close.
	delClaimed atomic.Bool

	fixed []byte // data of a fixed node (nil for sequential nodes)
	// The monitor's delete of a fixed node, handed to Release: fixedSet once
	// the monitor stored fixedErr; fixedGaveUp once Release stopped waiting
	// for it (then the monitor logs a failure instead).
	fixedMu     sync.Mutex
	fixedErr    error
	fixedSet    bool
	fixedGaveUp bool

	monitorDone chan struct{}

	// The deferred start of the monitor (see deferMonitor): claimed once,
	// by the first of Release, the delay, the end of the lease context and
	// Close; the claimer stops the others.
	deferred       bool // set by grant, before the lease is handed out
	monitorClaimed atomic.Bool
	deferMu        sync.Mutex // a trigger may fire before deferMonitor has set the others
	delayTimer     *time.Timer
	stopOnEnd      func() bool
	stopOnClose    func() bool
}

// grant turns a winning attempt into a lease. A sequential node without an
// inherited watch and without WithKeepNodeUntilRelease (the common case)
// gets a light lease: no goroutine while it is held (see Lease). The others
// get a monitor goroutine, at once or when needed (deferMonitor).
func (e *Engine) grant(a *attempt) (*Lease, error) {
	l := &Lease{e: e, ep: a.ep, node: a.node, data: a.data, token: a.czxid}
	// The lease context captured before the deciding read: a suspension
	// (standard policy) or loss ends the lease synchronously, before any
	// goroutine of ours runs.
	l.lctx = a.lctx
	light := a.fixed == "" && a.self == nil && !e.cfg.keepNode
	if !light {
		l.x = &monitored{released: make(chan struct{}), monitorDone: make(chan struct{})}
		if a.fixed != "" {
			l.x.fixed = a.data
		}
		l.Context() // the monitor waits on it
	}
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		l.end(e.closedErr())
		return nil, a.fail(ErrClosed)
	}
	if light {
		l.next = e.leases
		if e.leases != nil {
			e.leases.prev = l
		}
		e.leases = l
	} else {
		e.wg.Add(1)
	}
	e.mu.Unlock()
	a.node = "" // owned by the lease now
	switch {
	case light:
		// If the lease context has ended already, this finishes the lease.
		e.zs.OnLeaseEnd(a.lctx, &l.endHook, l)
		if l.finished.Load() {
			// Close finished it before the hook was registered: the hook
			// would stay until the lease context ends.
			e.zs.CancelLeaseEnd(&l.endHook)
		}
		if e.cfg.nodeWatch {
			queueArm(e.zs, l)
		}
	case l.x.fixed == nil && a.self == nil:
		l.deferMonitor(a.lctx)
	default:
		go l.monitor(a.self)
	}
	if ce := e.check(zap.DebugLevel, "acquired"); ce != nil {
		ce.Write(zap.String("node", l.Node()), zap.Int64("token", l.token))
	}
	return l, nil
}

// finish follows the end of a light lease (its context is canceled), once,
// on whichever goroutine sees the end first: it unhooks the lease from the
// session and the Engine and, unless Release (which deletes the node itself)
// or the deletion of the node ended it, queues the delete of its node on
// the session's guaranteed-delete queue, which Close waits for as for the
// nodes of failed acquires. It never blocks on the network.
func (l *Lease) finish() {
	if !l.finished.CompareAndSwap(false, true) {
		return
	}
	if o := l.obs.Swap(nil); o != nil {
		// Once the lease is unhooked and its delete queued: a suspension
		// finishes all of a session's leases in turn.
		defer l.tellEnd(o)
	}
	e := l.e
	if stop := l.armStop.Swap(nil); stop != nil {
		(*stop)()
	}
	if l.subscribed.Load() {
		e.zs.CancelNode(&l.sub, l.node)
	}
	e.zs.CancelLeaseEnd(&l.endHook)
	e.mu.Lock()
	if l.prev != nil {
		l.prev.next = l.next
	} else if e.leases == l {
		e.leases = l.next
	}
	if l.next != nil {
		l.next.prev = l.prev
	}
	l.prev, l.next = nil, nil
	e.mu.Unlock()
	cause := l.cause()
	if errors.Is(cause, ErrReleased) || errors.Is(cause, ErrNodeDeleted) {
		return
	}
	if ce := e.check(zap.DebugLevel, "lease ended"); ce != nil {
		ce.Write(zap.String("node", l.Node()), zap.Error(cause))
	}
	e.trackCleanup(e.zs.GuaranteedDelete(l.ep, l.node, -1))
}

// LeaseContextEnded implements zksession.LeaseEnds: the lease context of a
// light lease ended (a suspension or loss), and with it the lease.
func (l *Lease) LeaseContextEnded() { l.finish() }

// NodeEvent implements zksession.NodeEvents for a light lease: an event on
// its node, on go-zookeeper's receiving goroutine.
func (l *Lease) NodeEvent(ev zk.Event) {
	switch ev.Type {
	case zk.EventNodeDeleted:
		l.lost()
		l.finish()
	case zk.EventNotWatching:
		// The session expired or closed (go-zookeeper invalidates watches).
		if err := l.ep.Err(); err != nil {
			l.end(err)
		} else {
			l.end(l.e.errf(zksession.ErrLost))
		}
		l.finish()
	default:
		// The node's data changed (not by us): watch again. A watch
		// request still in flight gives way (its ctx ends; it leaves the
		// subscription to this one).
		if !l.ended() && l.e.enter() {
			if stop := l.armStop.Swap(nil); stop != nil {
				(*stop)()
			}
			go func() {
				defer l.e.wg.Done()
				l.armLight()
			}()
		}
	}
}

// armLight sets the data watch of a light lease on its node, its events
// subscribed to the lease (zksession.WatchNode); see arm, which it follows.
func (l *Lease) armLight() {
	// Its requests stop when the lease ends (finish cancels actx). Not
	// the lease's context: it would be made for this, and kept while the
	// lease is held.
	actx, cancel := context.WithCancel(context.Background())
	defer cancel()
	l.armStop.Store(&cancel)
	defer l.armStop.CompareAndSwap(&cancel, nil)
	l.subscribed.Store(true) // before finished is read: finish then unsubscribes
	if l.finished.Load() {
		return
	}
	d := armPauseMin
	sess := l.e.zs
	for {
		err := sess.WatchNode(actx, l.ep, &l.sub, l.node, l)
		if l.ended() {
			// Ended meanwhile: finish may have unsubscribed before the try
			// that subscribed again.
			sess.CancelNode(&l.sub, l.node)
			return
		}
		if actx.Err() != nil {
			return // a newer watch request took over (see NodeEvent)
		}
		switch {
		case err == nil:
			return
		case errors.Is(err, zk.ErrNoNode):
			l.lost()
			l.finish()
			return
		case errors.Is(err, zksession.ErrLost), errors.Is(err, zksession.ErrClosed):
			if err2 := l.ep.Err(); err2 != nil {
				l.end(err2)
			} else {
				l.end(l.e.errf(err))
			}
			l.finish()
			return
		case zksession.IsConnectionError(err):
			if ce := l.e.check(zap.DebugLevel, "arming the node watch failed, trying again"); ce != nil {
				ce.Write(zap.String("node", l.Node()), zap.Duration("pause", d), zap.Error(err))
			}
			if pause(actx, d) != nil {
				return
			}
			d = min(2*d, armPauseMax)
		default:
			l.e.log().Warn("cannot watch our own node", zap.String("node", l.Node()), zap.Error(err))
			return
		}
	}
}

// Done returns a channel that is closed when ownership ends.
func (l *Lease) Done() <-chan struct{} { return l.Context().Done() }

// Err returns nil while the lease is held, then why it ended (see Lease). It
// is the up-to-date reason: after a suspension (session.ErrSuspended) it also
// matches session.ErrLost once the lease's session is known lost.
func (l *Lease) Err() error {
	if l == nil {
		return errNilLease()
	}
	cause := l.cause()
	if cause == nil {
		return nil
	}
	if !errors.Is(cause, zksession.ErrSuspended) || errors.Is(cause, zksession.ErrLost) {
		return cause
	}
	if eerr := l.ep.Err(); eerr == nil || !errors.Is(eerr, zksession.ErrLost) {
		return cause
	}
	if p := l.lostErr.Load(); p != nil {
		return *p
	}
	// Both wrapped: errors.Is matches ErrSuspended and ErrLost.
	lost := fmt.Errorf("%w; then %w", cause, l.ep.Err())
	if !l.lostErr.CompareAndSwap(nil, &lost) {
		return *l.lostErr.Load()
	}
	return lost
}

// Context returns a context canceled when the lease ends. Run the guarded
// work under it. Its cause (context.Cause) is the first reason the lease
// ended and cannot change afterwards; Err gives the up-to-date reason (for
// example session.ErrLost after session.ErrSuspended).
func (l *Lease) Context() context.Context {
	if l == nil {
		return EndedContext(errNilLease())
	}
	if lc := l.own.Load(); lc != nil {
		return lc.ctx
	}
	var lc leaseCtx
	if c := l.endCause.Load(); c != nil {
		// Ended by end: its cause, not the lease context's (which may have
		// ended since).
		lc.ctx, lc.cancel = context.WithCancelCause(context.Background())
		lc.cancel(*c)
	} else {
		lc.ctx, lc.cancel = context.WithCancelCause(l.lctx)
	}
	if !l.own.CompareAndSwap(nil, &lc) {
		lc.cancel(nil)
		return l.own.Load().ctx
	}
	if c := l.endCause.Load(); c != nil {
		// end ran meanwhile and found no context to cancel.
		lc.cancel(*c)
	}
	return lc.ctx
}

// errNilLease is the error of a nil *Lease.
func errNilLease() error { return fmt.Errorf("%w: nil lease", ErrBadArgument) }

// EndedContext returns a context that is already canceled with cause: the
// Context of a nil lease or term of every recipe.
func EndedContext(cause error) context.Context {
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(cause)
	return ctx
}

// Token returns the fencing token: the czxid of our node. It grows across the
// whole ensemble and survives the recipe directory being deleted and
// recreated (sequence numbers do not).
func (l *Lease) Token() int64 {
	if l == nil {
		return 0
	}
	return l.token
}

// RecipePath returns the recipe's path as its caller gave it (for errors).
func (l *Lease) RecipePath() string {
	if l == nil {
		return ""
	}
	return l.e.userPath
}

// Path returns the full server path of our node.
func (l *Lease) Path() string {
	if l == nil {
		return ""
	}
	return l.node
}

// Node returns the name of our node.
func (l *Lease) Node() string {
	if l == nil {
		return ""
	}
	return l.node[strings.LastIndexByte(l.node, '/')+1:]
}

// Seq returns the sequence number of our node (0 for a fixed node).
func (l *Lease) Seq() int64 {
	if l == nil {
		return 0
	}
	if l.x != nil && l.x.fixed != nil {
		return 0
	}
	// ZooKeeper's sequence suffix, %010d: ten characters, eleven for a
	// sequence below -999,999,999 (after the counter wrapped), whose sign
	// follows the marker's '-'.
	name := l.Node()
	if len(name) < 10 {
		return 0
	}
	suffix := name[len(name)-10:]
	if n := len(name); suffix[0] != '-' && n >= 12 && name[n-11] == '-' && name[n-12] == '-' {
		suffix = name[n-11:]
	}
	seq, _ := parseSeq(suffix)
	return seq
}

// ID returns the participant id stored in our node.
func (l *Lease) ID() string {
	switch {
	case l == nil:
		return ""
	case l.x != nil && l.x.fixed != nil:
		return l.x.id
	}
	return string(l.data)
}

// Epoch returns the session epoch the node belongs to.
func (l *Lease) Epoch() *zksession.Epoch {
	if l == nil {
		return nil
	}
	return l.ep
}

// Release ends the lease (Err becomes ErrReleased, Done closes) and then
// deletes our node, retrying connection errors within ctx; if the connection
// is down or ctx ends first, the delete is handed to the session's
// guaranteed-delete queue and Release returns nil: the node goes once the
// session is back, or with the session. With a ctx that has already ended,
// Release sends nothing: it queues the delete and returns at once. A fixed
// node (AcquireFixed) is deleted only while it is still ours, by the lease's
// goroutine, which keeps trying while the connection is down; Release waits
// for it within ctx. If the lease had already ended (loss, Close), Release
// returns nil at once: the engine deletes the node (or the server or a third
// party did); with WithKeepNodeUntilRelease, Release deletes it then as
// above (unless Close did). Idempotent and safe for concurrent use; every
// call returns the first call's result. It returns an error only when
// ZooKeeper refuses the delete (e.g. zk.ErrNoAuth), or for a nil *Lease. A
// nil ctx is taken as context.Background(): a release is cleanup and is never
// refused (the delete is still bounded by the lease's session).
func (l *Lease) Release(ctx context.Context) error {
	if l == nil {
		return errNilLease()
	}
	if ctx == nil {
		ctx = context.Background()
	}
	l.relMu.Lock()
	defer l.relMu.Unlock()
	if l.relErr != nil {
		return *l.relErr
	}
	l.relErr = &noErr
	var err error
	if l.x == nil {
		err = l.releaseLight(ctx)
	} else {
		err = l.releaseMonitored(ctx)
	}
	if err != nil {
		kept := err // a copy: &err would put err on the heap at every Release
		l.relErr = &kept
	}
	return err
}

// noErr is the outcome of a Release without an error (see Lease.relErr).
var noErr error

// releaseLight is Release for a light lease.
func (l *Lease) releaseLight(ctx context.Context) error {
	mine := l.e.releasedErr()
	l.end(mine)
	// Unhooks the lease; if it had ended earlier, queues its delete.
	l.finish()
	if l.cause() != mine {
		return nil // ended earlier; finish (or the server, or a third party) removes the node
	}
	err := l.e.release(ctx, l)
	if ce := l.e.check(zap.DebugLevel, "released"); ce != nil {
		ce.Write(zap.String("node", l.Node()), zap.Error(err))
	}
	return err
}

// releaseMonitored is Release for a lease with a monitor goroutine.
func (l *Lease) releaseMonitored(ctx context.Context) error {
	x := l.x
	mine := l.e.releasedErr()
	claimed := l.claimMonitor()
	l.end(mine)
	l.settleMonitor(claimed, mine)
	close(x.released)
	if cause := l.cause(); cause != mine {
		if !l.e.cfg.keepNode || errors.Is(cause, ErrNodeDeleted) {
			return nil // ended earlier; the monitor (or the server, or a third party) removes the node
		}
		// WithKeepNodeUntilRelease: the node waited for us. The monitor
		// deletes a fixed node (below); a sequential one is ours to
		// delete unless Close's cleanup took it.
		if x.fixed == nil {
			var err error
			if x.delClaimed.CompareAndSwap(false, true) {
				err = l.e.release(ctx, l)
				if ce := l.e.check(zap.DebugLevel, "released an ended lease"); ce != nil {
					ce.Write(zap.String("node", l.Node()), zap.NamedError("ended", cause), zap.Error(err))
				}
			}
			return err
		}
	}
	if x.fixed != nil {
		// The monitor deletes a fixed node, conditionally (deleteOwned),
		// and keeps trying while the connection is down.
		select {
		case <-x.monitorDone:
		case <-ctx.Done():
		}
		x.fixedMu.Lock()
		defer x.fixedMu.Unlock()
		if x.fixedSet {
			return x.fixedErr
		}
		x.fixedGaveUp = true
		return nil
	}
	err := l.e.release(ctx, l)
	if ce := l.e.check(zap.DebugLevel, "released"); ce != nil {
		ce.Write(zap.String("node", l.Node()), zap.Error(err))
	}
	return err
}

// release deletes the node of a released lease l (see Lease.Release). With
// ctx already ended it sends nothing and queues the delete.
func (e *Engine) release(ctx context.Context, l *Lease) error {
	ep, node := l.ep, l.node
	if ep.Err() != nil || !up(e.zs) || ctx.Err() != nil {
		// See deleteNode for a lost epoch.
		e.zs.GuaranteedDelete(ep, node, -1)
		return nil
	}
	err := e.deleteRetry(ctx, l)
	switch {
	case err == nil, errors.Is(err, zksession.ErrClosed):
		return nil
	case errors.Is(err, zksession.ErrLost), zksession.IsConnectionError(err), ctx.Err() != nil:
		e.zs.GuaranteedDelete(ep, node, -1)
		return nil
	}
	return e.errf(err)
}

// deferMonitor arranges for the monitor of a sequential lease without a
// watch on its node to start only when there is something to do: after
// nodeWatchDelay (WithNodeWatch: to set the watch), when the lease context
// lctx ends (a suspension or loss: the node is to be deleted), or at Close.
// A lease released before any of these (the common short hold) then costs
// no goroutine at all: Release claims the start (claimMonitor, settleMonitor)
// and stops the triggers. Until then nothing but lctx, Close, Release and
// forget (a counted lease) can end the lease.
func (l *Lease) deferMonitor(lctx context.Context) {
	l.x.deferred = true
	l.x.deferMu.Lock()
	defer l.x.deferMu.Unlock()
	start := func() {
		if l.x.monitorClaimed.CompareAndSwap(false, true) {
			l.stopDeferred()
			l.watchNode(nil)
		}
	}
	if l.e.cfg.nodeWatch {
		l.x.delayTimer = time.AfterFunc(nodeWatchDelay, start)
	}
	l.x.stopOnEnd = context.AfterFunc(lctx, start)
	l.x.stopOnClose = context.AfterFunc(l.e.closing(), start)
}

// stopDeferred stops the triggers of a deferred monitor start that have not
// fired.
func (l *Lease) stopDeferred() {
	l.x.deferMu.Lock()
	defer l.x.deferMu.Unlock()
	if l.x.delayTimer != nil {
		l.x.delayTimer.Stop()
	}
	if l.x.stopOnEnd != nil {
		l.x.stopOnEnd()
	}
	if l.x.stopOnClose != nil {
		l.x.stopOnClose()
	}
}

// claimMonitor is Release's (or forget's) claim on a deferred monitor
// start, just before its cancel ends the lease: it reports whether the
// monitor had not started (nor will now); settleMonitor then finishes.
func (l *Lease) claimMonitor() bool {
	if !l.x.deferred || !l.x.monitorClaimed.CompareAndSwap(false, true) {
		return false // a monitor goroutine of its own, or started already
	}
	l.stopDeferred()
	return true
}

// settleMonitor follows the cancel that claimMonitor preceded: if that
// cancel (cause mine) ended the lease, no monitor is needed and its part in
// the Engine's wait group is done here; if the lease had ended for another
// reason first (a suspension or loss whose trigger had not started the
// monitor yet: a holder that releases as soon as it is told), the monitor
// starts now, as that trigger would have started it, and deletes the node.
func (l *Lease) settleMonitor(claimed bool, mine error) {
	if !claimed {
		return
	}
	if l.cause() == mine {
		close(l.x.monitorDone)
		l.e.wg.Done()
		return
	}
	go l.watchNode(nil)
}

// monitor is the goroutine of a held lease: started with the lease when
// the lease has a fixed node or inherits a watch on its node, otherwise
// only once there is something to do (deferMonitor). It ends the lease on Close
// and, with the node watch, when a third party deletes our node; it then
// deletes the node unless Release or the third party did. With
// WithKeepNodeUntilRelease it waits for Release or Close first, and leaves a
// sequential node to Release. self is a data watch on our node inherited
// from the wait, or nil.
func (l *Lease) monitor(self *zksession.Watch) {
	if l.e.cfg.nodeWatch && self == nil {
		// A fixed node: set the watch only after the delay (armDelay
		// returns early when the lease ends or at Close).
		l.armDelay()
	}
	l.watchNode(self)
}

// watchNode is the monitor once the delay has passed or the lease has
// ended (see monitor and deferMonitor): it ends the lease on Close and, with
// the node watch, when a third party deletes our node, and then deletes the
// node unless Release or the third party did.
//
//go:noinline
func (l *Lease) watchNode(self *zksession.Watch) {
	e := l.e
	defer func() {
		close(l.x.monitorDone)
		e.wg.Done()
	}()
	// Requests made here stop at the lease's end or at Close.
	mctx := endedCtx
	ectx := e.closing()
	lctx := l.Context()
	if lctx.Err() == nil && ectx.Err() == nil {
		ctx, mcancel := context.WithCancel(lctx)
		defer mcancel()
		stop := context.AfterFunc(ectx, mcancel)
		defer stop()
		mctx = ctx
	}
	for {
		if e.cfg.nodeWatch && self == nil && mctx.Err() == nil {
			// arm returns nil only after the lease ended or Close: the select
			// below then returns at once. It never waits on a nil watch.
			self = l.arm(mctx)
		}
		var selfEvents <-chan zk.Event
		if self != nil {
			selfEvents = self.Events()
		}
		select {
		case <-lctx.Done():
		case <-ectx.Done():
			l.end(e.closedErr())
		case ev, ok := <-selfEvents:
			ev = self.Event(ev, ok)
			self = nil
			switch ev.Type {
			case zk.EventNodeDeleted:
				l.lost()
			case zk.EventNotWatching:
				// The session expired (go-zookeeper invalidates watches).
				if err := l.ep.Err(); err != nil {
					l.end(err)
				} else {
					l.end(e.errf(zksession.ErrLost))
				}
			}
			continue
		}
		break
	}
	cause := l.cause()
	if errors.Is(cause, ErrNodeDeleted) {
		return // the node is gone
	}
	kept := e.cfg.keepNode && !errors.Is(cause, ErrReleased)
	if kept {
		// WithKeepNodeUntilRelease: the owner decides when the node goes
		// (a leader once its work has stopped); Close decides for it.
		if ce := e.check(zap.DebugLevel, "lease ended; the node stays until Release"); ce != nil {
			ce.Write(zap.String("node", l.Node()), zap.Error(cause))
		}
		select {
		case <-l.x.released:
		case <-ectx.Done():
		}
	}
	if l.x.fixed != nil {
		err := e.deleteOwnedPersist(l.ep, l.node, l.x.fixed)
		l.x.fixedMu.Lock()
		l.x.fixedErr, l.x.fixedSet = err, true
		// Release waits for the result (and returns it) when it ended the
		// lease or, with WithKeepNodeUntilRelease, was called after the
		// lease ended, unless its ctx ended first.
		reported := (errors.Is(cause, ErrReleased) || kept && closed(l.x.released)) && !l.x.fixedGaveUp
		l.x.fixedMu.Unlock()
		if err != nil && !reported {
			// Nobody else sees this failure (a background cleanup).
			e.log().Error("could not delete our lock node", zap.String("node", l.Node()), zap.Error(err))
		}
		return
	}
	switch {
	case errors.Is(cause, ErrReleased):
		return
	case kept && ectx.Err() == nil:
		return // Release was called: it deletes the node
	case kept && !l.x.delClaimed.CompareAndSwap(false, true):
		return // Release deletes it
	}
	if ce := e.check(zap.DebugLevel, "lease ended"); ce != nil {
		ce.Write(zap.String("node", l.Node()), zap.Error(cause))
	}
	e.deleteNode(context.Background(), l.ep, l.node)
}

// closed reports whether ch is closed.
func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// nodeWatchDelay is how long a held lease goes without a watch on its own
// node before the monitor sets one (WithNodeWatch): a short hold, the
// common case of a busy lock or semaphore, then costs neither the request
// nor the notification that its own delete would fire, and a third party's
// delete of the node still ends a longer hold at most this long (plus a
// round trip) after the acquire. A waiter that armed the watch while it was
// next in line passes it on, and the lease keeps it from the start.
const nodeWatchDelay = 100 * time.Millisecond

// armDelay waits nodeWatchDelay, or until the lease ends or the Engine
// closes.
func (l *Lease) armDelay() {
	t := time.NewTimer(nodeWatchDelay)
	defer t.Stop()
	select {
	case <-t.C:
	case <-l.Context().Done():
	case <-l.e.closing().Done():
	}
}

// endedCtx is a context that has ended: the monitor's requests context once
// the lease has ended or the Engine has closed.
var endedCtx = func() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}()

// Bounds of the pause between two attempts of arm when the session's retry
// policy gave up on connection errors.
const (
	armPauseMin = 50 * time.Millisecond
	armPauseMax = time.Second
)

// arm sets a data watch on our node (GetW: unlike an exists-watch it is not
// left registered when the node is already gone). It keeps trying until the
// watch is set, the lease ends or ctx ends: when the session's retry policy
// gives up on connection errors it waits for the connection on our epoch
// (Retry does) and tries again after a growing pause, so that a connection
// blip never leaves the lease unwatched. It returns nil only if ctx ended or
// the lease ended (then the caller's select sees it end).
func (l *Lease) arm(ctx context.Context) *zksession.Watch {
	d := armPauseMin
	sess := l.e.zs
	for {
		var w *zksession.Watch
		var data []byte
		err := sess.Retry(ctx, l.ep, func(*zk.Conn) error {
			var err error
			data, _, w, err = sess.GetW(l.node)
			return err
		})
		switch {
		case err == nil:
			if l.x.fixed != nil && !bytes.Equal(data, l.x.fixed) {
				// A fixed name: the node there now is another acquire's
				// (possibly of this process, on the same session); ours was
				// deleted. Its watch fires unread.
				l.lost()
				return nil
			}
			return w
		case errors.Is(err, zk.ErrNoNode):
			l.lost()
			return nil
		case ctx.Err() != nil:
			return nil
		case errors.Is(err, zksession.ErrLost), errors.Is(err, zksession.ErrClosed):
			if err2 := l.ep.Err(); err2 != nil {
				l.end(err2)
			} else {
				l.end(l.e.errf(err))
			}
			return nil
		case zksession.IsConnectionError(err):
			// The retry policy gave up for now; the next Retry waits for the
			// connection on our epoch again.
			if ce := l.e.check(zap.DebugLevel, "arming the node watch failed, trying again"); ce != nil {
				ce.Write(zap.String("node", l.Node()), zap.Duration("pause", d), zap.Error(err))
			}
			if pause(ctx, d) != nil {
				return nil
			}
			d = min(2*d, armPauseMax)
		default:
			// A permanent error (e.g. zk.ErrNoAuth on our own node): we cannot
			// watch; keep the lease and say so. A channel that never fires
			// (not nil: the caller would re-arm in a hot loop).
			l.e.log().Warn("cannot watch our own node", zap.String("node", l.Node()), zap.Error(err))
			return zksession.NeverFires()
		}
	}
}

// lost ends the lease because our node is gone: ErrNodeDeleted if our session is
// live (someone deleted it), else the session's error.
func (l *Lease) lost() {
	if err := l.ep.Err(); err != nil {
		l.end(err)
		return
	}
	l.end(l.e.errf(ErrNodeDeleted))
}
