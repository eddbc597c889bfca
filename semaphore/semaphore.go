package semaphore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/internal/engine"
	"github.com/zkrecipes/zkrecipes/internal/participant"
	"github.com/zkrecipes/zkrecipes/internal/zksession"
	"github.com/zkrecipes/zkrecipes/recipes"
	"github.com/zkrecipes/zkrecipes/session"
)

// Node names and directories of Curator's InterProcessSemaphoreV2.
const (
	// locksDir is the directory, under the semaphore's path, of the mutex
	// that serialises acquirers (an InterProcessMutex).
	locksDir = "locks"
	// leasesDir is the directory, under the semaphore's path, of the lease
	// nodes.
	leasesDir = "leases"
	// lockMarker is the marker of acquirer mutex nodes ("_c_<uuid>-lock-<seq>").
	lockMarker = "lock-"
	// leaseMarker is the marker of lease nodes ("_c_<uuid>-lease-<seq>").
	leaseMarker = "lease-"
)

// guardDriver is the acquirer mutex: Curator's InterProcessMutex, whose
// handoff the engine takes on the deletion notice alone (the driver's
// TrustHandoff: the counted transaction deletes our mutex node, so it fails
// if that node is gone).
var guardDriver = func() *engine.Driver {
	d := engine.Standard(lockMarker, 1)
	d.TrustHandoff = true
	return d
}()

// Semaphore is a distributed counting semaphore, wire-compatible with Apache
// Curator's InterProcessSemaphoreV2: Go and Java processes acquiring leases on
// the same path share one maximum, and never hold more leases together than
// it (see the package documentation for the algorithm and the znodes).
//
// The maximum is fixed (New) or read from a SharedCount (NewShared). A fixed
// maximum is a convention: nothing stops participants that disagree on it
// from holding more leases together than the smaller one; a SharedCount makes
// every participant use the same value.
//
// A Semaphore is safe for concurrent use; its leases are not tied to
// goroutines.
type Semaphore struct {
	locks  *engine.Engine // <path>/locks: the acquirer mutex
	leases *engine.Engine // <path>/leases: the lease nodes
	path   string
	id     string
	max    int          // fixed maximum; 0 with a SharedCount
	count  *SharedCount // nil with a fixed maximum
	zs     *zksession.Session

	ctx    context.Context // canceled by Close
	cancel context.CancelFunc

	mu        sync.Mutex
	closed    bool
	held      engine.HeldLeases // leases granted (Held)
	wg        sync.WaitGroup    // acquires in progress
	closeOnce sync.Once
}

// New returns a semaphore on path (a recipe path, under the session's
// namespace) whose maximum number of leases is max (1 to 2147483647, math.MaxInt32; every
// participant must use the same value). It validates its arguments and does
// no I/O; the directories are created (as container nodes) at the first
// acquire.
func New(sess *session.Session, path string, max int, opts ...Option) (*Semaphore, error) {
	if max < 1 || max > maxCount {
		return nil, engine.NewError("semaphore", path, fmt.Errorf("%w: maximum %d, want 1 to %d", session.ErrBadArgument, max, maxCount))
	}
	return newSemaphore(sess, path, max, nil, opts)
}

// NewMutex returns a semaphore of one lease on path: the Go twin of
// Curator's InterProcessSemaphoreMutex, on the same znodes (<path>/locks and
// <path>/leases), which it excludes, as it excludes a Semaphore of maximum
// 1 on the path. It is NOT the lock of package mutex: mutex.New (and
// Curator's InterProcessMutex) queue nodes directly under the lock path, so
// the two kinds do not exclude each other on one path; pick the one that
// matches the Java side. Like New, it validates its arguments and does no
// I/O.
func NewMutex(sess *session.Session, path string, opts ...Option) (*Semaphore, error) {
	return New(sess, path, 1, opts...)
}

// NewShared returns a semaphore on path whose maximum is the value of count
// (Curator's InterProcessSemaphoreV2 with a SharedCountReader): acquires read
// it through count's watch, and waiters are woken when it grows. Lowering it
// ends no lease: the holders keep theirs, and nobody is admitted until fewer
// leases than the new maximum are held. The Semaphore does not close count;
// close the Semaphore first.
func NewShared(sess *session.Session, path string, count *SharedCount, opts ...Option) (*Semaphore, error) {
	if count == nil {
		return nil, engine.NewError("semaphore", path, fmt.Errorf("%w: nil shared count", session.ErrBadArgument))
	}
	if zs, _ := zksession.Of(sess); count.zs != zs && zs != nil {
		// A count on another session works, but its watch then follows
		// another connection; say so rather than guess.
		return nil, engine.NewError("semaphore", path, fmt.Errorf("%w: the shared count belongs to another session", session.ErrBadArgument))
	}
	return newSemaphore(sess, path, 0, count, opts)
}

func newSemaphore(sess *session.Session, path string, max int, count *SharedCount, opts []Option) (*Semaphore, error) {
	c, err := buildConfig(opts)
	if err != nil {
		return nil, engine.NewError("semaphore", path, err)
	}
	zs, err := zksession.Of(sess)
	if err != nil {
		return nil, engine.NewError("semaphore", path, err)
	}
	if err := zksession.ValidatePath(path); err != nil {
		return nil, engine.NewError("semaphore", path, err)
	}
	base := []engine.Option{engine.WithName("semaphore")}
	if c.lg != nil {
		base = append(base, engine.WithLogger(c.lg))
	}
	// The acquirer mutex is held for a round trip or two; watching its own
	// node would cost a request per acquire for nothing (see guardDriver).
	locks, err := engine.New(sess, join(path, locksDir), append(base, engine.WithNodeWatch(false))...)
	if err != nil {
		return nil, err
	}
	leases, err := engine.New(sess, join(path, leasesDir), append(base, engine.WithNodeWatch(c.nodeWatch), engine.WithObserved("", c.name))...)
	if err != nil {
		return nil, err
	}
	s := &Semaphore{locks: locks, leases: leases, path: path, id: c.id, max: max, count: count, zs: zs}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	return s, nil
}

// join returns dir/name for a recipe path.
func join(dir, name string) string {
	if dir == "/" {
		return "/" + name
	}
	return dir + "/" + name
}

// Path returns the semaphore's path as given to the constructor.
func (s *Semaphore) Path() string { return s.path }

func (s *Semaphore) errf(err error) error { return engine.NewError("semaphore", s.path, err) }

// Acquire blocks until it holds one lease, and returns it. It queues on the
// acquirer mutex behind earlier acquirers (Go or Java), then, holding it,
// waits until fewer leases than the maximum are held, and takes one. ctx is
// the only bound: when it ends, Acquire deletes its nodes and returns ctx's
// error (matching context.Canceled or DeadlineExceeded), also when the lease
// was won just as ctx ended (it is released). Other errors: session.ErrClosed,
// session.ErrLost (the session ended while waiting; a wait never carries
// over to a new session), ErrBadData (a SharedCount maximum that cannot be
// read), ZooKeeper errors. A connection that drops while waiting makes it
// join the queue again once the connection is back. Safe for concurrent use.
func (s *Semaphore) Acquire(ctx context.Context) (*Lease, error) {
	ls, err := s.acquire(ctx, 1, false)
	if err != nil {
		return nil, err
	}
	return ls[0], nil
}

// AcquireN is Acquire for n leases, all or none: it waits until n leases are
// free and takes them in one transaction, so that nobody ever holds only some
// of them, and two AcquireN callers cannot each hold a part and wait for the
// rest. On any error (ctx's end included) it holds none and has left no node
// behind. n must be at least 1 and, with a fixed maximum, at most the
// maximum (else session.ErrBadArgument); with a SharedCount it waits until
// the maximum allows n. The leases share one fencing token; release each
// with its Release.
func (s *Semaphore) AcquireN(ctx context.Context, n int) ([]*Lease, error) {
	return s.acquire(ctx, n, false)
}

// TryAcquire takes one lease if that needs no waiting: it returns an error
// matching recipes.ErrBusy when all leases are held, and also when another
// acquirer holds the acquirer mutex at that moment (as Curator's acquire with
// a zero wait does). ctx bounds its requests.
func (s *Semaphore) TryAcquire(ctx context.Context) (*Lease, error) {
	ls, err := s.acquire(ctx, 1, true)
	if err != nil {
		return nil, err
	}
	return ls[0], nil
}

// Held returns how many leases this Semaphore value holds now (granted and
// not ended), as far as it knows: Curator's isAcquiredInThisProcess, counted.
// It does no I/O.
func (s *Semaphore) Held() int { return s.held.Count() }

// Participants returns the lease nodes in sequence order, with the
// participant id each stores: the current holders, plus, while a Curator
// acquirer waits, its waiting node (Curator creates its lease node before it
// waits; this package does not). The first nodes, up to the maximum (a
// SharedCount's current value), have Holds set. A missing directory gives an
// empty list. ctx bounds the requests.
func (s *Semaphore) Participants(ctx context.Context) ([]recipes.Participant, error) {
	if ctx == nil {
		return nil, s.errf(fmt.Errorf("%w: nil context", session.ErrBadArgument))
	}
	limit, _, err := s.currentMax(ctx)
	if err != nil {
		return nil, s.errf(err)
	}
	ps, err := s.leases.Participants(ctx, engine.Standard(leaseMarker, max(limit, 1)))
	if err != nil {
		return nil, s.errf(err)
	}
	if limit < 1 {
		for i := range ps {
			ps[i].Holds = false
		}
	}
	return ps, nil
}

// Close ends the leases of this Semaphore (cause session.ErrClosed; their nodes are
// deleted), makes waiting acquires return session.ErrClosed, and returns when every
// goroutine it started has exited and every acquire in progress has
// returned. Idempotent; calls after Close return session.ErrClosed. The session (and
// a SharedCount) stays open.
func (s *Semaphore) Close() error {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.closed = true
		s.mu.Unlock()
		s.cancel()
		s.locks.Close()
		s.leases.Close()
		s.wg.Wait()
	})
	return nil
}

// enter registers an acquire for Close to wait for; false after Close.
func (s *Semaphore) enter() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.wg.Add(1)
	return true
}

// retryPauseMax bounds the pause between two rounds of an acquire whose
// transaction found the semaphore full or lost its mutex (rare: it takes a
// participant that creates lease nodes without the mutex, or a third party).
const retryPauseMax = time.Second

func (s *Semaphore) acquire(ctx context.Context, n int, try bool) ([]*Lease, error) {
	if ctx == nil {
		return nil, s.errf(fmt.Errorf("%w: nil context", session.ErrBadArgument))
	}
	if n < 1 {
		return nil, s.errf(fmt.Errorf("%w: %d leases asked for", session.ErrBadArgument, n))
	}
	if s.count == nil && n > s.max {
		return nil, s.errf(fmt.Errorf("%w: %d leases asked for, the maximum is %d", session.ErrBadArgument, n, s.max))
	}
	if n*len(s.id) > participant.MaxLen {
		// The transaction carries the id once per lease: keep it well under
		// ZooKeeper's packet limit.
		return nil, s.errf(fmt.Errorf("%w: %d leases of a %d-byte id exceed one request", session.ErrBadArgument, n, len(s.id)))
	}
	if !s.enter() {
		return nil, s.errf(engine.Closed())
	}
	defer s.wg.Done()
	// AcquireN(n) is n acquires for the session's hooks, one per lease;
	// the first one's ctx goes on.
	octx, o := s.leases.ObserveAcquire(ctx, "semaphore", s.max)
	if o == nil {
		return s.acquireAs(ctx, n, try)
	}
	obs := []*engine.Observation{o}
	for len(obs) < n {
		_, oi := s.leases.ObserveAcquire(ctx, "semaphore", s.max)
		obs = append(obs, oi)
	}
	ls, err := s.acquireAs(octx, n, try)
	for i, o := range obs {
		if err != nil {
			o.Done(err)
		} else {
			o.Done(nil, ls[i].l)
		}
	}
	return ls, err
}

// acquireAs is acquire once the arguments are checked.
func (s *Semaphore) acquireAs(ctx context.Context, n int, try bool) ([]*Lease, error) {
	actx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := context.AfterFunc(s.ctx, func() { cancel(s.errf(engine.Closed())) })
	defer stop()

	pause := 10 * time.Millisecond
	for round := 0; ; round++ {
		var ml *engine.Lease
		var err error
		if try {
			ml, err = s.locks.TryAcquire(actx, guardDriver, []byte(s.id))
			if errors.Is(err, recipes.ErrBusy) {
				return nil, s.errf(recipes.ErrBusy)
			}
		} else {
			ml, err = s.locks.Acquire(actx, guardDriver, []byte(s.id))
		}
		if err != nil {
			return nil, s.result(ctx, actx, err)
		}
		ls, again, err := s.holding(actx, ml, n, try)
		s.releaseGuard(ctx, ml)
		if err == nil {
			return ls, nil
		}
		if !again {
			return nil, s.result(ctx, actx, err)
		}
		if round > 0 {
			if e := pauseCtx(actx, pause); e != nil {
				return nil, s.result(ctx, actx, e)
			}
			pause = min(2*pause, retryPauseMax)
		}
	}
}

// result returns the error to report for an acquire that failed with err:
// the caller's ctx error, session.ErrClosed, or err.
func (s *Semaphore) result(ctx, actx context.Context, err error) error {
	switch {
	case ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || actx.Err() != nil):
		return s.errf(ctxError(ctx))
	case s.ctx.Err() != nil && actx.Err() != nil:
		return s.errf(engine.Closed())
	case errors.Is(err, recipes.ErrBusy):
		return s.errf(recipes.ErrBusy)
	}
	return s.errf(err)
}

// ctxError returns ctx's error, with its cause when that says more.
func ctxError(ctx context.Context) error {
	err := ctx.Err()
	if cause := context.Cause(ctx); cause != nil && cause != err {
		return fmt.Errorf("%w (cause: %w)", err, cause)
	}
	return err
}

// releaseGuard releases the acquirer mutex if the counted transaction has
// not: within ctx while it lives, else with a short grace, so that a failed
// acquire returns promptly (what is not done then, the session's
// guaranteed-delete queue finishes).
func (s *Semaphore) releaseGuard(ctx context.Context, ml *engine.Lease) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Millisecond)
	if ctx.Err() == nil {
		cancel()
		rctx, cancel = context.WithCancel(ctx)
	}
	defer cancel()
	_ = ml.Release(rctx) // nil after the transaction released it
}

// holding runs while this acquire holds the acquirer mutex ml: it waits
// until n leases are free and takes them. again reports an error after which
// the acquire should queue on the mutex again.
func (s *Semaphore) holding(ctx context.Context, ml *engine.Lease, n int, try bool) (ls []*Lease, again bool, err error) {
	ep := ml.Epoch()
	est := -1 // our estimate of the number of children of the lease directory; -1: read it
	var w *zksession.Watch
	for {
		limit, limitChanged, err := s.currentMax(ctx)
		if err != nil {
			return nil, false, err
		}
		if est < 0 {
			kids, watch, err := s.readLeases(ctx, ep, !try)
			if err != nil {
				return nil, s.retryable(err), err
			}
			est, w = kids, watch
		}
		if est+n <= limit {
			rs, err := s.leases.AcquireCounted(ctx, engine.CountedSpec{
				Marker: leaseMarker, Data: []byte(s.id), N: n, Max: limit, Guard: ml,
			})
			if err != nil {
				if try && errors.Is(err, recipes.ErrBusy) {
					return nil, false, s.errf(recipes.ErrBusy)
				}
				return nil, s.retryable(err), err
			}
			ls := make([]*Lease, len(rs))
			for i, l := range rs {
				ls[i] = &Lease{l: l, path: s.path}
			}
			s.held.Add(rs...)
			return ls, false, nil
		}
		if try {
			return nil, false, s.errf(recipes.ErrBusy)
		}
		var changes <-chan zk.Event
		if w != nil {
			changes = w.Events()
		}
		select {
		case ev, ok := <-changes:
			ev = w.Event(ev, ok)
			w = nil
			// While we hold the mutex, nobody following the protocol
			// creates a lease node: a change of the children is a lease
			// given back. When one is enough, take ours at once (the
			// transaction checks the count, atomically); otherwise read
			// again, with a new watch.
			if ev.Type == zk.EventNodeChildrenChanged && est > 0 && est-1+n <= limit {
				est--
			} else {
				est = -1
			}
		case <-limitChanged:
			// The maximum changed: decide again on the same count (the
			// watch, still set, catches a change of the children).
			if w == nil && est >= 0 {
				est = -1
			}
		case <-ml.Done():
			err := ml.Err()
			return nil, s.retryable(err), err
		case <-ctx.Done():
			return nil, false, context.Cause(ctx)
		}
	}
}

// retryable reports whether an acquire that failed with err while holding
// the mutex should queue on it again: the mutex was lost to a suspension (a
// lost session or a closed semaphore ends the acquire), or the transaction
// found the semaphore full after all.
func (s *Semaphore) retryable(err error) bool {
	switch {
	case errors.Is(err, session.ErrLost), errors.Is(err, session.ErrClosed),
		errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return false
	case errors.Is(err, recipes.ErrBusy), errors.Is(err, engine.ErrGuardLost),
		errors.Is(err, recipes.ErrNodeDeleted), errors.Is(err, session.ErrSuspended):
		return true
	}
	return false
}

// currentMax returns the maximum now and, with a SharedCount, a channel
// closed at its next change.
func (s *Semaphore) currentMax(ctx context.Context) (int, <-chan struct{}, error) {
	if s.count == nil {
		return s.max, nil, nil
	}
	v, err, changed := s.count.current(ctx)
	if err != nil {
		return 0, nil, err
	}
	return max(v.Count, 0), changed, nil
}

// readLeases reads the number of children of the lease directory (all of
// them, as Curator counts) on ep, with a child watch when watch is set. A
// missing directory counts 0 and has no watch.
func (s *Semaphore) readLeases(ctx context.Context, ep *zksession.Epoch, watch bool) (int, *zksession.Watch, error) {
	dir := s.leases.Path()
	var kids []string
	var w *zksession.Watch
	err := s.zs.Retry(ctx, ep, func(c *zk.Conn) error {
		var err error
		if watch {
			kids, _, w, err = s.zs.ChildrenW(dir)
		} else {
			kids, _, err = c.Children(dir)
		}
		return err
	})
	if errors.Is(err, zk.ErrNoNode) {
		return 0, nil, nil
	}
	if err != nil {
		return 0, nil, err
	}
	return len(kids), w, nil
}
