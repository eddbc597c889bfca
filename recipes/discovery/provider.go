package discovery

// Provider picks an instance of a service from a Cache (Curator's
// ServiceProvider): by its Strategy, among the cached instances that are
// enabled and not reported down. It reads the cache's copy at every Pick,
// so it never hands out an instance the cache has seen removed. It starts
// no goroutine and needs no Close. It is safe for concurrent use.
type Provider struct {
	_ struct{}
}

// NewProvider returns a provider over c. Options: WithStrategy,
// WithDownPolicy. A nil cache or a bad option gives an error matching
// session.ErrBadArgument.
func NewProvider(c *Cache, opts ...Option) (*Provider, error) {
	return nil, nil
}

// Pick returns an instance (Curator's getInstance). It never blocks on the
// network. It returns an error matching ErrNoInstances when no instance may
// be picked, and session.ErrClosed once the cache is closed.
func (p *Provider) Pick() (Instance, error) { return Instance{}, nil }

// ReportDown notes that inst failed (Curator's noteError): an instance
// reported as often as the down policy says (WithDownPolicy) is not picked
// until the policy's timeout has passed. Instances are told apart by Name
// and ID.
func (p *Provider) ReportDown(inst Instance) {}
