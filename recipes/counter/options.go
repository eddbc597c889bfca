package counter

import (
	"fmt"
	"time"

	"github.com/cenkalti/backoff/v4"
	"go.uber.org/zap"

	"github.com/zkrecipes/zkrecipes/internal/engine"
	"github.com/zkrecipes/zkrecipes/session"
)

// Option configures New and New32. An invalid value makes the constructor
// fail with an error matching session.ErrBadArgument.
type Option func(*config) error

type config struct {
	retry     func() backoff.BackOff
	lockPath  string
	lockAfter int
	lg        *zap.Logger
}

// defaultRetry pauses between optimistic attempts that lost a race: from
// 1 ms, doubling up to 100 ms, jittered by ±50 %, without end (ctx bounds
// the call). Doubling, as Curator's exponential retries do, rather than
// backoff's 1.5: writers that keep losing to each other spread apart
// within a few rounds.
func defaultRetry() backoff.BackOff {
	b := backoff.NewExponentialBackOff()
	b.InitialInterval = time.Millisecond
	b.Multiplier = 2
	b.MaxInterval = 100 * time.Millisecond
	b.MaxElapsedTime = 0
	b.Reset()
	return b
}

func buildConfig(opts []Option) (*config, error) {
	c := &config{retry: defaultRetry}
	if err := engine.ApplyOptions(c, opts); err != nil {
		return nil, err
	}
	return c, nil
}

// WithRetry sets the pauses between the attempts of one call that lost a
// race with another writer (Curator's RetryPolicy): each call gets a
// BackOff from factory. When the BackOff returns backoff.Stop the call
// takes the promotion lock (WithPromotion) or, without one, fails with an
// error matching recipes.ErrBusy. Under the lock the call gets a new
// BackOff from factory, and once that one stops it pauses as the default
// does: it never fails with ErrBusy there. Default: from 1 ms doubling to
// 100 ms, jittered by ±50 %, never stopping: ctx is the only bound.
func WithRetry(factory func() backoff.BackOff) Option {
	return func(c *config) error {
		if factory == nil {
			return fmt.Errorf("%w: nil retry factory", session.ErrBadArgument)
		}
		c.retry = factory
		return nil
	}
}

// WithPromotion makes a call that lost the race after optimistic attempts
// take a fair mutex at lockPath (Curator's PromotedToLock: an
// InterProcessMutex, whose nodes Curator processes share) and go on under
// it until it succeeds, fails or ctx ends; the writes stay conditional on
// the node's version, so writers without the lock stay correct. It is taken
// after attempts lost races (at least 1), or earlier when WithRetry's
// BackOff stops. The call deletes its lock node before it returns, waiting
// for that at most 5 s (past ctx too); what is not done by then, as when the
// connection is down, the session finishes once the connection is back.
// lockPath must differ from the counter's path.
func WithPromotion(lockPath string, attempts int) Option {
	return func(c *config) error {
		if attempts < 1 {
			return fmt.Errorf("%w: promotion after %d attempts: want at least 1", session.ErrBadArgument, attempts)
		}
		if lockPath == "" {
			return fmt.Errorf("%w: empty promotion lock path", session.ErrBadArgument)
		}
		c.lockPath, c.lockAfter = lockPath, attempts
		return nil
	}
}

// WithLogger sets the logger (default: the session's logger, named
// "counter").
func WithLogger(lg *zap.Logger) Option {
	return func(c *config) error {
		if lg == nil {
			return fmt.Errorf("%w: nil logger", session.ErrBadArgument)
		}
		c.lg = lg
		return nil
	}
}
