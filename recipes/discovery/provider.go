package discovery

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zkrecipes/zkrecipes/internal/engine"
	"github.com/zkrecipes/zkrecipes/session"
)

// Provider picks an instance of a service from a Cache (Curator's
// ServiceProvider): by its Strategy, among the cached instances that are in
// service (Instance.InService) and not down (see WithDownPolicy). It reads
// the cache's copy at every Pick, so it never hands out an instance the
// cache has seen removed (or that has not been loaded yet: Pick before the
// cache's first load finds none). It starts no goroutine and needs no Close. It is safe for
// concurrent use.
type Provider struct {
	c        *Cache
	strategy Strategy
	errors   int
	timeout  time.Duration
	now      func() time.Time

	next atomic.Uint64 // RoundRobin's (and Sticky's) counter

	mu     sync.Mutex
	sticky instanceKey            // Sticky: the instance picked last; zero for none
	down   map[instanceKey]*downs // reports per instance, within the timeout
}

// instanceKey tells instances apart for ReportDown and Sticky: a
// registration again of the same ID is a new instance, as in Curator, which
// compares whole instances.
type instanceKey struct {
	name, id string
	reg      int64
}

func keyOf(in Instance) instanceKey {
	return instanceKey{in.Name, in.ID, millis(in.RegistrationTime)}
}

// downs counts an instance's reports since its first.
type downs struct {
	first time.Time
	count int
}

// NewProvider returns a provider over c. Options: WithStrategy,
// WithDownPolicy. A nil cache or a bad option gives an error matching
// session.ErrBadArgument.
func NewProvider(c *Cache, opts ...Option) (*Provider, error) {
	if c == nil {
		return nil, engine.NewError(recipe, "", fmt.Errorf("%w: nil cache", session.ErrBadArgument))
	}
	cfg, err := buildConfig(forProvider, opts)
	if err != nil {
		return nil, engine.NewError(recipe, c.path, err)
	}
	return &Provider{
		c:        c,
		strategy: cfg.strategy,
		errors:   cfg.downErrors,
		timeout:  cfg.downDuration,
		now:      time.Now,
		down:     make(map[instanceKey]*downs),
	}, nil
}

// Pick returns an instance (Curator's getInstance). It never blocks on the
// network. It returns an error matching ErrNoInstances when no instance may
// be picked, and session.ErrClosed once the cache has stopped (closed, or
// its session closed).
func (p *Provider) Pick() (Instance, error) {
	snap, stopped := p.c.entries()
	if stopped {
		return Instance{}, engine.NewError(recipe, p.c.path, engine.Closed())
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.now()
	p.purgeLocked(now)
	ok := func(e *entry) bool {
		if !e.inst.InService() {
			return false
		}
		d := p.down[keyOf(e.inst)]
		return d == nil || d.count < p.errors
	}
	n := 0
	for i := range snap {
		if ok(&snap[i]) {
			n++
			if p.strategy == Sticky && keyOf(snap[i].inst) == p.sticky {
				return snap[i].inst, nil
			}
		}
	}
	if n == 0 {
		p.sticky = instanceKey{}
		return Instance{}, engine.NewError(recipe, p.c.path, ErrNoInstances)
	}
	var k int
	if p.strategy == Random {
		k = rand.IntN(n)
	} else {
		// Modulo in uint64: the counter converted to int first would turn
		// negative past int's range (2^31 picks where int has 32 bits).
		k = int((p.next.Add(1) - 1) % uint64(n))
	}
	for i := range snap {
		if !ok(&snap[i]) {
			continue
		}
		if k == 0 {
			if p.strategy == Sticky {
				p.sticky = keyOf(snap[i].inst)
			}
			return snap[i].inst, nil
		}
		k--
	}
	panic("discovery: pick out of range") // n counted the same entries
}

// ReportDown notes that inst failed (Curator's noteError): an instance
// reported as often as the down policy says within its timeout
// (WithDownPolicy) is not picked until the timeout has passed since its
// first report. Instances are told apart by Name, ID and RegistrationTime.
// It never blocks on the network.
func (p *Provider) ReportDown(inst Instance) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.now()
	p.purgeLocked(now)
	k := keyOf(inst)
	d := p.down[k]
	if d == nil {
		d = &downs{first: now}
		p.down[k] = d
	}
	d.count++
}

// purgeLocked forgets the reports of instances whose first report is a
// timeout old. p.mu held.
func (p *Provider) purgeLocked(now time.Time) {
	for k, d := range p.down {
		if now.Sub(d.first) >= p.timeout {
			delete(p.down, k)
		}
	}
}
