package cache

import (
	"fmt"
	"math"
	"path"

	"github.com/go-zookeeper/zk"
	"go.uber.org/zap"

	"github.com/zkrecipes/zkrecipes/internal/engine"
	"github.com/zkrecipes/zkrecipes/session"
)

// Node is a cached znode: its path, data and Stat as last read from
// ZooKeeper. Data is shared with the cache and with other readers: do not
// modify it.
type Node struct {
	// Path is the node's path, as the cache was given it (without the
	// session's namespace): for a ChildrenCache, its path, "/", the child's
	// name.
	Path string
	// Data is the node's data.
	Data []byte
	// Stat is the node's Stat: Czxid tells one incarnation of the node from
	// another, Mzxid one write from another.
	Stat zk.Stat
}

// Name returns the last element of Path (for a ChildrenCache, the child's
// name).
func (n Node) Name() string { return path.Base(n.Path) }

// EventType says what an Event reports.
type EventType int

// The events of a cache. A node that was deleted and created again between
// two reads gives Removed, then Added; writes between two reads give one
// Updated with the last data.
const (
	// Added: the node exists and the cache did not hold it (at the first
	// load, every node found).
	Added EventType = iota + 1
	// Updated: the node's data was written (its Mzxid grew).
	Updated
	// Removed: the node is gone; Event.Node is the node as last read.
	Removed
	// Initialized: the first full load is done, after the Added events of
	// what it found; Event.Node is the zero Node. Sent once per cache.
	Initialized
)

// String returns the type's name, e.g. "Added".
func (t EventType) String() string {
	switch t {
	case Added:
		return "Added"
	case Updated:
		return "Updated"
	case Removed:
		return "Removed"
	case Initialized:
		return "Initialized"
	}
	return fmt.Sprintf("EventType(%d)", int(t))
}

// Event is one change of a cache.
type Event struct {
	// Type says what happened.
	Type EventType
	// Node is the node after the change (Added, Updated), or as last read
	// before it went (Removed).
	Node Node
}

// Option configures NewNode, NewChildren and NewTree.
type Option func(*config) error

type config struct {
	lg       *zap.Logger
	events   bool
	maxDepth int
	depthSet bool
}

func buildConfig(opts []Option) (*config, error) {
	c := &config{events: true, maxDepth: math.MaxInt32}
	if err := engine.ApplyOptions(c, opts); err != nil {
		return nil, err
	}
	return c, nil
}

// WithLogger sets the logger (default: the session's logger, named
// "cache").
func WithLogger(lg *zap.Logger) Option {
	return func(c *config) error {
		if lg == nil {
			return fmt.Errorf("%w: nil logger", session.ErrBadArgument)
		}
		c.lg = lg
		return nil
	}
}

// WithEvents says whether the cache delivers events on its Events channel
// (default true). Events not yet received are kept in memory, however many:
// a cache that is only read with Get or List should say false.
func WithEvents(on bool) Option {
	return func(c *config) error {
		c.events = on
		return nil
	}
}

// errMaxDepthTreeOnly refuses WithMaxDepth given to NewNode or NewChildren.
var errMaxDepthTreeOnly = fmt.Errorf("%w: WithMaxDepth is an option of NewTree", session.ErrBadArgument)

// WithMaxDepth bounds a TreeCache (NewTree only) to the nodes at most depth
// levels below its root, as Curator's TreeCache setMaxDepth does: 0 caches
// the root alone, 1 the root and its children. Nodes at the maximum depth
// get no child watch. Default: no bound. A negative depth gives an error
// matching session.ErrBadArgument.
func WithMaxDepth(depth int) Option {
	return func(c *config) error {
		if depth < 0 {
			return fmt.Errorf("%w: negative max depth %d", session.ErrBadArgument, depth)
		}
		c.maxDepth, c.depthSet = depth, true
		return nil
	}
}
