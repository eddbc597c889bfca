package counter

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"path"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/go-zookeeper/zk"
	"go.uber.org/zap"

	"github.com/zkrecipes/zkrecipes/internal/engine"
	"github.com/zkrecipes/zkrecipes/internal/participant"
	"github.com/zkrecipes/zkrecipes/internal/zksession"
	"github.com/zkrecipes/zkrecipes/recipes"
	"github.com/zkrecipes/zkrecipes/session"
)

// cleanupTimeout bounds the wait for the delete of the promotion lock's
// node when a call ends (the delete goes on in the session's queue).
const cleanupTimeout = 5 * time.Second

// Value is a counter's value as read or written, with the node's data
// version: pass it to TrySet to write only if nobody has written since (to
// this node: a node deleted and created again starts again at version 0).
type Value[T int32 | int64] struct {
	// Value is the counter's value (0 for a missing node, as Curator reads it).
	Value T
	// Version is the node's data version, or -1 when the node does not exist.
	Version int32
}

// Counter is an atomic counter in one ZooKeeper node, wire-compatible with
// Apache Curator's DistributedAtomicLong (Counter[int64], from New) and
// DistributedAtomicInteger (Counter[int32], from New32): Go and Java
// processes can change one counter together. Every change is a write
// conditional on the version just read, retried on a lost race (WithRetry),
// optionally under a lock (WithPromotion). A Counter starts no goroutine and
// is safe for concurrent use.
type Counter[T int32 | int64] struct {
	zs   *zksession.Session
	path string // as given
	full string // server path
	size int    // bytes of the encoding: 8 or 4
	cfg  *config
	lg   *zap.Logger
	lock *engine.Engine // WithPromotion's mutex, or nil
	data []byte         // the lock node's data: the participant id

	ctx    context.Context // canceled by Close
	cancel context.CancelFunc
	once   sync.Once
}

// New returns the 64-bit counter at path (under the session's namespace),
// Curator's DistributedAtomicLong: the node holds the value as 8 bytes,
// big-endian. It validates its arguments and does no I/O.
func New(sess *session.Session, path string, opts ...Option) (*Counter[int64], error) {
	return newCounter[int64](sess, path, 8, opts)
}

// New32 returns the 32-bit counter at path, Curator's
// DistributedAtomicInteger: the node holds the value as 4 bytes, big-endian.
// It validates its arguments and does no I/O.
func New32(sess *session.Session, path string, opts ...Option) (*Counter[int32], error) {
	return newCounter[int32](sess, path, 4, opts)
}

func newCounter[T int32 | int64](sess *session.Session, p string, size int, opts []Option) (*Counter[T], error) {
	zs, err := zksession.Of(sess)
	if err != nil {
		return nil, engine.NewError("counter", p, err)
	}
	full, err := zs.Path(p)
	if err != nil {
		return nil, engine.NewError("counter", p, err)
	}
	if full == "/" {
		return nil, engine.NewError("counter", p, fmt.Errorf("%w: the root cannot hold a counter", session.ErrBadArgument))
	}
	cfg, err := buildConfig(opts)
	if err != nil {
		return nil, engine.NewError("counter", p, err)
	}
	c := &Counter[T]{zs: zs, path: p, full: full, size: size, cfg: cfg}
	if cfg.lockPath != "" {
		lfull, err := zs.Path(cfg.lockPath)
		if err != nil {
			return nil, engine.NewError("counter", p, fmt.Errorf("promotion lock: %w", err))
		}
		if lfull == full || lfull == "/" {
			return nil, engine.NewError("counter", p, fmt.Errorf("%w: promotion lock path %q: want another node than the counter's", session.ErrBadArgument, cfg.lockPath))
		}
		eopts := []engine.Option{engine.WithName("counter"), engine.WithNodeWatch(false)}
		if cfg.lg != nil {
			eopts = append(eopts, engine.WithLogger(cfg.lg))
		}
		c.lock, err = engine.New(sess, cfg.lockPath, eopts...)
		if err != nil {
			return nil, engine.NewError("counter", p, err)
		}
		_, c.data = participant.Local()
	}
	lg := cfg.lg
	if lg == nil {
		lg = zs.Logger().Named("counter")
	}
	c.lg = lg.With(zap.String("path", full))
	c.ctx, c.cancel = context.WithCancel(context.Background())
	return c, nil
}

// Path returns the counter's path as given to the constructor.
func (c *Counter[T]) Path() string { return c.path }

func (c *Counter[T]) errf(err error) error { return engine.NewError("counter", c.path, err) }

func (c *Counter[T]) encode(v T) []byte {
	b := make([]byte, c.size)
	if c.size == 8 {
		binary.BigEndian.PutUint64(b, uint64(int64(v)))
	} else {
		binary.BigEndian.PutUint32(b, uint32(int32(v)))
	}
	return b
}

// decode reads Curator's encoding; empty data reads as 0, as in Curator.
func (c *Counter[T]) decode(b []byte) (T, error) {
	switch {
	case len(b) == 0:
		return 0, nil
	case len(b) != c.size:
		return 0, fmt.Errorf("%w: %d bytes, want %d", ErrBadData, len(b), c.size)
	case c.size == 8:
		return T(int64(binary.BigEndian.Uint64(b))), nil
	}
	return T(int32(binary.BigEndian.Uint32(b))), nil
}

// begin merges ctx with Close; it fails for a nil ctx and after Close.
func (c *Counter[T]) begin(ctx context.Context) (context.Context, context.CancelFunc, error) {
	actx, end, err := engine.CallContext(ctx, c.ctx)
	if err != nil {
		return nil, nil, c.errf(err)
	}
	return actx, end, nil
}

// result names a call's error: Close's, or err within the counter's name.
func (c *Counter[T]) result(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	if ctx.Err() == nil && c.ctx.Err() != nil {
		err = replaceCause(err, engine.Closed())
	}
	return c.errf(err)
}

// replaceCause keeps an ErrUnknownOutcome marker and puts cause under it.
func replaceCause(err, cause error) error { return engine.KeepUnknown(err, cause) }

// do runs op, a read, on a live epoch within ctx, retrying connection
// errors and going on on the next session after a loss.
func (c *Counter[T]) do(ctx context.Context, op func(*zk.Conn) error) error {
	return c.zs.RetryAcrossSessions(ctx, op)
}

// doWrite runs op, a write, as do does: the node is persistent, and every
// write is conditional, so a repeat applies at most once. w learns whether
// an attempt may have been applied unanswered.
func (c *Counter[T]) doWrite(ctx context.Context, w *zksession.Write, op func(*zk.Conn) error) error {
	return c.zs.RetryWriteAcrossSessions(ctx, w, op)
}

// read returns the value and version; a missing node is {0, -1}.
func (c *Counter[T]) read(ctx context.Context) (Value[T], error) {
	var data []byte
	var st *zk.Stat
	err := c.do(ctx, func(conn *zk.Conn) error {
		d, s, err := conn.Get(c.full)
		if err == nil {
			data, st = d, s
		}
		return zksession.Refused("read", c.full, err)
	})
	if errors.Is(err, zk.ErrNoNode) {
		return Value[T]{Version: -1}, nil
	}
	if err != nil {
		return Value[T]{}, err
	}
	v, err := c.decode(data)
	if err != nil {
		return Value[T]{}, err
	}
	return Value[T]{Value: v, Version: st.Version}, nil
}

// outcome says what a write attempt did.
type outcome int

const (
	applied outcome = iota // written
	raced                  // refused: someone wrote first (version or existence)
	failed                 // not written: err says why
	unknown                // perhaps written: err says why
)

// write writes v conditional on prev: a set with prev.Version, or a create
// when prev.Version is -1 (parents as container nodes).
func (c *Counter[T]) write(ctx context.Context, prev Value[T], v T) (Value[T], outcome, error) {
	data := c.encode(v)
	var st *zk.Stat
	var w zksession.Write
	var err error
	if prev.Version == -1 {
		if err = c.zs.EnsureContainers(ctx, path.Dir(c.full)); err != nil {
			return Value[T]{}, failed, err
		}
		err = c.doWrite(ctx, &w, func(conn *zk.Conn) error {
			_, err := conn.Create(c.full, data, zk.FlagPersistent, c.zs.ACL())
			return zksession.Refused("create", c.full, err)
		})
		if err == nil {
			return Value[T]{Value: v, Version: 0}, applied, nil
		}
	} else {
		err = c.doWrite(ctx, &w, func(conn *zk.Conn) error {
			s, err := conn.Set(c.full, data, prev.Version)
			if err == nil {
				st = s
			}
			return zksession.Refused("set", c.full, err)
		})
		if err == nil {
			return Value[T]{Value: v, Version: st.Version}, applied, nil
		}
	}
	switch {
	case w.Unknown():
		// An attempt was sent and its answer lost (then retried, or ctx
		// ended): it may have been applied, and a version that moved since
		// may have been moved by it.
		return prev, unknown, w.Result(err)
	case errors.Is(err, zk.ErrBadVersion), errors.Is(err, zk.ErrNodeExists), errors.Is(err, zk.ErrNoNode):
		return prev, raced, err
	}
	return prev, failed, err
}

// update applies f to the current value until a write of its result wins,
// retrying lost races as WithRetry says and taking the promotion lock as
// WithPromotion says. f returns ok false to stop without writing (and the
// current value).
func (c *Counter[T]) update(ctx context.Context, f func(cur Value[T]) (T, bool, error)) (Value[T], bool, error) {
	b := c.cfg.retry()
	lost := 0
	var lease *engine.Lease
	defer func() {
		if lease != nil {
			// At most cleanupTimeout, past ctx too: what is not done by
			// then (a dropped connection) the session's queue finishes.
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
			defer cancel()
			if err := lease.Release(rctx); err != nil {
				c.lg.Warn("releasing the promotion lock", zap.Error(err))
			}
		}
	}()
	for {
		cur, err := c.read(ctx)
		if err != nil {
			return Value[T]{}, false, err
		}
		next, ok, err := f(cur)
		if err != nil || !ok {
			return cur, false, err
		}
		v, out, err := c.write(ctx, cur, next)
		switch out {
		case applied:
			return v, true, nil
		case unknown:
			return v, false, err // v: the value the write was conditional on
		case failed:
			return Value[T]{}, false, err
		}
		lost++
		d := b.NextBackOff()
		if c.lock != nil && lease == nil && (lost >= c.cfg.lockAfter || d == backoff.Stop) {
			if lease, err = c.lock.Acquire(ctx, engine.Standard("lock-", 1), c.data); err != nil {
				lease = nil
				return Value[T]{}, false, err
			}
			b = c.cfg.retry()
			continue
		}
		if d == backoff.Stop && lease != nil {
			// Under the lock the call goes on until it succeeds, fails or
			// ctx ends: once the BackOff stops, the default pauses follow.
			b = defaultRetry()
			d = b.NextBackOff()
		}
		if d == backoff.Stop {
			return cur, false, fmt.Errorf("%w: lost the race %d times", recipes.ErrBusy, lost)
		}
		if err := pause(ctx, d); err != nil {
			return Value[T]{}, false, err
		}
	}
}

// pause waits d or until ctx ends (a backoff between attempts).
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

// Get reads the counter from the server; a missing node reads as 0 with
// Version -1, as Curator reads it (the node is not created). ctx bounds it.
// Errors: ErrBadData, ctx's error, session.ErrClosed, ZooKeeper errors.
// Safe for concurrent use.
func (c *Counter[T]) Get(ctx context.Context) (Value[T], error) {
	actx, end, err := c.begin(ctx)
	if err != nil {
		return Value[T]{}, err
	}
	defer end()
	v, err := c.read(actx)
	return v, c.result(ctx, err)
}

// Add adds delta to the counter and returns the value it wrote: it reads
// the value and writes the sum conditional on the version read, again after
// each lost race (WithRetry, WithPromotion). A missing node is created
// (parents as container nodes). It blocks on ZooKeeper and on the pauses
// between attempts, within ctx, and after taking WithPromotion's lock up to
// 5 s more (past ctx too) to delete the lock's node.
//
// Errors: ErrOverflow when the sum leaves the counter's range (nothing is
// written); recipes.ErrUnknownOutcome (ErrUnknownOutcome) when the write
// was sent and may or may not have been applied (the connection dropped, or
// ctx ended or Close came while it was in flight; the error also matches
// ctx's, or session.ErrClosed), and then the returned Value is the one the
// write was conditional on: TrySet with it and the same sum applies the
// change only if nothing was written since, so it is never applied twice
// while the node is not deleted (calling Add again may apply it twice);
// recipes.ErrBusy when WithRetry's BackOff stopped and there is no
// promotion; ErrBadData; ctx's error or session.ErrClosed alone when nothing
// was sent (while the connection is down the call waits for it within ctx);
// ZooKeeper errors. Safe for concurrent use.
func (c *Counter[T]) Add(ctx context.Context, delta T) (Value[T], error) {
	actx, end, err := c.begin(ctx)
	if err != nil {
		return Value[T]{}, err
	}
	defer end()
	v, _, err := c.update(actx, func(cur Value[T]) (T, bool, error) {
		s := cur.Value + delta
		if (delta > 0 && s < cur.Value) || (delta < 0 && s > cur.Value) {
			return 0, false, fmt.Errorf("%w: %d + %d", ErrOverflow, cur.Value, delta)
		}
		return s, true, nil
	})
	return v, c.result(ctx, err)
}

// Increment is Add(ctx, 1).
func (c *Counter[T]) Increment(ctx context.Context) (Value[T], error) { return c.Add(ctx, 1) }

// Decrement is Add(ctx, -1).
func (c *Counter[T]) Decrement(ctx context.Context) (Value[T], error) { return c.Add(ctx, -1) }

// CompareAndSet writes n if the counter's value is expected (Curator's
// compareAndSet): it returns the value written and true, or the current
// value and false when the value is another, or changed between the read
// and the write. A missing node reads as 0, and is created when expected is
// 0 (Curator does not create it). ctx bounds it. Errors as Add's: on
// ErrUnknownOutcome, retry with TrySet and the returned Value, not with
// CompareAndSet, which may apply it again after others moved the value
// back. Safe for concurrent use.
func (c *Counter[T]) CompareAndSet(ctx context.Context, expected, n T) (Value[T], bool, error) {
	actx, end, err := c.begin(ctx)
	if err != nil {
		return Value[T]{}, false, err
	}
	defer end()
	cur, err := c.read(actx)
	if err != nil {
		return Value[T]{}, false, c.result(ctx, err)
	}
	if cur.Value != expected {
		return cur, false, nil
	}
	return c.trySet(ctx, actx, cur, n)
}

// TrySet writes n only if the node's version is still prev.Version (a Value
// that Get, Add, CompareAndSet or TrySet returned; Version -1: only if the
// node does not exist): it returns the value written and true, or, when
// someone wrote since, the current value and false. It makes one write: a
// lost race is not retried. After ErrUnknownOutcome (the returned Value is
// prev), calling TrySet again with the same prev is safe: a write
// conditional on one version applies at most once, as long as the node is
// not deleted and created again (its versions then start again at 0, and
// prev may match the new node). ctx bounds it. Safe for concurrent use.
func (c *Counter[T]) TrySet(ctx context.Context, prev Value[T], n T) (Value[T], bool, error) {
	actx, end, err := c.begin(ctx)
	if err != nil {
		return Value[T]{}, false, err
	}
	defer end()
	if prev.Version < -1 {
		return Value[T]{}, false, c.errf(fmt.Errorf("%w: version %d", session.ErrBadArgument, prev.Version))
	}
	return c.trySet(ctx, actx, prev, n)
}

func (c *Counter[T]) trySet(ctx, actx context.Context, prev Value[T], n T) (Value[T], bool, error) {
	v, out, err := c.write(actx, prev, n)
	switch out {
	case applied:
		return v, true, nil
	case raced:
		cur, err := c.read(actx)
		if err != nil {
			return Value[T]{}, false, c.result(ctx, err)
		}
		return cur, false, nil
	case unknown:
		return v, false, c.result(ctx, err) // v is prev: TrySet again with it
	}
	return Value[T]{}, false, c.result(ctx, err)
}

// Close makes every call in progress return an error matching
// session.ErrClosed, and later calls fail with it. The node stays.
// Idempotent.
func (c *Counter[T]) Close() error {
	c.once.Do(func() {
		c.cancel()
		if c.lock != nil {
			_ = c.lock.Close()
		}
	})
	return nil
}
