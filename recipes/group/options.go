package group

import (
	"fmt"

	"go.uber.org/zap"

	"github.com/zkrecipes/zkrecipes/internal/engine"
	"github.com/zkrecipes/zkrecipes/session"
)

// Option configures a Node or a Member. An invalid option is returned by the
// constructor as an error matching session.ErrBadArgument.
type Option func(*config) error

type config struct {
	logger *zap.Logger
}

// WithLogger sets the logger. The default is the session's logger. The
// package names it "group" and adds the path.
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
	return c, nil
}
