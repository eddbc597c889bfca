package discovery

import (
	"time"

	"go.uber.org/zap"
)

// Option configures Register, NewCache or NewProvider. An option that does
// not apply to the call, or an invalid one, is returned as an error matching
// session.ErrBadArgument.
type Option func(*config) error

type config struct {
	lg *zap.Logger
}

// WithLogger sets the logger of a Registration or a Cache (default: the
// session's logger, named "discovery").
func WithLogger(lg *zap.Logger) Option {
	return func(c *config) error { return nil }
}

// WithEvents says whether a Cache delivers events on its Events channel
// (default true). Events not yet received are kept in memory: a cache that
// is only read with Instances, or only used by a Provider, should say false.
func WithEvents(on bool) Option {
	return func(c *config) error { return nil }
}

// Strategy says how a Provider picks among the instances it may pick.
type Strategy int

const (
	// RoundRobin (the default) picks each instance in turn.
	RoundRobin Strategy = iota
	// Random picks an instance at random.
	Random
	// Sticky picks an instance in turn and keeps picking it as long as it
	// may be picked.
	Sticky
)

// String returns the strategy's name, e.g. "RoundRobin".
func (s Strategy) String() string { return "" }

// WithStrategy sets a Provider's strategy (default RoundRobin).
func WithStrategy(s Strategy) Option {
	return func(c *config) error { return nil }
}

// WithDownPolicy sets a Provider's down-instance policy: an instance
// reported down (Provider.ReportDown) errors times within timeout of the
// first report is not picked until timeout after that first report.
// Curator's default, and this package's, is 2 errors and 30 s.
func WithDownPolicy(errors int, timeout time.Duration) Option {
	return func(c *config) error { return nil }
}
