package engine

// An acquire: the attempt loop, the decision on each snapshot, and the
// handoff decided on a deletion notice without a read.

import (
	"context"
	"fmt"
	"time"

	"github.com/zkrecipes/zkrecipes/internal/zksession"
)

// Acquire blocks until the recipe is held according to d, and returns the
// lease. data is stored in our node (participant id). It blocks on the
// connection (while the session is suspended), on the predecessor's deletion
// and on ctx, the only bound. On every failure our node is deleted (detached,
// bounded) before it returns. Errors: ctx's error (matching
// context.Canceled/DeadlineExceeded; a lock won just as ctx ended is released
// first), ErrClosed after Close, zksession.ErrLost or zksession.ErrClosed when the
// session ended while waiting (a wait is never carried across a session
// loss), ErrNodeDeleted when our node was deleted by someone else while we
// waited, ErrBadDriver, and ZooKeeper errors (zk.ErrNoAuth, ...). Safe for
// concurrent use.
func (e *Engine) Acquire(ctx context.Context, d *Driver, data []byte) (*Lease, error) {
	return e.acquire(ctx, d, data, false)
}

// TryAcquire is Acquire without the wait: it creates our node, reads the
// directory once and returns the lease if d says it is held; otherwise it
// deletes the node and returns an error matching ErrBusy. ctx bounds
// the requests (it still waits for a suspended connection within ctx).
func (e *Engine) TryAcquire(ctx context.Context, d *Driver, data []byte) (*Lease, error) {
	return e.acquire(ctx, d, data, true)
}

func (e *Engine) acquire(ctx context.Context, d *Driver, data []byte, try bool) (*Lease, error) {
	if ctx == nil {
		return nil, e.errf(fmt.Errorf("%w: nil context", ErrBadArgument))
	}
	if err := checkDriver(d); err != nil {
		return nil, e.errf(err)
	}
	if e.hooks != nil {
		kind := d.Kind
		if kind == "" {
			kind = e.cfg.kind
		}
		if octx, o := e.ObserveAcquire(ctx, kind, 0); o != nil {
			l, err := e.acquireAs(octx, d, data, try, o)
			o.Done(err, l)
			return l, err
		}
	}
	return e.acquireAs(ctx, d, data, try, nil)
}

// acquireAs is acquire, observed by o (nil: not observed).
func (e *Engine) acquireAs(ctx context.Context, d *Driver, data []byte, try bool, o *Observation) (*Lease, error) {
	a := &attempt{e: e, d: d, data: data, user: ctx, try: try, obs: o}
	if err := e.begin(ctx, &a.scope); err != nil {
		return nil, err
	}
	defer e.end(&a.scope)
	return a.run()
}

// attempt is one acquire in progress.
type attempt struct {
	scope // ctx: the user's ctx merged with Close
	e     *Engine
	d     *Driver
	data  []byte
	user  context.Context

	uuid   string
	prefix string // ProtectedPrefix(uuid), built once (see protectedPrefix)
	ep     *zksession.Epoch
	lctx   context.Context // lease context captured before the deciding read
	node   string          // full path of our node once known
	name   string          // its name
	seq    int64
	czxid  int64  // 0 until known
	fixed  string // full path of the fixed node (fixed-node locks only)

	self *zksession.Watch // data watch on our own node, if armed
	kids []string         // snapshot to decide on, nil to read again
	prev []Child          // the last snapshot decided on, up to ours (see keepPrefix)
	gone string           // the watched child, reported deleted by its watch

	// Looking ahead (see Driver.LookAhead): while we watch the child two places
	// before ours (looking), pred is our predecessor; once that child is
	// gone, the read that follows carries a data watch on pred along (spec).
	pred string
	spec *specWatch

	cop        createOp        // the create in flight or last sent (see create)
	lop        listOp          // the first read pipelined with it (see createAndList)
	lateCreate <-chan struct{} // see create
	obs        *Observation    // the hooks' view of this acquire, nil if none

	// (The flags last, packed: a thousand waiters are a thousand attempts.)
	try     bool
	ghosts  bool // a create failed at connection level: a ghost may exist
	quick   bool // gone went within nodeWatchDelay of the wait, unwatched (see wait)
	looking bool // the child watched is two places ahead (see pred)
}

// specWatch is a data watch on the child name, sent beside a read of the
// children before the read's decision says whether it is the one to watch.
type specWatch struct {
	name string
	p    *zksession.Pending[*zksession.Watch]
}

func (a *attempt) run() (*Lease, error) {
	e := a.e
	// Our node's create path (see newNodeBase), with the protected prefix and
	// the UUID in it: one string (ownCreate moves both to the node's name).
	seq, _ := anchorSeq(a.d) // checked by checkDriver
	base, at := newNodeBase(e.path, a.d.Marker, seq)
	a.prefix = base[at : at+len(protectedMarker)+uuidLen+1]
	a.uuid = a.prefix[len(protectedMarker) : len(a.prefix)-1]
	if err := a.connect(); err != nil {
		return nil, a.fail(err)
	}
	// The create finds out whether the directory exists (createAndList),
	// except with the multi, whose setData must not overwrite a directory's
	// data (ensureDir reads it first).
	if e.cfg.create == createMulti && !e.noMulti.Load() {
		if err := e.ensureDir(a.ctx); err != nil {
			return nil, a.fail(err)
		}
	}
	if err := a.createAndList(base); err != nil {
		return nil, a.fail(err)
	}
	for {
		if gone := a.gone; gone != "" {
			a.gone = ""
			if a.heldWithout(gone) {
				l, retry, err := a.won()
				if !retry {
					return l, err
				}
			}
			if a.looking && a.pred != "" {
				// In a queue left in order our predecessor holds now, and
				// the read below will show it first: watch it already.
				a.spec = &specWatch{name: a.pred}
			}
		}
		if a.kids == nil {
			if err := a.readChildren(); err != nil {
				return nil, a.fail(err)
			}
		}
		self, held, watch, err := a.decide()
		if self < 0 {
			if err := a.ep.Err(); err != nil {
				return nil, a.fail(err)
			}
			a.node = "" // nothing to delete
			return nil, a.fail(ErrNodeDeleted)
		}
		if err != nil {
			return nil, a.fail(err)
		}
		if held {
			a.spec = nil
			l, retry, err := a.won()
			if !retry {
				return l, err
			}
			continue
		}
		if a.try {
			return nil, a.fail(ErrBusy)
		}
		if err := a.wait(watch); err != nil {
			return nil, a.fail(err)
		}
	}
}

// decide sorts the snapshot read last (a.kids, then cleared) and asks the
// driver: self is our index in it (-1: our node is missing), held and watch
// are the driver's answer. The snapshot is sorted into a pooled array that
// goes back to the pool before decide returns, so that a waiter keeps none
// (a thousand waiters on one lock each holding an array of a thousand
// children cost 70 KB of heap per waiter): keepPrefix copies what it keeps,
// drivers only read it, and watch is a name, not a part of the array.
func (a *attempt) decide() (self int, held bool, watch string, err error) {
	buf := childBufs.Get().(*[]Child)
	defer func() {
		clear((*buf)[:cap(*buf)]) // let the names go
		childBufs.Put(buf)
	}()
	var sorted []Child
	if a.d.Monotone {
		// A monotone driver decides on the children up to ours.
		sorted = sortPrefixInto(*buf, a.kids, a.d.Markers, a.name)
	} else {
		sorted = sortChildrenInto(*buf, a.kids, a.d.Markers)
	}
	*buf = sorted
	a.kids = nil
	self = indexOf(sorted, a.name)
	if self < 0 {
		a.prev = nil
		return self, false, "", nil
	}
	held, watch, err = a.d.Decide(sorted, self)
	if held && err == nil {
		// Nothing reads the prefix before the next decision (a grant, or
		// a fresh read after won's retry): spare the copy.
		a.prev = nil
	} else {
		a.keepPrefix(sorted, self)
	}
	a.looking, a.pred = false, ""
	if err == nil && !held && self >= 2 && a.e.cfg.nodeWatch && watch == sorted[self-1].Name && looksAhead(a.d) {
		a.looking, a.pred = true, watch
		watch = sorted[self-2].Name
	}
	return self, held, watch, err
}

// maxPrefix bounds the snapshot prefix a waiter keeps for heldWithout: a
// waiter further back cannot take over on one deletion anyway, and keeping
// whole snapshots would cost every waiter memory in the queue's length.
const maxPrefix = 16

// keepPrefix keeps a copy of the children sorted up to and including ours, if
// they are few (see maxPrefix), for heldWithout.
func (a *attempt) keepPrefix(sorted []Child, self int) {
	if self < 0 || self >= maxPrefix {
		a.prev = nil
		return
	}
	a.prev = append(a.prev[:0], sorted[:self+1]...)
}

// heldWithout reports whether the driver holds on the last snapshot without
// the child gone, which the server told us (NodeDeleted on our watch) was
// deleted. Children that sort before ours were all created before ours, so
// they were all in that snapshot (read after our create); since then they
// can only have disappeared. For a Monotone driver, held on the snapshot
// minus gone is therefore held on the current directory too, and the handoff
// needs no children read: it costs the predecessor's delete and the
// notification only. The lease context captured before that snapshot's read
// must still be live (no suspension since), as for a read, and a third
// party's delete of our node must not go unnoticed: either our own node is
// watched (WithNodeWatch) with no event since, or the notice came within
// nodeWatchDelay of the start of the wait (quick, see wait), and the lease
// then watches the node from nodeWatchDelay after the acquire on, the bound
// WithNodeWatch gives for a delete at any time. A driver that trusts the
// handoff (TrustHandoff, see counted.go) holds on the notice alone.
func (a *attempt) heldWithout(gone string) bool {
	if a.d.TrustHandoff && a.lctx.Err() == nil && a.ep.Err() == nil {
		return true
	}
	quick := a.quick
	a.quick = false
	if a.self == nil && !quick || a.lctx.Err() != nil || a.ep.Err() != nil {
		// Without a live watch on our own node, after a wait longer than
		// nodeWatchDelay, we could not tell that a third party deleted it:
		// read the children instead.
		return false
	}
	return a.holdsWithout(gone)
}

// watchesFirst reports whether watch is the first child of the last
// snapshot (we wait directly behind the holder).
func (a *attempt) watchesFirst(watch string) bool {
	return len(a.prev) > 0 && a.prev[0].Name == watch
}

// holdsWithout reports whether a Monotone driver holds on the last snapshot
// (its prefix up to ours, see keepPrefix) without the child gone: whether
// gone's deletion alone would hand us the recipe. It reads nothing.
func (a *attempt) holdsWithout(gone string) bool {
	if !a.d.Monotone || a.prev == nil || !settled(a.d, a.prev) {
		return false
	}
	rest := make([]Child, 0, len(a.prev))
	for _, c := range a.prev {
		if c.Name != gone {
			rest = append(rest, c)
		}
	}
	self := indexOf(rest, a.name)
	if self < 0 {
		return false
	}
	held, _, err := a.d.Decide(rest, self)
	return err == nil && held
}

// won finishes an attempt that the driver says holds: it grants the lease,
// or reports retry (decide again after a fresh read: the connection was
// suspended since the lease context was captured), or fails (ctx ended just
// as we won: the node is released).
func (a *attempt) won() (l *Lease, retry bool, err error) {
	if a.lctx.Err() != nil || a.ep.Err() != nil {
		// Suspended (or lost) since the lease context was captured: never
		// grant now; wait for the connection and decide again.
		return nil, true, nil
	}
	if err := a.ctx.Err(); err != nil {
		// Won just as ctx ended (or Close): release, report ctx.
		return nil, false, a.fail(err)
	}
	if a.czxid == 0 {
		// The watch, for a lease with a monitor to inherit; a light lease
		// gets its own from the arm queue (see grant).
		if err := a.statSelf(a.e.cfg.nodeWatch && (a.fixed != "" || a.e.cfg.keepNode)); err != nil {
			return nil, false, a.fail(err)
		}
		if a.lctx.Err() != nil || a.ep.Err() != nil {
			return nil, true, nil
		}
	}
	l, err = a.e.grant(a)
	return l, false, err
}

// connect waits for a connected, live epoch and takes its lease context at
// the same instant (zksession.WaitLease), so the two agree.
func (a *attempt) connect() error {
	ep, lctx, err := a.e.zs.WaitLease(a.ctx)
	if err != nil {
		return err
	}
	a.ep, a.lctx = ep, lctx
	return nil
}

// pause waits d or until ctx ends (a backoff, not synchronisation).
func pause(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// recapture captures a fresh lease context before a deciding read; while the
// connection is down it waits for it to come back on our epoch (WaitLease
// takes the epoch and its lease context together, so nothing polls).
func (a *attempt) recapture() error {
	if err := a.ep.Err(); err != nil {
		return err
	}
	if a.lctx != nil && a.lctx.Err() == nil {
		// The lease context we hold has not ended, so the connection has
		// not been suspended (nor the epoch lost) since we captured it: it
		// is still the session's current one and a fresh capture would
		// return it. This is the handoff path (a waiter woken by its
		// predecessor's delete); skipping WaitLease saves a context, an
		// AfterFunc and the session lock on it. A suspension from now on
		// cancels it, and won checks it before granting.
		return nil
	}
	// Wait for the connection, but not past the end of our epoch.
	wctx, cancel := context.WithCancel(a.ctx)
	defer cancel()
	stop := context.AfterFunc(a.ep.Context(), cancel)
	defer stop()
	ep, lctx, err := a.e.zs.WaitLease(wctx)
	if err2 := a.ep.Err(); err2 != nil {
		return err2
	}
	if err != nil {
		return err
	}
	if ep != a.ep {
		// Epochs change only when one ends, so ours is over (its Err may
		// lag behind the new epoch by an instant).
		return fmt.Errorf("%w: epoch changed while waiting", zksession.ErrLost)
	}
	a.lctx = lctx
	return nil
}
