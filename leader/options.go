package leader

import (
	"fmt"

	"go.uber.org/zap"

	"github.com/zkrecipes/zkrecipes/internal/engine"
	"github.com/zkrecipes/zkrecipes/internal/participant"
	"github.com/zkrecipes/zkrecipes/session"
)

// Option configures a Latch, a Selector or Run. Options are checked by the
// constructor: an invalid value, or an option that does not apply to the type
// being built, is returned as an error matching session.ErrBadArgument.
type Option func(*config) error

type config struct {
	id         string
	requeue    bool
	requeueSet bool
	logger     *zap.Logger
	name       string // WithName
}

// WithID sets the participant id, written as the data of this participant's
// node (UTF-8) and reported by Participants and Leader. It must be non-empty
// valid UTF-8 of at most 512 KiB without NUL bytes (a node stays well under
// ZooKeeper's 1 MiB packet limit); otherwise the constructor returns an error
// matching session.ErrBadArgument. The default, as in Curator, is the local IP address
// as text: the first IPv4, else IPv6, address of an up, non-loopback
// interface; the host name if there is none; "127.0.0.1" if that fails too.
func WithID(id string) Option {
	return func(c *config) error {
		if err := participant.Validate(id); err != nil {
			return fmt.Errorf("%w: %w", session.ErrBadArgument, err)
		}
		c.id = id
		return nil
	}
}

// WithRequeue says whether to campaign again after a term of leadership ends,
// whatever ended it (the callback or work returned or panicked, the term was
// resigned, or leadership was lost): at once after a term of at least a
// second, after a pause growing from 100 ms to 30 s after shorter ones (see
// Run). It applies to Selector (default false, as Curator's autoRequeue) and
// Run (default true; with false Run returns after its single term). A Latch
// always stays in the election until Close, so NewLatch rejects this option.
func WithRequeue(on bool) Option {
	return func(c *config) error {
		c.requeue = on
		c.requeueSet = true
		return nil
	}
}

// WithLogger sets the logger. The default is the session's logger. The
// package names it "leader" and adds the election path.
func WithLogger(lg *zap.Logger) Option {
	return func(c *config) error {
		if lg == nil {
			return fmt.Errorf("%w: nil logger", session.ErrBadArgument)
		}
		c.logger = lg
		return nil
	}
}

func buildConfig(opts []Option) (config, error) {
	var c config
	if err := engine.ApplyOptions(&c, opts); err != nil {
		return c, err
	}
	if c.id == "" {
		c.id, _ = participant.Local()
	}
	return c, nil
}

// WithName names this election in the session's hooks (session.Hooks: the
// Recipe's Name), for metrics and traces. Give the elections of one purpose one
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
