package mutex

import (
	"fmt"

	"go.uber.org/zap"

	"github.com/zkrecipes/zkrecipes/internal/engine"
	"github.com/zkrecipes/zkrecipes/internal/participant"
	"github.com/zkrecipes/zkrecipes/session"
)

// Option configures a lock constructor (New, NewReentrant, NewNonFair). An
// invalid value makes the constructor fail with an error matching
// session.ErrBadArgument.
type Option func(*config) error

type config struct {
	id        string
	data      []byte // id's bytes: shared when id is the default (participant.Local)
	nodeWatch bool
	lookAhead bool // WithLookAhead
	lg        *zap.Logger
	name      string // WithName
}

// newEngine builds the configuration and the engine every lock kind runs on.
func newEngine(sess *session.Session, path string, opts []Option) (*engine.Engine, *config, error) {
	id, data := participant.Local()
	c := &config{id: id, data: data, nodeWatch: true}
	if err := engine.ApplyOptions(c, opts); err != nil {
		return nil, nil, engine.NewError("mutex", path, err)
	}
	eopts := []engine.Option{engine.WithName("mutex"), engine.WithNodeWatch(c.nodeWatch), engine.WithObserved("mutex", c.name)}
	if c.lg != nil {
		eopts = append(eopts, engine.WithLogger(c.lg))
	}
	e, err := engine.New(sess, path, eopts...)
	if err != nil {
		return nil, nil, err
	}
	return e, c, nil
}

// WithID sets the participant id stored in our lock nodes, which
// Participants and Holder report (Curator reads it as the node's data). It
// must be non-empty valid UTF-8 of at most 512 KiB without NUL bytes.
// Default: the local IP address as text, as in Curator (the first IPv4, else
// IPv6, address of an up, non-loopback interface; else the host name).
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
// deletion by a third party (an operator, a cleanup job) ends the lease with
// recipes.ErrNodeDeleted (default true): at once, or at the latest 100 ms
// and a round trip after Lock returned. It costs a request and a watch
// notification per hold (or wait next in line) longer than 100 ms, and it
// lets a fair waiter that queued right behind the holder take over on the
// holder's deletion notice without reading the children; WithLookAhead needs
// it (see the package documentation). Without it, the holder learns of such
// a deletion only when its session ends, while the next waiter already
// holds the lock, and every handoff reads the children.
func WithNodeWatch(on bool) Option {
	return func(c *config) error {
		c.nodeWatch = on
		return nil
	}
}

// WithLookAhead says whether a fair waiter two or more places back in the
// queue watches the node two places ahead of its own instead of its
// predecessor (default false). When that node goes, the waiter reads the
// children while its predecessor holds and watches the predecessor, so that
// it takes over on the predecessor's deletion notice without a read: a
// handoff one round trip shorter, for one more request per lock and up to
// one more watch notification per release (the release wakes the next
// waiter and the one behind it). Without it a lock costs the server what
// Curator's and go-zookeeper's locks cost (five requests and one
// notification per contended lock). It needs the node watch (see
// WithNodeWatch) and applies to New and NewReentrant; for a hot lock whose
// handoff latency matters more than the ensemble's load.
func WithLookAhead(on bool) Option {
	return func(c *config) error {
		c.lookAhead = on
		return nil
	}
}

// WithLogger sets the logger (default: the session's, named "mutex").
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
