package rwlock

import (
	"fmt"

	"go.uber.org/zap"

	"github.com/zkrecipes/zkrecipes/internal/engine"
	"github.com/zkrecipes/zkrecipes/internal/participant"
	"github.com/zkrecipes/zkrecipes/session"
)

// Option configures New and NewReentrant.
type Option func(*config) error

type config struct {
	id        string
	data      []byte // id's bytes: shared when id is the default (participant.Local)
	nodeWatch bool
	lg        *zap.Logger
	name      string // WithName
}

// newCore builds the configuration and the engine both lock kinds run on.
func newCore(sess *session.Session, path string, opts []Option) (*core, error) {
	id, data := participant.Local()
	c := &config{id: id, data: data, nodeWatch: true}
	if err := engine.ApplyOptions(c, opts); err != nil {
		return nil, engine.NewError("rwlock", path, err)
	}
	eopts := []engine.Option{engine.WithName("rwlock"), engine.WithNodeWatch(c.nodeWatch), engine.WithObserved("", c.name)}
	if c.lg != nil {
		eopts = append(eopts, engine.WithLogger(c.lg))
	}
	e, err := engine.New(sess, path, eopts...)
	if err != nil {
		return nil, err
	}
	return &core{e: e, path: path, data: c.bytes()}, nil
}

// WithID sets the participant id stored in our lock nodes (Curator stores
// the lockData given to InterProcessReadWriteLock there). It must be
// non-empty valid UTF-8 of at most 512 KiB without NUL bytes; otherwise the
// constructor returns an error matching session.ErrBadArgument. Default: the local IP
// address as text, as Curator's default node data.
func WithID(id string) Option {
	return func(c *config) error {
		if err := participant.Validate(id); err != nil {
			return fmt.Errorf("%w: %w", session.ErrBadArgument, err)
		}
		c.id, c.data = id, nil
		return nil
	}
}

// WithNodeWatch says whether a held lease watches its own node, so that a
// deletion by a third party ends the lease at once with recipes.ErrNodeDeleted (default
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
			return fmt.Errorf("%w: nil logger", session.ErrBadArgument)
		}
		c.lg = lg
		return nil
	}
}

// bytes returns the participant id as node data.
func (c *config) bytes() []byte {
	if c.data == nil {
		c.data = []byte(c.id)
	}
	return c.data
}

// WithName names this lock in the session's hooks (session.Hooks: the
// Recipe's Name), for metrics and traces. Give the locks of one purpose one
// name ("orders"), not one per key: metric series multiply with names. It
// must be non-empty valid UTF-8 of at most 100 bytes. Default: none ("").
func WithName(name string) Option {
	return func(c *config) error {
		if err := engine.CheckUserName(name); err != nil {
			return err
		}
		c.name = name
		return nil
	}
}
