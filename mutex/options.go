package mutex

import (
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/zkrecipes/zkrecipes/internal/participant"
	"github.com/zkrecipes/zkrecipes/recipes"
	"github.com/zkrecipes/zkrecipes/session"
)

// Option configures a lock constructor (New, NewReentrant, NewNonFair).
type Option func(*config) error

type config struct {
	id        string
	idSet     bool
	nodeWatch bool
	lg        *zap.Logger
	cleanup   time.Duration
}

// newInternals builds the configuration and the engine every lock type runs on.
func newInternals(sess *session.Session, path string, opts []Option) (*recipes.Engine, *config, error) {
	c, err := buildConfig(opts)
	if err != nil {
		return nil, nil, recipes.NewError("mutex", path, err)
	}
	in, err := recipes.NewEngine(sess, path, c.internalsOptions()...)
	if err != nil {
		return nil, nil, err
	}
	return in, c, nil
}

func buildConfig(opts []Option) (*config, error) {
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
		c.id = LocalID()
	}
	return c, nil
}

func (c *config) internalsOptions() []recipes.Option {
	o := []recipes.Option{
		recipes.WithName("mutex"),
		recipes.WithNodeWatch(c.nodeWatch),
	}
	if c.lg != nil {
		o = append(o, recipes.WithLogger(c.lg))
	}
	if c.cleanup > 0 {
		o = append(o, recipes.WithCleanupTimeout(c.cleanup))
	}
	return o
}

// WithID sets the participant id stored in our lock node (Curator reads it as
// the node's data). It must be non-empty valid UTF-8 of at most 512 KiB
// without NUL bytes (a node stays well under ZooKeeper's 1 MiB packet limit);
// otherwise the constructor returns an error matching ErrBadOption. Default:
// LocalID(), as Curator's default is the local IP address as text.
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
// deletion by a third party (an operator, a cleanup job) ends the lease at
// once with ErrLockLost (default true). A holder sets it 100 ms after Lock
// returned (no latency added), or inherits it from its wait when it waited
// next in line for longer than 100 ms; so a deletion, before or after Lock
// returned, ends the lease at once, or at the latest 100 ms (and a round
// trip) after Lock returned. It costs one request and one watch notification
// per hold (or wait next in line) longer than 100 ms, none for a shorter one.
// It is also what lets a fair waiter take over on its predecessor's deletion
// notice without reading the children, and so look ahead (see Algorithm in
// the package doc): a Lock that queues behind two or more others costs one
// more data watch, and its handoff one round trip less. Without it, the
// holder learns of such a deletion only when its session ends, while the
// next waiter already holds the lock, and every handoff reads the children.
func WithNodeWatch(on bool) Option {
	return func(c *config) error {
		c.nodeWatch = on
		return nil
	}
}

// WithLogger sets the logger (default: the session's logger, named "mutex").
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
// canceled Lock (default 5s); after it the delete is left to the session's
// guaranteed-delete queue.
func WithCleanupTimeout(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("%w: cleanup timeout %v", ErrBadOption, d)
		}
		c.cleanup = d
		return nil
	}
}

// LocalID returns the default participant id, as Curator's: the local IP
// address as text (the first IPv4, else IPv6, address of an up, non-loopback
// interface, link-local addresses excluded); the host name if there is none;
// "127.0.0.1" if that fails too. It does no network I/O.
func LocalID() string { return participant.LocalID() }
