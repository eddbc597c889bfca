package discovery

import (
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/zkrecipes/zkrecipes/internal/engine"
	"github.com/zkrecipes/zkrecipes/session"
)

// Option configures Register, NewCache or NewProvider. An option that does
// not apply to the call, or an invalid one, is returned as an error matching
// session.ErrBadArgument.
type Option func(*config) error

// target is what an Option configures.
type target int

const (
	forRegister target = iota + 1
	forCache
	forProvider
)

func (t target) String() string {
	switch t {
	case forRegister:
		return "Register"
	case forCache:
		return "NewCache"
	}
	return "NewProvider"
}

type config struct {
	target target

	lg *zap.Logger // Register, NewCache

	events bool // NewCache

	strategy     Strategy      // NewProvider
	downErrors   int           // NewProvider
	downDuration time.Duration // NewProvider
}

// Curator's DownInstancePolicy defaults.
const (
	defaultDownErrors  = 2
	defaultDownTimeout = 30 * time.Second
)

func buildConfig(t target, opts []Option) (*config, error) {
	c := &config{
		target:       t,
		events:       true,
		strategy:     RoundRobin,
		downErrors:   defaultDownErrors,
		downDuration: defaultDownTimeout,
	}
	if err := engine.ApplyOptions(c, opts); err != nil {
		return nil, err
	}
	return c, nil
}

// only refuses an option that does not apply to c's call.
func (c *config) only(name string, ts ...target) error {
	for _, t := range ts {
		if c.target == t {
			return nil
		}
	}
	return fmt.Errorf("%w: %s does not apply to %v", session.ErrBadArgument, name, c.target)
}

// WithLogger sets the logger of a Registration or a Cache (default: the
// session's logger). The package names it "discovery" and adds the path.
func WithLogger(lg *zap.Logger) Option {
	return func(c *config) error {
		if err := c.only("WithLogger", forRegister, forCache); err != nil {
			return err
		}
		if lg == nil {
			return fmt.Errorf("%w: nil logger", session.ErrBadArgument)
		}
		c.lg = lg
		return nil
	}
}

// WithEvents says whether a Cache delivers events on its Events channel
// (default true). Events not yet received are kept in memory, however
// many: a cache that is only read with Instances, or only used by a
// Provider, should say false.
func WithEvents(on bool) Option {
	return func(c *config) error {
		if err := c.only("WithEvents", forCache); err != nil {
			return err
		}
		c.events = on
		return nil
	}
}

// Strategy says how a Provider picks among the instances it may pick (those
// of its cache, sorted by node name, that are in service and not down).
type Strategy int

const (
	// RoundRobin (the default) picks each instance in turn, as Curator's
	// RoundRobinStrategy.
	RoundRobin Strategy = iota
	// Random picks an instance at random, as Curator's RandomStrategy.
	Random
	// Sticky picks an instance in turn and keeps picking it as long as it
	// may be picked, as Curator's StickyStrategy over a RoundRobinStrategy.
	Sticky
)

// String returns the strategy's name, e.g. "RoundRobin".
func (s Strategy) String() string {
	switch s {
	case RoundRobin:
		return "RoundRobin"
	case Random:
		return "Random"
	case Sticky:
		return "Sticky"
	}
	return fmt.Sprintf("Strategy(%d)", int(s))
}

// WithStrategy sets a Provider's strategy (default RoundRobin).
func WithStrategy(s Strategy) Option {
	return func(c *config) error {
		if err := c.only("WithStrategy", forProvider); err != nil {
			return err
		}
		switch s {
		case RoundRobin, Random, Sticky:
		default:
			return fmt.Errorf("%w: strategy %v", session.ErrBadArgument, s)
		}
		c.strategy = s
		return nil
	}
}

// WithDownPolicy sets a Provider's down-instance policy, Curator's
// DownInstancePolicy: an instance reported down (Provider.ReportDown)
// errors times within timeout of its first report is not picked until
// timeout after that first report; then its reports are forgotten. Curator's
// default, and this package's, is 2 errors and 30 s. errors must be at
// least 1 and timeout positive.
func WithDownPolicy(errors int, timeout time.Duration) Option {
	return func(c *config) error {
		if err := c.only("WithDownPolicy", forProvider); err != nil {
			return err
		}
		if errors < 1 || timeout <= 0 {
			return fmt.Errorf("%w: down policy of %d errors in %v", session.ErrBadArgument, errors, timeout)
		}
		c.downErrors, c.downDuration = errors, timeout
		return nil
	}
}
