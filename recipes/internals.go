package recipes

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"
	"go.uber.org/zap"

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
	sess     *session.Session
	path     string // full server path of the recipe directory
	userPath string // the path as the caller gave it (for errors)
	cfg      config
	lg       *zap.Logger

	ctx    context.Context // canceled by Close
	cancel context.CancelCauseFunc
	wg     sync.WaitGroup // acquires in progress, lease monitors, helper goroutines

	mu       sync.Mutex
	closed   bool
	scopes   *scope                       // acquires in progress (see begin)
	cleanups map[<-chan struct{}]struct{} // deletes queued by failed acquires, not yet seen done

	closeOnce sync.Once
	dirReady  atomic.Bool // the directory was seen to exist (cache; redone on ErrNoNode)
	noMulti   atomic.Bool // create with a plain create (see createNode)
}

// NewEngine returns the engine for the recipe directory path (a recipe
// path, without the session's namespace; Path returns the full server path).
// It validates its arguments and does no I/O.
func NewEngine(sess *session.Session, path string, opts ...Option) (*Engine, error) {
	cfg := defaultConfig()
	for _, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("%w: nil option", ErrBadOption)
		}
		if err := o(&cfg); err != nil {
			return nil, err
		}
	}
	if sess == nil {
		return nil, NewError(cfg.name, path, ErrNilSession)
	}
	full, err := sess.Path(path)
	if err != nil {
		return nil, NewError(cfg.name, path, err)
	}
	lg := cfg.lg
	if lg == nil {
		lg = sess.Logger().Named(cfg.name)
	}
	lg = lg.With(zap.String("path", full))
	in := &Engine{sess: sess, path: full, userPath: path, cfg: cfg, lg: lg}
	in.noMulti.Store(cfg.create == createPlain)
	in.ctx, in.cancel = context.WithCancelCause(context.Background())
	return in, nil
}

// Path returns the full server path of the recipe directory (namespace
// included).
func (in *Engine) Path() string { return in.path }

// Session returns the session the engine uses.
func (in *Engine) Session() *session.Session { return in.sess }

// NodeWatch reports whether held leases watch their own node (WithNodeWatch).
func (in *Engine) NodeWatch() bool { return in.cfg.nodeWatch }

// Close ends every lease of this Engine (cause matching ErrClosed; their
// nodes are deleted), makes waiting acquires return ErrClosed, and returns
// once every goroutine the engine started has exited and, while the
// connection is up, the nodes of its leases and of every acquire that failed
// or was canceled are deleted. Cleanup is bounded by the cleanup timeout;
// what cannot be deleted then is left to the session's guaranteed-delete
// queue. Idempotent; later
// calls return ErrClosed-matching errors. Returns nil.
func (in *Engine) Close() error {
	return in.CloseWithin(context.Background())
}

// CloseWithin is Close for a call bounded by ctx (leader.Run closes its
// engine on its way out): it waits for the deletes of failed acquires only
// while ctx lives, and for a short grace (the one every acquire allows its
// cleanup) once ctx has ended, besides the cleanup timeout; what is left
// the session's guaranteed-delete queue finishes. Idempotent with Close.
func (in *Engine) CloseWithin(ctx context.Context) error {
	in.closeOnce.Do(func() {
		in.mu.Lock()
		in.closed = true
		var cancels []context.CancelCauseFunc
		for s := in.scopes; s != nil; s = s.next {
			cancels = append(cancels, s.cancel)
		}
		in.mu.Unlock()
		in.cancel(in.closedErr())
		for _, cancel := range cancels {
			cancel(in.closedErr())
		}
		in.wg.Wait()
		in.awaitCleanups(ctx)
	})
	return nil
}

// trackCleanup remembers a delete queued by a failed acquire, which may
// return before the delete is done (its ctx bounds it), so that Close can
// wait for it. Deletes seen done are forgotten here, which bounds the set.
func (in *Engine) trackCleanup(done <-chan struct{}) {
	in.mu.Lock()
	defer in.mu.Unlock()
	for ch := range in.cleanups {
		select {
		case <-ch:
			delete(in.cleanups, ch)
		default:
		}
	}
	select {
	case <-done:
		return
	default:
	}
	if in.cleanups == nil {
		in.cleanups = make(map[<-chan struct{}]struct{})
	}
	in.cleanups[done] = struct{}{}
}

// awaitCleanups waits, at Close, for the deletes that failed acquires
// queued: while the connection is up and within the cleanup timeout in all,
// so that the nodes of canceled waiters are gone when Close returns on a
// healthy connection (what is left the session's queue finishes); and within
// ctx, or a short grace after it ended (see awaitCleanup).
func (in *Engine) awaitCleanups(user context.Context) {
	in.mu.Lock()
	pending := make([]<-chan struct{}, 0, len(in.cleanups))
	for ch := range in.cleanups {
		pending = append(pending, ch)
	}
	in.cleanups = nil
	in.mu.Unlock()
	if len(pending) == 0 {
		return
	}
	w := in.newCleanupWait(user)
	defer w.stop()
	for _, ch := range pending {
		if !w.await(ch) {
			return
		}
	}
}

// closedErr returns the error for use after Close: it matches ErrClosed
// (session.ErrClosed).
func (in *Engine) closedErr() error { return in.errf(errClosed) }

// errf wraps err with the recipe name and the path as the caller gave it.
func (in *Engine) errf(err error) error { return NewError(in.cfg.name, in.userPath, err) }

// enter registers an operation for Close to wait for; false after Close.
func (in *Engine) enter() bool {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.closed {
		return false
	}
	in.wg.Add(1)
	return true
}

// Acquire blocks until the recipe is held according to d, and returns the
// lease. data is stored in our node (participant id). It blocks on the
// connection (while the session is suspended), on the predecessor's deletion
// and on ctx, the only bound. On every failure our node is deleted (detached,
// bounded) before it returns. Errors: ctx's error (matching
// context.Canceled/DeadlineExceeded; a lock won just as ctx ended is released
// first), ErrClosed after Close, session.ErrLost or session.ErrClosed when the
// session ended while waiting (a wait is never carried across a session
// loss), ErrLockLost when our node was deleted by someone else while we
// waited, ErrBadDriver, and ZooKeeper errors (zk.ErrNoAuth, ...). Safe for
// concurrent use.
func (in *Engine) Acquire(ctx context.Context, d Driver, data []byte) (*Lease, error) {
	return in.acquire(ctx, d, data, false)
}

// TryAcquire is Acquire without the wait: it creates our node, reads the
// directory once and returns the lease if d says it is held; otherwise it
// deletes the node and returns an error matching ErrWouldBlock. ctx bounds
// the requests (it still waits for a suspended connection within ctx).
func (in *Engine) TryAcquire(ctx context.Context, d Driver, data []byte) (*Lease, error) {
	return in.acquire(ctx, d, data, true)
}

func (in *Engine) acquire(ctx context.Context, d Driver, data []byte, try bool) (*Lease, error) {
	if ctx == nil {
		return nil, in.errf(fmt.Errorf("%w: nil context", ErrBadOption))
	}
	if err := checkDriver(d); err != nil {
		return nil, in.errf(err)
	}
	a := &attempt{in: in, d: d, data: data, user: ctx, try: try}
	if err := in.begin(ctx, &a.scope); err != nil {
		return nil, err
	}
	defer in.end(&a.scope)
	return a.run()
}

// scope is the context of an acquire in progress: the caller's ctx, which
// Close also cancels (with the closed error). The Engine links the scopes in
// progress, which costs less than a callback on its own context each (a
// thousand waiting acquires are a thousand scopes).
type scope struct {
	ctx        context.Context // the caller's ctx, also canceled by Close
	cancel     context.CancelCauseFunc
	prev, next *scope
}

// begin registers an acquire, s, with the Engine: Close waits for it and
// cancels s.ctx, which begin derives from ctx. end must be called when the
// acquire returns. It fails once the Engine is closed.
func (in *Engine) begin(ctx context.Context, s *scope) error {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.closed {
		return in.closedErr()
	}
	in.wg.Add(1)
	s.ctx, s.cancel = context.WithCancelCause(ctx)
	s.prev, s.next = nil, in.scopes
	if in.scopes != nil {
		in.scopes.prev = s
	}
	in.scopes = s
	return nil
}

// end unregisters the acquire s and releases its context.
func (in *Engine) end(s *scope) {
	in.mu.Lock()
	if s.prev != nil {
		s.prev.next = s.next
	} else {
		in.scopes = s.next
	}
	if s.next != nil {
		s.next.prev = s.prev
	}
	s.prev, s.next = nil, nil
	in.mu.Unlock()
	s.cancel(nil)
	in.wg.Done()
}

// attempt is one acquire in progress.
type attempt struct {
	scope // ctx: the user's ctx merged with Close
	in    *Engine
	d     Driver
	data  []byte
	user  context.Context

	uuid  string
	ep    *session.Epoch
	lctx  context.Context // lease context captured before the deciding read
	node  string          // full path of our node once known
	name  string          // its name
	seq   int64
	czxid int64  // 0 until known
	fixed string // full path of the fixed node (fixed-node locks only)

	self *session.Watch // data watch on our own node, if armed
	kids []string       // snapshot to decide on, nil to read again
	prev []Child        // the last snapshot decided on, up to ours (see keepPrefix)
	gone string         // the watched child, reported deleted by its watch

	// Looking ahead (see LooksAhead): while we watch the child two places
	// before ours (looking), pred is our predecessor; once that child is
	// gone, the read that follows carries a data watch on pred along (spec).
	pred string
	spec *specWatch

	lateCreate <-chan struct{} // see create

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
	p    *session.Pending[*session.Watch]
}

func (a *attempt) run() (*Lease, error) {
	in := a.in
	a.uuid = NewUUID()
	if err := a.connect(); err != nil {
		return nil, a.fail(err)
	}
	if err := in.ensureDir(a.ctx); err != nil {
		return nil, a.fail(err)
	}
	if err := a.createAndList(); err != nil {
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
			return nil, a.fail(ErrLockLost)
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
			return nil, a.fail(ErrWouldBlock)
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
	if monotone(a.d) {
		// A monotone driver decides on the children up to ours.
		sorted = sortPrefixInto(*buf, a.kids, a.d.Markers(), a.name)
	} else {
		sorted = sortChildrenInto(*buf, a.kids, a.d.Markers())
	}
	*buf = sorted
	a.kids = nil
	self = indexOf(sorted, a.name)
	a.keepPrefix(sorted, self)
	if self < 0 {
		return self, false, "", nil
	}
	held, watch, err = a.d.Decide(sorted, self)
	a.looking, a.pred = false, ""
	if err == nil && !held && self >= 2 && a.in.cfg.nodeWatch && watch == sorted[self-1].Name && looksAhead(a.d) {
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
	if trustsHandoff(a.d) && a.lctx.Err() == nil && a.ep.Err() == nil {
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

// monotone reports whether d is a Monotone driver.
func monotone(d Driver) bool {
	m, ok := d.(Monotone)
	return ok && m.Monotone()
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
	if !monotone(a.d) || a.prev == nil || !settled(a.d, a.prev) {
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
		if err := a.statSelf(a.in.cfg.nodeWatch); err != nil {
			return nil, false, a.fail(err)
		}
		if a.lctx.Err() != nil || a.ep.Err() != nil {
			return nil, true, nil
		}
	}
	l, err = a.in.grant(a)
	return l, false, err
}

// connect waits for a connected, live epoch and takes its lease context at
// the same instant (session.WaitLease), so the two agree.
func (a *attempt) connect() error {
	ep, lctx, err := a.in.sess.Toolkit().WaitLease(a.ctx)
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
	ep, lctx, err := a.in.sess.Toolkit().WaitLease(wctx)
	if e := a.ep.Err(); e != nil {
		return e
	}
	if err != nil {
		return err
	}
	if ep != a.ep {
		// Epochs change only when one ends, so ours is over (its Err may
		// lag behind the new epoch by an instant).
		return fmt.Errorf("%w: epoch changed while waiting", session.ErrLost)
	}
	a.lctx = lctx
	return nil
}

// ensureDir makes sure the recipe directory exists (container nodes), once.
func (in *Engine) ensureDir(ctx context.Context) error {
	if in.dirReady.Load() {
		return nil
	}
	ep, err := in.sess.WaitConnected(ctx)
	if err != nil {
		return err
	}
	var ok bool
	var st *zk.Stat
	err = in.sess.Toolkit().Retry(ctx, ep, func(c *zk.Conn) error {
		var err error
		ok, st, err = c.Exists(in.path)
		return err
	})
	if err != nil && !errors.Is(err, session.ErrLost) {
		return err
	}
	if ok {
		in.checkDirData(st)
	} else if err := in.sess.Toolkit().EnsureContainers(ctx, in.path); err != nil {
		return err
	}
	in.dirReady.Store(true)
	return nil
}

// checkDirData turns the directory's setData off (WithMultiCreate(true),
// placed and counted nodes) for a directory that holds data (the setData
// would overwrite it).
func (in *Engine) checkDirData(st *zk.Stat) {
	if st != nil && st.DataLength > 0 && !in.noMulti.Swap(true) {
		in.lg.Info("the recipe directory holds data: nodes are created without a setData on it")
	}
}

// createNode creates a contender node and returns its path and, when it can
// without another request, its czxid (else 0).
//
// go-zookeeper v1.0.4 has no create2 and returns only the path of a create;
// the session reads the czxid from the create's reply header
// (session.Toolkit.CreatedZxid), so a plain create costs no extra request.
// With WithMultiCreate(true) the create is sent as a multi with a setData of
// empty data on the recipe directory (whose data is empty: engines and
// Curator store nothing there): one transaction, so the directory's new
// mzxid, in the setData's Stat, is our node's czxid. If the directory holds
// data, or the setData is refused (an ACL without WRITE on the directory),
// that mode falls back to a plain create.
func (in *Engine) createNode(conn *zk.Conn, p string, data []byte, flags int32) (string, int64, error) {
	acl := in.sess.ACL()
	if in.cfg.create == createMulti && !in.noMulti.Load() {
		ops := []any{
			&zk.CreateRequest{Path: p, Data: data, Acl: acl, Flags: flags},
			&zk.SetDataRequest{Path: in.path, Data: nil, Version: -1},
		}
		res, err := conn.Multi(ops...)
		if err == nil && len(res) == 2 && res[1].Stat != nil {
			return res[0].String, res[1].Stat.Mzxid, nil
		}
		if len(res) == 2 && errors.Is(res[1].Error, zk.ErrNoAuth) && !errors.Is(res[0].Error, zk.ErrNoAuth) {
			if !in.noMulti.Swap(true) {
				in.lg.Info("no WRITE permission on the recipe directory: creating nodes with a plain create")
			}
		} else {
			return "", 0, refusedMulti(ops, res, err)
		}
	}
	path, err := conn.Create(p, data, flags, acl)
	if err != nil {
		return "", 0, session.Refused("create", p, err)
	}
	return path, in.sess.Toolkit().CreatedZxid(p), nil
}

// listResult is the pipelined children read of createAndList.
type listResult struct {
	kids []string
	stat *zk.Stat
}

// createAndList creates our protected node, recovering from lost replies,
// and, on the first try, reads the directory in parallel: go-zookeeper sends
// requests in order on one connection and the server answers a session's
// requests in order, so a children list read after the create already
// contains our node (recognised by our UUID) and the first decision costs no
// extra round trip.
func (a *attempt) createAndList() error {
	in := a.in
	base := a.nodeBase()
	pipelined := true
	for tries := 0; ; tries++ {
		if tries > 10 {
			return fmt.Errorf("create %s: giving up after %d tries", base, tries)
		}
		if err := a.ep.Err(); err != nil {
			return err
		}
		if err := a.ctx.Err(); err != nil {
			return err
		}
		var listed *session.Pending[listResult]
		if pipelined {
			pipelined = false
			listed, _ = session.Start(in.sess, func(c *zk.Conn) (listResult, error) {
				// Let the create be queued first; if this read still wins,
				// our node is missing from it and we read again.
				runtime.Gosched()
				kids, st, err := c.Children(in.path)
				return listResult{kids: kids, stat: st}, err
			}, nil)
		}
		created, czxid, err := a.create(base)
		switch {
		case err == nil:
			if e := a.ownCreate(created); e != nil {
				return e
			}
			a.czxid = czxid
			if listed != nil {
				select {
				case <-listed.Done():
					if r, err := listed.Result(); err == nil && contains(r.kids, a.name) {
						a.kids = r.kids
						in.checkDirData(r.stat)
					}
				case <-a.ctx.Done():
					// Leave the read behind: the next step fails on ctx.
					listed.Abandon()
				}
			}
			return nil
		case errors.Is(err, zk.ErrNoNode):
			// The directory is gone (a container the server reaped while
			// the lock was idle): create it again without asking first
			// whether it exists (ensureDir's read).
			in.dirReady.Store(false)
			if e := in.sess.Toolkit().EnsureContainers(a.ctx, in.path); e != nil {
				return e
			}
			in.dirReady.Store(true)
		case session.IsConnectionError(err):
			a.ghosts = true
			found, e := a.findGhost()
			if e != nil {
				return e
			}
			if found {
				return nil
			}
		case errors.Is(err, zk.ErrSessionExpired):
			return errSessionLost(err)
		default:
			return err
		}
	}
}

// created is the outcome of createNode.
type created struct {
	path  string
	czxid int64
}

// create sends our protected create and waits for it within the attempt's
// ctx, the only bound (session.Call). If ctx ends first, the request goes on
// without us, and once it has completed the session's queue sweeps the
// directory for our UUID, whatever the outcome: a late success leaves a node
// nobody waits on, and a connection error may have left a ghost. The attempt
// then keeps a channel (lateCreate) closed once that is settled, which fail
// waits for as for its own deletes, and so does Close: a node that a Close
// raced with the create's reply is gone when Close returns.
func (a *attempt) create(base string) (string, int64, error) {
	in := a.in
	ep, prefix := a.ep, ProtectedPrefix(a.uuid)
	settled := make(chan struct{})
	r, err := session.Call(a.ctx, in.sess, func(c *zk.Conn) (created, error) {
		p, z, err := a.createOn(c, base)
		return created{p, z}, err
	}, func(_ created, err error) {
		if err == nil || session.IsConnectionError(err) || errors.Is(err, zk.ErrSessionExpired) {
			swept := in.sess.Toolkit().GuaranteedSweep(ep, in.path, prefix)
			go func() {
				<-swept
				close(settled)
			}()
			return
		}
		close(settled)
	})
	if ce := a.ctx.Err(); ce != nil && err == ce {
		// Call left the request behind (an answer it had would have been
		// returned instead): the late function runs.
		a.lateCreate = settled
	}
	return r.path, r.czxid, err
}

// ownCreate checks that a successful create ran on our epoch's session:
// requests queued while disconnected may be sent on a NEW session after the
// old one expired (see HAZARDS; answeredOnOurSession). Otherwise the node is
// deleted and the attempt fails.
func (a *attempt) ownCreate(created string) error {
	name := created[strings.LastIndexByte(created, '/')+1:]
	c, ok := parseChild(name, []string{a.d.Marker()})
	if !ok {
		return fmt.Errorf("create returned unexpected name %q", created)
	}
	if !a.answeredOnOurSession() || a.ep.Err() != nil {
		// It landed on another session: the sweep (see fail) deletes it,
		// on whichever session is current.
		a.ghosts = true
		return errSessionChanged(a.ep)
	}
	a.node, a.name, a.seq = created, name, c.Seq
	if u := len(protectedMarker); len(name) > u+len(a.uuid) && name[:u] == protectedMarker &&
		name[u:u+len(a.uuid)] == a.uuid && name[u+len(a.uuid)] == '-' {
		// Share the node name's copy of the UUID: a waiter keeps less.
		a.uuid = name[u : u+len(a.uuid)]
	}
	return nil
}

// answeredOnOurSession reports, right after a reply, whether it came on the
// attempt's session: the connection's session id can only move forward, so
// if it still equals the epoch's after the reply, the request ran on it.
func (a *attempt) answeredOnOurSession() bool {
	return a.in.sess.Conn().SessionID() == a.ep.SessionID()
}

// findGhost looks for our node after a create whose outcome is unknown. It
// adopts it only if its ephemeralOwner is our (live) session; a node of ours
// owned by another session is deleted. It reports whether we now have a node.
func (a *attempt) findGhost() (bool, error) {
	in := a.in
	prefix := ProtectedPrefix(a.uuid)
	var kids []string
	err := in.sess.Toolkit().Retry(a.ctx, a.ep, func(c *zk.Conn) error {
		var err error
		kids, _, err = c.Children(in.path)
		return session.Refused("list", in.path, err)
	})
	if errors.Is(err, zk.ErrNoNode) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	for _, k := range kids {
		if !strings.HasPrefix(k, prefix) {
			continue
		}
		p := in.path + "/" + k
		var ok bool
		var ks *zk.Stat
		err := in.sess.Toolkit().Retry(a.ctx, a.ep, func(c *zk.Conn) error {
			var err error
			ok, ks, err = c.Exists(p)
			return err
		})
		if err != nil {
			return false, err
		}
		if !ok {
			continue
		}
		if ks.EphemeralOwner == a.ep.SessionID() && a.ep.Err() == nil {
			c, parsed := parseChild(k, []string{a.d.Marker()})
			if !parsed {
				continue
			}
			a.node, a.name, a.seq, a.czxid = p, k, c.Seq, ks.Czxid
			a.kids = kids
			in.lg.Debug("adopted node after a lost create reply", zap.String("node", k))
			return true, nil
		}
		in.lg.Warn("deleting our node created on another session", zap.String("node", k),
			zap.String("owner", fmt.Sprintf("0x%x", ks.EphemeralOwner)))
		err = in.sess.Toolkit().Retry(a.ctx, a.ep, func(c *zk.Conn) error {
			err := c.Delete(p, ks.Version)
			if errors.Is(err, zk.ErrNoNode) {
				return nil
			}
			return session.Refused("delete", p, err)
		})
		if err != nil {
			return false, err
		}
	}
	// Not found: the create never reached the server. (Had it reached it,
	// the read would show it: the server orders a session's requests, across
	// its connections, and closes the old connection when the session
	// reconnects.)
	return false, nil
}

func contains(names []string, name string) bool {
	for _, n := range names {
		if n == name {
			return true
		}
	}
	return false
}

// readChildren captures the lease context, then reads the directory; a
// speculative watch (a.spec) is sent right before the read.
func (a *attempt) readChildren() error {
	if err := a.recapture(); err != nil {
		return err
	}
	in := a.in
	if sp := a.spec; sp != nil && sp.p == nil {
		p, ep, tk := in.path+"/"+sp.name, a.ep, in.sess.Toolkit()
		sp.p, _ = session.Start(in.sess, func(*zk.Conn) (*session.Watch, error) {
			if err := ep.Err(); err != nil {
				return nil, err
			}
			_, _, w, err := tk.GetW(p)
			return w, err
		}, nil)
		if sp.p == nil {
			a.spec = nil
		}
	}
	var kids []string
	err := in.sess.Toolkit().Retry(a.ctx, a.ep, func(c *zk.Conn) error {
		var err error
		kids, _, err = c.Children(in.path)
		return session.Refused("list", in.path, err)
	})
	if errors.Is(err, zk.ErrNoNode) {
		a.kids = []string{} // directory gone: so is our node
		return nil
	}
	if err != nil {
		return err
	}
	a.kids = kids
	return nil
}

// statSelf reads our own node: its czxid (the fencing token) and, with watch,
// arms a data watch on it. A missing node means it was deleted.
func (a *attempt) statSelf(watch bool) error {
	var st *zk.Stat
	var data []byte
	var w *session.Watch
	sess := a.in.sess
	// The op may outlive this call (Retry leaves it behind when ctx ends):
	// it reads only copies, never the attempt's fields.
	node := a.node
	err := sess.Toolkit().Retry(a.ctx, a.ep, func(c *zk.Conn) error {
		var err error
		if watch {
			data, st, w, err = sess.Toolkit().GetW(node)
			return session.Refused("watch", node, err)
		}
		data, st, err = c.Get(node)
		return session.Refused("read", node, err)
	})
	if errors.Is(err, zk.ErrNoNode) {
		if e := a.ep.Err(); e != nil {
			return e
		}
		a.node = ""
		return ErrLockLost
	}
	if err != nil {
		return err
	}
	if a.fixed != "" && !bytes.Equal(data, a.data) {
		// A fixed name: our node was deleted and another acquire created the
		// name again. Its owner may well be our session (two acquirers of
		// one process share it), so only the data, unique to each acquire,
		// tells. It is not ours: never delete it.
		if e := a.ep.Err(); e != nil {
			return e
		}
		a.node = ""
		return ErrLockLost
	}
	if st.EphemeralOwner != a.ep.SessionID() {
		if a.fixed != "" {
			// Our data on another session's node (a create re-sent on a new
			// session): fail sweeps it by our data, never by name alone.
			a.node, a.ghosts = "", true
		}
		return fmt.Errorf("%w: node owner 0x%x", session.ErrSessionChanged, st.EphemeralOwner)
	}
	a.czxid = st.Czxid
	if watch {
		a.self = w
	}
	return nil
}

// wait sets a data watch on the child named watch and blocks until it
// fires, our own node changes, the epoch ends or ctx ends. A missing
// predecessor returns at once (rescan).
func (a *attempt) wait(watch string) error {
	in := a.in
	// Our own node is watched while we wait only where it pays: when the
	// watched child's deletion alone hands us the recipe (we are next in
	// line on the snapshot), the watch lets heldWithout grant on the
	// deletion notice without reading the children again. Deeper in the
	// queue the next decision reads the children anyway, and that read
	// finds a third-party delete of our node (ErrLockLost). Directly
	// behind the holder (the watched child sorts first) the watch is armed
	// too, whatever the driver: there the wait may last as long as the
	// hold, and a third-party delete of our node must not go unnoticed for
	// that long (a read-write lock's writer never takes over on the notice
	// alone, yet waits right behind the holder).
	//
	// Next in line, the watch is set only once the wait has lasted
	// nodeWatchDelay, as a held lease sets its own (Lease.monitor): a
	// short wait, the common case behind a busy holder or a leader that
	// steps down, then costs neither the request nor the notification
	// that our own delete would fire at our release, and a notice within
	// the delay still grants without a read (a.quick, see heldWithout).
	// A waiter that looks ahead (see LooksAhead) is not next in line: the
	// read that follows the deletion it waits for finds a delete of ours.
	// The lease then sets the watch nodeWatchDelay after the acquire, so a
	// third party's delete of our node, before or after the acquire, ends
	// the lease at the latest nodeWatchDelay (and a round trip) after the
	// acquire returned, as WithNodeWatch promises.
	next := in.cfg.nodeWatch && a.self == nil && !a.looking && (a.holdsWithout(watch) || a.watchesFirst(watch))
	a.quick = false
	if a.czxid == 0 {
		// Learn our token while we wait anyway.
		if err := a.statSelf(false); err != nil {
			return err
		}
	}
	w, err := a.specResult(watch)
	if w == nil && !errors.Is(err, zk.ErrNoNode) {
		p := in.path + "/" + watch
		// Keep the name as part of the path (which the watch keeps
		// anyway), not the snapshot's string: a waiter holds less.
		watch = p[len(in.path)+1:]
		err = in.sess.Toolkit().Retry(a.ctx, a.ep, func(*zk.Conn) error {
			var err error
			_, _, w, err = in.sess.Toolkit().GetW(p)
			return session.Refused("watch", p, err)
		})
	}
	if errors.Is(err, zk.ErrNoNode) {
		if !a.answeredOnOurSession() {
			// The reply may have come on a new session, on which our node
			// is gone too: read again (the read checks the epoch).
			return nil
		}
		// As good as its deletion notice, and as quick as one can be: it
		// was in the snapshot, and is gone.
		a.gone = watch
		a.quick = a.self == nil && next
		a.selfChanged()
		return nil
	}
	if err != nil {
		return err
	}
	if ce := in.lg.Check(zap.DebugLevel, "waiting"); ce != nil {
		ce.Write(zap.String("node", a.name), zap.String("watch", watch))
	}
	var arm <-chan time.Time
	if next {
		t := time.NewTimer(nodeWatchDelay)
		defer t.Stop()
		arm = t.C
	}
	var selfEvents <-chan zk.Event
	if a.self != nil {
		selfEvents = a.self.Events()
	}
	for {
		select {
		case ev, ok := <-w.Events():
			if w.Event(ev, ok).Type == zk.EventNodeDeleted {
				a.gone = watch
				// Deleted within the delay: grant without our own watch.
				a.quick = a.self == nil && next
			}
			a.selfChanged()
		case <-arm:
			// Still waiting after the delay: watch our node (a missing
			// node ends the wait with ErrLockLost).
			arm, next = nil, false // no grant without the watch from now on
			if err := a.statSelf(true); err != nil {
				if !session.IsConnectionError(err) || a.ep.Err() != nil || a.ctx.Err() != nil {
					return err
				}
				// The retry policy gave up on the connection: wait on
				// without the watch (a notice then leads to a read, which
				// finds our node gone if it is).
				continue
			}
			selfEvents = a.self.Events()
			continue
		case ev, ok := <-selfEvents:
			a.self.Event(ev, ok)
			a.self = nil // fired: rescan finds out what happened, rearm later
		case <-a.ep.Lost():
			return a.ep.Err()
		case <-a.ctx.Done():
			return context.Cause(a.ctx)
		}
		return nil
	}
}

// selfChanged forgets a gone notice if the watch on our own node has fired:
// events and replies come in order on the connection, so if our node changed
// before the notice (or the reply that found the watched child missing), its
// event is queued already, and the next read finds out what happened.
func (a *attempt) selfChanged() {
	if a.self == nil {
		return
	}
	select {
	case ev, ok := <-a.self.Events():
		a.self.Event(ev, ok)
		a.self, a.gone, a.quick = nil, "", false
	default:
	}
}

// specResult takes the speculative watch (a.spec) if it is on the child
// watch, and returns its outcome once in: a watch, zk.ErrNoNode (the child is
// gone), or nil and the error of a watch to be set again. A speculative watch
// on another child is dropped: it stays registered until that child changes
// (see session.Watch), and our predecessor's deletion is not far.
func (a *attempt) specResult(watch string) (*session.Watch, error) {
	sp := a.spec
	a.spec = nil
	if sp == nil || sp.name != watch {
		return nil, nil
	}
	select {
	case <-sp.p.Done():
	case <-a.ctx.Done():
		sp.p.Abandon()
		return nil, nil // the Retry that follows returns ctx's error
	case <-a.ep.Lost():
		sp.p.Abandon()
		return nil, nil // and this one the epoch's
	}
	w, err := sp.p.Result()
	if err != nil && !errors.Is(err, zk.ErrNoNode) {
		return nil, nil
	}
	return w, err
}

// fail cleans up after a failed attempt and returns the error to report.
//
// Our node (or a ghost that a create with an unknown outcome may have left)
// goes to the session's durable queue, which deletes it as soon as the
// connection allows, retrying across disconnects for as long as the session
// lives; fail then waits for that delete only briefly (awaitCleanup), so that
// the call still returns within its ctx whatever the network does.
func (a *attempt) fail(err error) error {
	in := a.in
	var done <-chan struct{}
	tk := in.sess.Toolkit()
	switch {
	case a.ep == nil:
	case a.fixed != "" && (a.node != "" || a.ghosts):
		// A fixed name may be the next holder's by now: delete it only
		// while it carries our data, unique to this acquire.
		done = tk.GuaranteedDeleteIfData(a.ep, a.fixed, a.data)
	case a.ghosts:
		// A create whose reply was lost may have left a node we cannot
		// name, besides the one we may have adopted or created since (on
		// an ensemble, a lagging member can hide the ghost from findGhost):
		// the queue deletes every child carrying our UUID, ours included.
		done = tk.GuaranteedSweep(a.ep, in.path, ProtectedPrefix(a.uuid))
	case a.node != "":
		done = tk.GuaranteedDelete(a.ep, a.node, -1)
	}
	for _, d := range []<-chan struct{}{done, a.lateCreate} {
		if d != nil {
			in.awaitCleanup(a.user, d)
			in.trackCleanup(d)
		}
	}
	a.node = ""
	// Report the caller's ctx error rather than a wrapped one from below.
	if a.user.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || a.ctx.Err() != nil) {
		return in.errf(ctxError(a.user))
	}
	if in.ctx.Err() != nil && a.ctx.Err() != nil {
		return in.closedErr()
	}
	return in.errf(err)
}

// cleanupGrace is how long a call whose ctx has ended still waits for its
// queued cleanup, so that on a healthy connection the node is gone when the
// call returns. It is the most by which a failed or canceled call overshoots
// its ctx.
const cleanupGrace = 10 * time.Millisecond

// awaitCleanup waits for a queued delete (done) while the connection is up:
// within ctx plus cleanupGrace, and at most the cleanup timeout. What is not
// finished by then the session's queue finishes later.
func (in *Engine) awaitCleanup(ctx context.Context, done <-chan struct{}) {
	w := in.newCleanupWait(ctx)
	defer w.stop()
	w.await(done)
}

// cleanupWait bounds the wait for one or more queued deletes: the cleanup
// timeout in all, and ctx plus cleanupGrace.
type cleanupWait struct {
	in      *Engine
	limit   *time.Timer
	ctxDone <-chan struct{}
	grace   *time.Timer // started once ctx has ended
}

func (in *Engine) newCleanupWait(ctx context.Context) *cleanupWait {
	w := &cleanupWait{in: in, limit: time.NewTimer(in.cfg.cleanupTimeout), ctxDone: ctx.Done()}
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
	for up(w.in.sess) {
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
		case <-w.in.sess.Done():
			return false
		case <-w.ctxDone:
			w.startGrace()
		}
	}
	return true
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
func (in *Engine) deleteNode(ctx context.Context, ep *session.Epoch, node string) {
	if ep == nil {
		return
	}
	in.awaitCleanup(ctx, in.sess.Toolkit().GuaranteedDelete(ep, node, -1))
}

// deleteRetry deletes node within ep, retrying connection errors; a missing
// node counts as deleted.
func (in *Engine) deleteRetry(ctx context.Context, ep *session.Epoch, node string) error {
	return in.sess.Toolkit().Retry(ctx, ep, func(c *zk.Conn) error {
		err := c.Delete(node, -1)
		if errors.Is(err, zk.ErrNoNode) {
			return nil
		}
		return session.Refused("delete", node, err)
	})
}

// up reports whether the connection is up (the lease context of a
// standard-policy session is a cheaper proxy, but not under SessionOnly).
func up(s *session.Session) bool {
	switch s.State() {
	case session.Connected, session.Reconnected, session.ReadOnly:
		return true
	}
	return false
}

// untilClosed returns a context canceled the cleanup timeout after Close.
func (in *Engine) untilClosed() (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	var mu sync.Mutex
	var timer *time.Timer
	stop := context.AfterFunc(in.ctx, func() {
		mu.Lock()
		timer = time.AfterFunc(in.cfg.cleanupTimeout, cancel)
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

// Participants returns the contenders of the queue d describes, in order:
// the holders first. A node that disappears while it is read is skipped. A
// missing directory gives an empty list. ctx bounds the requests.
func (in *Engine) Participants(ctx context.Context, d Driver) ([]Participant, error) {
	if ctx == nil {
		return nil, in.errf(fmt.Errorf("%w: nil context", ErrBadOption))
	}
	if err := checkDriver(d); err != nil {
		return nil, in.errf(err)
	}
	if !in.enter() {
		return nil, in.closedErr()
	}
	defer in.wg.Done()
	ep, err := in.sess.WaitConnected(ctx)
	if err != nil {
		return nil, in.errf(err)
	}
	var kids []string
	err = in.sess.Toolkit().Retry(ctx, ep, func(c *zk.Conn) error {
		var err error
		kids, _, err = c.Children(in.path)
		return session.Refused("list", in.path, err)
	})
	if errors.Is(err, zk.ErrNoNode) {
		return []Participant{}, nil
	}
	if err != nil {
		return nil, in.errf(err)
	}
	sorted := SortChildren(kids, d.Markers())
	out := make([]Participant, 0, len(sorted))
	for i, c := range sorted {
		// Who holds, as the driver decides on this listing.
		holds, _, _ := d.Decide(sorted, i)
		var data []byte
		var st *zk.Stat
		err := in.sess.Toolkit().Retry(ctx, ep, func(conn *zk.Conn) error {
			var err error
			p := in.path + "/" + c.Name
			data, st, err = conn.Get(p)
			return session.Refused("read", p, err)
		})
		if errors.Is(err, zk.ErrNoNode) {
			continue
		}
		if err != nil {
			return nil, in.errf(err)
		}
		out = append(out, Participant{ID: string(data), Node: c.Name, Holds: holds, Seq: c.Seq,
			SessionID: st.EphemeralOwner, Token: st.Czxid, Marker: c.Marker})
	}
	return out, nil
}

// Participant is one contender of a recipe (a lock, a semaphore, an
// election), as read from ZooKeeper.
type Participant struct {
	// ID is the participant id: the node's data as text.
	ID string
	// Node is the node's name under the recipe path.
	Node string
	// Holds is true for participants that hold the recipe now: the lock
	// holder, the leader, the semaphore's lease holders, the readers or the
	// writer of a read-write lock.
	Holds bool
	// Seq is the node's sequence number (0 for a fixed node).
	Seq int64
	// SessionID is the ZooKeeper session that owns the node (its
	// ephemeralOwner).
	SessionID int64
	// Token is the node's creation zxid: the holder's fencing token.
	Token int64
	// Marker is the marker that matched the name, e.g. "lock-" ("" for a
	// fixed node).
	Marker string
}

// errSessionChanged reports a node created on a session other than ep's.
func errSessionChanged(ep *session.Epoch) error {
	if err := ep.Err(); err != nil {
		return fmt.Errorf("%w: %w", session.ErrSessionChanged, err)
	}
	return session.ErrSessionChanged
}

// errSessionLost wraps zk.ErrSessionExpired so that it matches session.ErrLost.
func errSessionLost(err error) error {
	return fmt.Errorf("%w: %w", session.ErrLost, err)
}
