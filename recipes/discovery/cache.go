package discovery

import (
	"sort"
	"sync"

	"go.uber.org/zap"

	"github.com/zkrecipes/zkrecipes/internal/engine"
	"github.com/zkrecipes/zkrecipes/internal/eventqueue"
	"github.com/zkrecipes/zkrecipes/recipes/cache"
	"github.com/zkrecipes/zkrecipes/session"
)

// Event is one change of a Cache.
type Event struct {
	// Type says what happened: cache.Added, cache.Updated, cache.Removed,
	// or cache.Initialized once after the first load.
	Type cache.EventType
	// Instance is the instance after the change (Added, Updated), or as
	// last read before it went (Removed); the zero Instance for Initialized.
	Instance Instance
}

// Cache keeps a copy of the instances of one service (Curator's
// ServiceCache), built on a cache.ChildrenCache of <base>/<name>: Instances
// reads the copy without touching the network, Events reports each change.
// A node whose data does not parse as an instance is left out and logged
// (and reported Removed if it held an instance before). It is safe for
// concurrent use.
type Cache struct {
	path string // base/name, as given
	cc   *cache.ChildrenCache
	lg   *zap.Logger
	q    *eventqueue.Queue[Event]
	init chan struct{}
	wg   sync.WaitGroup

	closeOnce sync.Once

	mu      sync.RWMutex
	byNode  map[string]Instance // by node name
	snap    []entry             // sorted by node name; nil after a change
	stopped bool                // Close, or the session closed: the copy is final
}

// entry is an instance with the name of its node.
type entry struct {
	node string
	inst Instance
}

// NewCache starts a cache of the instances of the service name under base
// on sess. It validates its arguments and does no I/O itself: a goroutine
// loads the instances (Initialized is closed when it has) and follows their
// changes until Close or until the session is closed. The service's node
// need not exist; the cache never creates it. Options: WithLogger,
// WithEvents. A nil session, a bad base or name, or a bad option gives an
// error matching session.ErrBadArgument, and starts nothing.
func NewCache(sess *session.Session, base, name string, opts ...Option) (*Cache, error) {
	p := base + "/" + name
	zs, sp, _, err := servicePath(sess, base, name)
	if err != nil {
		return nil, engine.NewError(recipe, p, err)
	}
	p = sp
	cfg, err := buildConfig(forCache, opts)
	if err != nil {
		return nil, engine.NewError(recipe, p, err)
	}
	lg := cfg.lg
	if lg == nil {
		lg = zs.Logger()
	}
	lg = lg.Named(recipe)
	cc, err := cache.NewChildren(sess, p, cache.WithLogger(lg))
	if err != nil {
		return nil, engine.NewError(recipe, p, unwrapCache(err))
	}
	c := &Cache{
		path:   p,
		cc:     cc,
		lg:     lg.With(zap.String("path", p)),
		q:      eventqueue.New[Event](cfg.events),
		init:   make(chan struct{}),
		byNode: make(map[string]Instance),
	}
	c.wg.Add(2)
	go func() { defer c.wg.Done(); c.q.Pump() }()
	go func() { defer c.wg.Done(); c.run() }()
	return c, nil
}

// unwrapCache takes off package cache's name and path from err.
func unwrapCache(err error) error {
	if e, ok := err.(*engine.Error); ok && e.Recipe == "cache" {
		return e.Err
	}
	return err
}

// run applies the children cache's events to the copy of instances, in
// order, and pushes this cache's events.
func (c *Cache) run() {
	defer func() {
		c.mu.Lock()
		c.stopped = true
		c.mu.Unlock()
		c.q.Finish()
	}()
	for ev := range c.cc.Events() {
		switch ev.Type {
		case cache.Initialized:
			close(c.init)
			c.q.Push(Event{Type: cache.Initialized})
		case cache.Removed:
			if old, ok := c.remove(ev.Node.Name()); ok {
				c.q.Push(Event{Type: cache.Removed, Instance: old})
			}
		case cache.Added, cache.Updated:
			name := ev.Node.Name()
			var in Instance
			if err := in.UnmarshalJSON(ev.Node.Data); err != nil {
				c.lg.Warn("a node that is not an instance: left out", zap.String("node", name), zap.Error(err))
				if old, ok := c.remove(name); ok {
					c.q.Push(Event{Type: cache.Removed, Instance: old})
				}
				continue
			}
			c.mu.Lock()
			_, had := c.byNode[name]
			c.byNode[name] = in
			c.snap = nil
			c.mu.Unlock()
			t := cache.Added
			if had {
				t = cache.Updated
			}
			c.q.Push(Event{Type: t, Instance: in})
		}
	}
}

func (c *Cache) remove(name string) (Instance, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	old, ok := c.byNode[name]
	if ok {
		delete(c.byNode, name)
		c.snap = nil
	}
	return old, ok
}

// entries returns the copy sorted by node name, shared (do not modify it),
// and whether the cache has stopped.
func (c *Cache) entries() ([]entry, bool) {
	c.mu.RLock()
	snap, stopped := c.snap, c.stopped
	c.mu.RUnlock()
	if snap != nil {
		return snap, stopped
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.snap == nil {
		snap := make([]entry, 0, len(c.byNode))
		for n, in := range c.byNode {
			snap = append(snap, entry{n, in})
		}
		sort.Slice(snap, func(i, j int) bool { return snap[i].node < snap[j].node })
		c.snap = snap
	}
	return c.snap, c.stopped
}

// Instances returns the cached instances, sorted by node name (their ID,
// but for DynamicSequential instances). It never blocks on the network; the
// slice is the caller's, the Payloads are shared.
func (c *Cache) Instances() []Instance {
	snap, _ := c.entries()
	out := make([]Instance, len(snap))
	for i, e := range snap {
		out[i] = e.inst
	}
	return out
}

// Events returns the channel of the cache's events, as a
// cache.ChildrenCache's: Added, Updated and Removed for each instance, in
// the order its changes were read; Initialized once, after the Added events
// of the first load. It is closed after Close, or after the session is
// closed and the last event was received. With WithEvents(false) it
// delivers nothing and is closed the same way.
func (c *Cache) Events() <-chan Event { return c.q.Out() }

// Initialized returns a channel that is closed once the first load is done.
// It is never closed if the cache is closed first.
func (c *Cache) Initialized() <-chan struct{} { return c.init }

// Close stops the cache and returns after its goroutines have exited;
// undelivered events are dropped and Events is closed. Instances still
// returns the last copy. Idempotent; it returns nil.
func (c *Cache) Close() error {
	c.closeOnce.Do(func() {
		c.cc.Close()
		c.q.Stop()
		c.wg.Wait()
	})
	return nil
}
