package semaphore

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"path"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
	"go.uber.org/zap"

	"github.com/zkrecipes/zkrecipes/internal/engine"
	"github.com/zkrecipes/zkrecipes/internal/zksession"
	"github.com/zkrecipes/zkrecipes/recipes"
	"github.com/zkrecipes/zkrecipes/session"
)

// maxCount is the largest value a SharedCount holds: Curator stores a Java
// int.
const maxCount = math.MaxInt32

// CountValue is a SharedCount's value with the data version of its node, as
// one read saw them (Curator's VersionedValue<Integer>). Pass it to TrySet to
// change the count only if nobody has changed it since.
type CountValue struct {
	// Count is the value.
	Count int
	// Version is the node's data version.
	Version int32
}

// SharedCount is a count shared through one ZooKeeper node, wire-compatible
// with Apache Curator's SharedCount (recipes/shared): the node holds the
// count as a 4-byte big-endian integer, is changed by Set (unconditionally)
// or TrySet (compare-and-set on the node's data version), and is read with a
// watch. A SharedCount is how a semaphore's maximum is shared (NewShared):
// every participant, Go or Java, then agrees on it, and raising it wakes the
// waiters.
//
// As in Curator, the node is created with the seed value by the first
// participant that finds it missing (a read, a watch or TrySet), as a
// PERSISTENT node whose missing parents are container nodes; Set creates it
// with the value set. Values written from Go are from 0 to math.MaxInt32 (a
// semaphore's maximum); a negative value written by another client (Curator
// allows any int) is read as it is, and a semaphore admits nobody while its
// maximum is below 1. Data of another length than 4 bytes is an error
// matching ErrBadData.
//
// NewSharedCount does no I/O. One goroutine, started by the first Watch (or
// semaphore acquire), keeps a data watch on the node; Close stops it. A
// SharedCount is safe for concurrent use.
type SharedCount struct {
	zs   *zksession.Session
	path string // as given
	full string // server path
	seed int
	lg   *zap.Logger

	ctx    context.Context // canceled by Close
	cancel context.CancelFunc
	wg     sync.WaitGroup

	closeOnce sync.Once

	mu      sync.Mutex
	closed  bool
	started bool
	ready   bool          // cur/curErr hold the watcher's first read
	cur     CountValue    // the last value read
	curErr  error         // the last read's error (the value stays the last good one)
	changed chan struct{} // closed and replaced when cur, curErr or ready change
}

// NewSharedCount returns the count at path (under the session's namespace),
// with seed as the value the node is created with when missing. It validates
// its arguments (seed from 0 to math.MaxInt32) and does no I/O.
func NewSharedCount(sess *session.Session, path string, seed int) (*SharedCount, error) {
	zs, err := zksession.Of(sess)
	if err != nil {
		return nil, engine.NewError("semaphore count", path, err)
	}
	full, err := zs.Path(path)
	if err != nil {
		return nil, engine.NewError("semaphore count", path, err)
	}
	if full == "/" {
		return nil, engine.NewError("semaphore count", path, fmt.Errorf("%w: the root cannot hold a count", session.ErrBadArgument))
	}
	if err := checkCount(seed); err != nil {
		return nil, engine.NewError("semaphore count", path, fmt.Errorf("seed: %w", err))
	}
	c := &SharedCount{zs: zs, path: path, full: full, seed: seed, changed: make(chan struct{})}
	c.lg = zs.Logger().Named("semaphore").With(zap.String("path", full))
	c.ctx, c.cancel = context.WithCancel(context.Background())
	return c, nil
}

// checkCount validates a value to write.
func checkCount(n int) error {
	switch {
	case n < 0:
		return fmt.Errorf("%w: %d is negative", session.ErrBadArgument, n)
	case n > maxCount:
		return fmt.Errorf("%w: %d overflows a 32-bit count (at most %d)", session.ErrBadArgument, n, maxCount)
	}
	return nil
}

// encodeCount returns Curator's encoding: 4 bytes, big-endian.
func encodeCount(n int) []byte {
	b := make([]byte, 4)
	binary.BigEndian.PutUint32(b, uint32(int32(n)))
	return b
}

// decodeCount parses Curator's encoding.
func decodeCount(data []byte) (int, error) {
	if len(data) != 4 {
		return 0, fmt.Errorf("%w: %d bytes", ErrBadData, len(data))
	}
	return int(int32(binary.BigEndian.Uint32(data))), nil
}

// Path returns the count's path as given to NewSharedCount.
func (c *SharedCount) Path() string { return c.path }

func (c *SharedCount) errf(err error) error {
	return engine.NewError("semaphore count", c.path, err)
}

// begin merges ctx with Close; it fails after Close.
func (c *SharedCount) begin(ctx context.Context) (context.Context, context.CancelFunc, error) {
	actx, end, err := engine.CallContext(ctx, c.ctx)
	if err != nil {
		return nil, nil, c.errf(err)
	}
	c.mu.Lock()
	closed := c.closed
	c.mu.Unlock()
	if closed {
		end()
		return nil, nil, c.errf(engine.Closed())
	}
	return actx, end, nil
}

// result maps an error of a call bound by actx (ctx merged with Close).
func (c *SharedCount) result(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	if ctx.Err() == nil && c.ctx.Err() != nil {
		return c.errf(engine.KeepUnknown(err, engine.Closed()))
	}
	return c.errf(err)
}

// do runs op on a live epoch, within ctx, retrying connection errors; a
// session lost in between is retried on the next one (the node is
// persistent: its operations do not depend on the session). An op that
// succeeded on another session than the one it was bound to succeeded.
func (c *SharedCount) do(ctx context.Context, op func(*zk.Conn) error) error {
	return c.zs.RetryAcrossSessions(ctx, op)
}

// create creates the node with data (parents as containers); an existing
// node is left alone.
func (c *SharedCount) create(ctx context.Context, data []byte) (created bool, err error) {
	return c.createTracked(ctx, data, new(zksession.Write))
}

// createTracked is create, recording its attempts in w.
func (c *SharedCount) createTracked(ctx context.Context, data []byte, w *zksession.Write) (created bool, err error) {
	if err := c.zs.EnsureContainers(ctx, path.Dir(c.full)); err != nil {
		return false, err
	}
	err = c.zs.RetryWriteAcrossSessions(ctx, w, func(conn *zk.Conn) error {
		_, err := conn.Create(c.full, data, zk.FlagPersistent, c.zs.ACL())
		return zksession.Refused("create", c.full, err)
	})
	if errors.Is(err, zk.ErrNodeExists) {
		return false, nil
	}
	return err == nil, err
}

// read reads the node, creating it with the seed when missing.
func (c *SharedCount) read(ctx context.Context) (CountValue, error) {
	for {
		var data []byte
		var st *zk.Stat
		err := c.do(ctx, func(conn *zk.Conn) error {
			var err error
			data, st, err = conn.Get(c.full)
			return zksession.Refused("read", c.full, err)
		})
		if errors.Is(err, zk.ErrNoNode) {
			if _, err := c.create(ctx, encodeCount(c.seed)); err != nil {
				return CountValue{}, err
			}
			continue
		}
		if err != nil {
			return CountValue{}, err
		}
		n, err := decodeCount(data)
		if err != nil {
			return CountValue{}, err
		}
		return CountValue{Count: n, Version: st.Version}, nil
	}
}

// Get reads the count from the server (creating the node with the seed when
// it is missing). ctx bounds it. Errors: ErrBadData, ctx's error, session.ErrClosed,
// ZooKeeper errors.
func (c *SharedCount) Get(ctx context.Context) (CountValue, error) {
	actx, end, err := c.begin(ctx)
	if err != nil {
		return CountValue{}, err
	}
	defer end()
	v, err := c.read(actx)
	return v, c.result(ctx, err)
}

// Set writes n whatever the count is (creating the node with n when it is
// missing) and returns the new value and version. n must be from 0 to
// math.MaxInt32 (else session.ErrBadArgument, and nothing is written). ctx
// bounds it; while the connection is down Set waits for it, and a write whose
// answer was lost is sent again. When ctx ends (or Close comes) after a write
// was sent and before its answer came, the error matches
// recipes.ErrUnknownOutcome as well as ctx's error (session.ErrClosed): n may
// or may not have been written; when nothing was sent, it matches only
// ctx's error (session.ErrClosed).
func (c *SharedCount) Set(ctx context.Context, n int) (CountValue, error) {
	if err := checkCount(n); err != nil {
		return CountValue{}, c.errf(err)
	}
	actx, end, err := c.begin(ctx)
	if err != nil {
		return CountValue{}, err
	}
	defer end()
	data := encodeCount(n)
	var w zksession.Write // every attempt: a set, or a create
	for {
		var st *zk.Stat
		err := c.zs.RetryWriteAcrossSessions(actx, &w, func(conn *zk.Conn) error {
			var err error
			st, err = conn.Set(c.full, data, -1)
			return zksession.Refused("set", c.full, err)
		})
		if errors.Is(err, zk.ErrNoNode) {
			created, err := c.createTracked(actx, data, &w)
			if err != nil {
				return CountValue{}, c.result(ctx, w.Result(err))
			}
			if created {
				return CountValue{Count: n}, nil
			}
			continue
		}
		if err != nil {
			return CountValue{}, c.result(ctx, w.Result(err))
		}
		return CountValue{Count: n, Version: st.Version}, nil
	}
}

// TrySet writes n only if the node's version is still prev.Version (the
// version a Get, a Watch value or an earlier TrySet returned): it returns the
// new value and true, or, when someone else changed the count since, the
// current value and false (Curator's trySetCount). n must be from 0 to
// math.MaxInt32. A missing node is created with the seed, and TrySet returns that
// value and false. ctx bounds it; while the connection is down TrySet waits
// for it, and a write whose answer was lost is sent again (it is
// conditional: it applies at most once). After an attempt whose answer was
// lost, the retry's refusal does not say whether the lost attempt applied
// (another client may have written after it): unless the node holds another
// count at the one version this write could have made, TrySet returns the
// current value, false and an error matching recipes.ErrUnknownOutcome
// (wrapping the connection error) rather than guess. When ctx ends (or Close comes) after a write was sent and before its
// answer came, the error matches recipes.ErrUnknownOutcome as well as ctx's
// error (session.ErrClosed); when nothing was sent, only ctx's error
// (session.ErrClosed).
func (c *SharedCount) TrySet(ctx context.Context, prev CountValue, n int) (CountValue, bool, error) {
	if err := checkCount(n); err != nil {
		return CountValue{}, false, c.errf(err)
	}
	actx, end, err := c.begin(ctx)
	if err != nil {
		return CountValue{}, false, err
	}
	defer end()
	var w zksession.Write
	var st *zk.Stat
	err = c.zs.RetryWriteAcrossSessions(actx, &w, func(conn *zk.Conn) error {
		var err error
		st, err = conn.Set(c.full, encodeCount(n), prev.Version)
		return zksession.Refused("set", c.full, err)
	})
	switch {
	case err == nil:
		return CountValue{Count: n, Version: st.Version}, true, nil
	case errors.Is(err, zk.ErrBadVersion), errors.Is(err, zk.ErrNoNode):
		cur, rerr := c.read(actx)
		if rerr != nil {
			return CountValue{}, false, c.result(ctx, rerr)
		}
		if w.Unknown() && !(errors.Is(err, zk.ErrBadVersion) && cur.Version == prev.Version+1 && cur.Count != n) {
			// An attempt whose answer was lost may have applied, and what
			// came after may have overwritten or deleted it. Only another
			// count at the one version our write could have made proves
			// that it did not.
			return cur, false, c.errf(fmt.Errorf("%w: an attempt whose answer was lost may have written it: %w", recipes.ErrUnknownOutcome, w.Lost()))
		}
		return cur, false, nil
	}
	return CountValue{}, false, c.result(ctx, w.Result(err))
}

// Watch returns a channel that receives the count as soon as it is known,
// then every change the SharedCount's watch sees (a slow reader gets the
// latest value: the channel holds one). It is closed when ctx ends or the
// SharedCount is closed. Values that cannot be read (ErrBadData, no
// permission) are not sent: Get returns their error.
func (c *SharedCount) Watch(ctx context.Context) <-chan CountValue {
	out := make(chan CountValue, 1)
	c.mu.Lock()
	if c.closed || ctx == nil {
		c.mu.Unlock()
		close(out)
		return out
	}
	c.startLocked()
	c.wg.Add(1)
	c.mu.Unlock()
	go func() {
		defer c.wg.Done()
		defer close(out)
		var last CountValue
		sent := false
		for {
			c.mu.Lock()
			v, err, ready, ch := c.cur, c.curErr, c.ready, c.changed
			c.mu.Unlock()
			if ready && err == nil && (!sent || v != last) {
				select {
				case <-out: // keep only the latest value
				default:
				}
				out <- v
				last, sent = v, true
			}
			select {
			case <-ch:
			case <-ctx.Done():
				return
			case <-c.ctx.Done():
				return
			}
		}
	}()
	return out
}

// current returns the watcher's last value and its error, starting the
// watcher and waiting for its first read within ctx, and a channel closed at
// the next change.
func (c *SharedCount) current(ctx context.Context) (CountValue, error, <-chan struct{}) {
	for {
		c.mu.Lock()
		if c.closed {
			c.mu.Unlock()
			return CountValue{}, c.errf(engine.Closed()), nil
		}
		c.startLocked()
		v, err, ready, ch := c.cur, c.curErr, c.ready, c.changed
		c.mu.Unlock()
		if ready {
			return v, err, ch
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return CountValue{}, ctx.Err(), nil
		}
	}
}

// startLocked starts the watcher once. c.mu held.
func (c *SharedCount) startLocked() {
	if c.started {
		return
	}
	c.started = true
	c.wg.Add(1)
	go c.watch()
}

// publish records a good read of the watcher and wakes whoever waits for a
// change.
func (c *SharedCount) publish(v CountValue) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ready && c.curErr == nil && c.cur == v {
		return
	}
	c.cur, c.curErr, c.ready = v, nil, true
	c.wakeLocked()
}

// publishErr records a failed read (the value stays the last good one).
func (c *SharedCount) publishErr(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ready && c.curErr != nil && c.curErr.Error() == err.Error() {
		return
	}
	c.curErr, c.ready = err, true
	c.wakeLocked()
}

// wakeLocked closes and replaces the change channel. c.mu held.
func (c *SharedCount) wakeLocked() {
	close(c.changed)
	c.changed = make(chan struct{})
}

// Bounds of the watcher's pause after a failed read.
const (
	watchPauseMin = 50 * time.Millisecond
	watchPauseMax = 2 * time.Second
)

// watch is the watcher goroutine: it reads the node with a data watch,
// publishes what it read, and reads again at each change and on each new
// session, until Close.
func (c *SharedCount) watch() {
	defer c.wg.Done()
	d := watchPauseMin
	failed := func(err error) bool {
		// A permanent or repeated failure: publish it, pause, try again.
		c.publishErr(c.errf(err))
		if pauseCtx(c.ctx, d) != nil {
			return false
		}
		d = min(2*d, watchPauseMax)
		return true
	}
	for {
		ep, err := c.zs.WaitConnected(c.ctx)
		if err != nil {
			if c.ctx.Err() == nil {
				c.publishErr(c.errf(err)) // the session is closed
			}
			return
		}
		var data []byte
		var st *zk.Stat
		var w *zksession.Watch
		err = c.zs.Retry(c.ctx, ep, func(*zk.Conn) error {
			var err error
			data, st, w, err = c.zs.GetW(c.full)
			return zksession.Refused("watch", c.full, err)
		})
		switch {
		case c.ctx.Err() != nil:
			return
		case err == nil:
			n, derr := decodeCount(data)
			if derr != nil {
				c.lg.Warn("shared count node holds data that is not a count", zap.Error(derr))
				c.publishErr(c.errf(derr))
			} else {
				c.publish(CountValue{Count: n, Version: st.Version})
			}
			d = watchPauseMin
		case errors.Is(err, zk.ErrNoNode):
			if _, err := c.create(c.ctx, encodeCount(c.seed)); err != nil && c.ctx.Err() == nil && !failed(err) {
				return
			}
			continue
		case errors.Is(err, session.ErrClosed):
			c.publishErr(c.errf(err))
			return
		case errors.Is(err, session.ErrLost):
			continue // read again on the next session
		default:
			if !failed(err) {
				return
			}
			continue
		}
		select {
		case ev, ok := <-w.Events():
			w.Event(ev, ok) // changed, deleted, or the session ended: read again
		case <-ep.Lost():
		case <-c.ctx.Done():
			return
		}
	}
}

// pauseCtx waits d or until ctx ends (a backoff, not synchronisation).
func pauseCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close stops the watch and closes the Watch channels, and returns once its
// goroutines have exited. Later calls return session.ErrClosed; acquires of a
// semaphore that uses the count fail with it (close the semaphore first).
// The node stays. Idempotent.
func (c *SharedCount) Close() error {
	c.closeOnce.Do(func() {
		c.mu.Lock()
		c.closed = true
		c.wakeLocked() // current() waiters see closed
		c.mu.Unlock()
		c.cancel()
		c.wg.Wait()
	})
	return nil
}

// ErrBadData is returned by a SharedCount whose node holds data that is not
// a 4-byte big-endian count (a node some other program wrote).
var ErrBadData = errors.New("semaphore: shared count data is not a 4-byte count")
