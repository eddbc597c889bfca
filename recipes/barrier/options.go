package barrier

import (
	"fmt"

	"go.uber.org/zap"

	"github.com/zkrecipes/zkrecipes/internal/engine"
	"github.com/zkrecipes/zkrecipes/internal/participant"
	"github.com/zkrecipes/zkrecipes/session"
)

// Option configures New and NewDouble. An invalid value makes the
// constructor fail with an error matching session.ErrBadArgument.
type Option func(*config) error

type config struct {
	data []byte
	lg   *zap.Logger
}

func buildConfig(opts []Option) (*config, error) {
	_, data := participant.Local()
	c := &config{data: data}
	if err := engine.ApplyOptions(c, opts); err != nil {
		return nil, err
	}
	return c, nil
}

// WithID sets the participant id stored as the data of the nodes this
// process creates (the barrier node, a member node). It must be non-empty
// valid UTF-8 of at most 512 KiB without NUL bytes. Default: the local IP
// address as text, Curator's default node data.
func WithID(id string) Option {
	return func(c *config) error {
		if err := participant.Validate(id); err != nil {
			return fmt.Errorf("%w: %w", session.ErrBadArgument, err)
		}
		c.data = []byte(id)
		return nil
	}
}

// WithLogger sets the logger (default: the session's logger, named
// "barrier").
func WithLogger(lg *zap.Logger) Option {
	return func(c *config) error {
		if lg == nil {
			return fmt.Errorf("%w: nil logger", session.ErrBadArgument)
		}
		c.lg = lg
		return nil
	}
}
