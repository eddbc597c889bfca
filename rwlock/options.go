package rwlock

import (
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/zkrecipes/zkrecipes/internal/participant"
	"github.com/zkrecipes/zkrecipes/recipes"
	"github.com/zkrecipes/zkrecipes/session"
)

// Option configures New and NewReentrant.
type Option func(*config) error

type config struct {
	id        string
	idSet     bool
	nodeWatch bool
	lg        *zap.Logger
	cleanup   time.Duration
}

// newCore builds the configuration and the engine both lock kinds run on.
func newCore(sess *session.Session, path string, opts []Option) (*core, error) {
	c := &config{nodeWatch: true}
	for _, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("%w: nil option", ErrBadOption)
		}
		if err := o(c); err != nil {
			return nil, err
		}
	}
	if !c.idSet {
		c.id = participant.LocalID()
	}
	io := []recipes.Option{
		recipes.WithName("rwlock"),
		recipes.WithNodeWatch(c.nodeWatch),
	}
	if c.lg != nil {
		io = append(io, recipes.WithLogger(c.lg))
	}
	if c.cleanup > 0 {
		io = append(io, recipes.WithCleanupTimeout(c.cleanup))
	}
	in, err := recipes.NewEngine(sess, path, io...)
	if err != nil {
		return nil, err
	}
	return &core{in: in, path: path, id: c.id}, nil
}

// WithID sets the participant id stored in our lock nodes (Curator stores
// the lockData given to InterProcessReadWriteLock there). It must be
// non-empty valid UTF-8 of at most 512 KiB without NUL bytes; otherwise the
// constructor returns an error matching ErrBadOption. Default: the local IP
// address as text, as Curator's default node data.
func WithID(id string) Option {
	return func(c *config) error {
		if err := participant.Validate(id); err != nil {
			return fmt.Errorf("%w: %w", ErrBadOption, err)
		}
		c.id, c.idSet = id, true
		return nil
	}
}

// WithNodeWatch says whether a held lease watches its own node, so that a
// deletion by a third party ends the lease at once with ErrLockLost (default
// true), or at the latest 100 ms (and a round trip) after the acquire
// returned: the watch is set once a lease has been held 100 ms (or inherited
// from a wait next in line that lasted 100 ms), so it adds no latency to an
// acquire, and costs one request and one watch notification at the release
// only for a longer hold or wait. Without
// it, the holder learns of such a deletion only when its session ends.
func WithNodeWatch(on bool) Option {
	return func(c *config) error {
		c.nodeWatch = on
		return nil
	}
}

// WithLogger sets the logger (default: the session's logger, named "rwlock").
func WithLogger(lg *zap.Logger) Option {
	return func(c *config) error {
		if lg == nil {
			return fmt.Errorf("%w: nil logger", ErrBadOption)
		}
		c.lg = lg
		return nil
	}
}

// WithCleanupTimeout bounds the detached delete of the node of a failed or
// canceled acquire (default 5s); after it the delete is left to the
// session's guaranteed-delete queue.
func WithCleanupTimeout(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("%w: cleanup timeout %v", ErrBadOption, d)
		}
		c.cleanup = d
		return nil
	}
}
