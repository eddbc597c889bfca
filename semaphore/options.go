package semaphore

import (
	"fmt"

	"go.uber.org/zap"

	"github.com/zkrecipes/zkrecipes/internal/engine"
	"github.com/zkrecipes/zkrecipes/internal/participant"
	"github.com/zkrecipes/zkrecipes/session"
)

// Option configures New, NewShared and NewMutex.
type Option func(*config) error

type config struct {
	id        string
	nodeWatch bool
	lg        *zap.Logger
	name      string // WithName
}

func buildConfig(opts []Option) (*config, error) {
	id, _ := participant.Local()
	c := &config{id: id, nodeWatch: true}
	if err := engine.ApplyOptions(c, opts); err != nil {
		return nil, err
	}
	return c, nil
}

// WithID sets the participant id stored in our lease and acquirer nodes
// (Curator's setNodeData; Participants reads it back). It must be non-empty
// valid UTF-8 of at most 512 KiB without NUL bytes; otherwise the
// constructor returns an error matching session.ErrBadArgument. Default: the
// local IP address as text, Curator's default node data.
func WithID(id string) Option {
	return func(c *config) error {
		if err := participant.Validate(id); err != nil {
			return fmt.Errorf("%w: %w", session.ErrBadArgument, err)
		}
		c.id = id
		return nil
	}
}

// WithNodeWatch says whether a held lease watches its own node, so that a
// deletion by a third party (an operator, a cleanup job) ends the lease at
// once with recipes.ErrNodeDeleted (default true), or at the latest 100 ms (and a round
// trip) after the acquire returned: the watch is set once a lease has been
// held 100 ms, so it adds no latency to Acquire, and costs one request and
// one watch notification at the release only for a lease held longer. Without it, the holder learns of such a
// deletion only when its session ends, while someone else may already hold
// the freed lease.
func WithNodeWatch(on bool) Option {
	return func(c *config) error {
		c.nodeWatch = on
		return nil
	}
}

// WithLogger sets the logger (default: the session's logger, named
// "semaphore").
func WithLogger(lg *zap.Logger) Option {
	return func(c *config) error {
		if lg == nil {
			return fmt.Errorf("%w: nil logger", session.ErrBadArgument)
		}
		c.lg = lg
		return nil
	}
}

// WithName names this semaphore in the session's hooks (session.Hooks: the
// Recipe's Name), for metrics and traces. Give the semaphores of one purpose one
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
