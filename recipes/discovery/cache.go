package discovery

import (
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
// A node whose data does not parse as an instance is left out and logged.
// It is safe for concurrent use.
type Cache struct {
	_ struct{}
}

// NewCache starts a cache of the instances of the service name under base
// on sess. It validates its arguments and does no I/O itself: a goroutine
// loads the instances (Initialized is closed when it has) and follows their
// changes until Close or until the session is closed. Options: WithLogger,
// WithEvents. A nil session, a bad base or name, or a bad option gives an
// error matching session.ErrBadArgument, and starts nothing.
func NewCache(sess *session.Session, base, name string, opts ...Option) (*Cache, error) {
	return nil, nil
}

// Instances returns the cached instances, sorted by node name. It never
// blocks on the network; the result is the caller's.
func (c *Cache) Instances() []Instance { return nil }

// Events returns the channel of the cache's events, as a
// cache.ChildrenCache's: Added, Updated and Removed for each instance,
// Initialized once after the Added events of the first load. It is closed
// after Close, or after the session is closed and the last event was
// received.
func (c *Cache) Events() <-chan Event { return nil }

// Initialized returns a channel that is closed once the first load is done.
// It is never closed if the cache is closed first.
func (c *Cache) Initialized() <-chan struct{} { return nil }

// Close stops the cache and returns after its goroutines have exited;
// undelivered events are dropped and Events is closed. Instances still
// returns the last copy. Idempotent; it returns nil.
func (c *Cache) Close() error { return nil }
