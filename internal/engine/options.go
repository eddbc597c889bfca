package engine

import (
	"context"
	"fmt"
	"time"

	"go.uber.org/zap"
)

// Option configures New.
type Option func(*config) error

type config struct {
	nodeWatch      bool
	create         createMode
	keepNode       bool
	lg             *zap.Logger
	name           string
	cleanupTimeout time.Duration
	kind           string // see WithObserved
	userName       string
}

func defaultConfig() config {
	return config{nodeWatch: true, name: "recipes", cleanupTimeout: defaultCleanupTimeout}
}

// defaultCleanupTimeout bounds the detached delete of an abandoned node.
const defaultCleanupTimeout = 5 * time.Second

// WithNodeWatch says whether every held lease keeps a data watch (GetW) on its
// own node, so that a deletion by a third party ends the lease with
// ErrNodeDeleted (default true): at once, or at the latest 100 ms (and a round
// trip) after the acquire returned. The session's arm queue sets the watch once
// the lease has been held 100 ms, so it adds no latency to an acquire and a
// shorter hold costs nothing; a longer one costs a request and an extra
// watch notification at release (the holder's own watch fires when it
// deletes its node). A waiter next in line sets the watch once it has waited
// 100 ms, and its lease keeps it from the start; either way it holds on its
// predecessor's deletion notice without reading the children again. A delete
// of a waiter's node before its watch is set ends its lease by the same
// bound (100 ms and a round trip after the acquire returned). Without it, a
// third-party deletion is only seen by the next waiter, and the holder keeps
// believing it holds the lock until its session ends.
func WithNodeWatch(on bool) Option {
	return func(c *config) error { c.nodeWatch = on; return nil }
}

// WithKeepNodeUntilRelease says whether the node of a lease that ended
// without Release (the connection was suspended, the session was declared
// lost, ...) stays until the owner calls Release (default false: the engine
// deletes it as soon as it can). With it, Release deletes the node whatever
// ended the lease, so the owner decides when others may take over: a leader
// keeps its node until its work has stopped. Close deletes the nodes of the
// leases it ends and of ended leases not yet released. Nothing can keep the
// node of a session that really expired: the server deletes it with the
// zksession. A node deleted by a third party (ErrNodeDeleted) is gone already.
// Each ended lease keeps its goroutine until Release or Close.
func WithKeepNodeUntilRelease(on bool) Option {
	return func(c *config) error { c.keepNode = on; return nil }
}

// WithLogger sets the logger (default: the session's logger, named after the
// recipe).
func WithLogger(lg *zap.Logger) Option {
	return func(c *config) error {
		if lg == nil {
			return fmt.Errorf("%w: nil logger", ErrBadArgument)
		}
		c.lg = lg
		return nil
	}
}

// WithName names the recipe in error messages and the logger, e.g. "mutex"
// (default "recipes").
func WithName(name string) Option {
	return func(c *config) error {
		if name == "" {
			return fmt.Errorf("%w: empty name", ErrBadArgument)
		}
		c.name = name
		return nil
	}
}

// WithCleanupTimeout bounds the detached delete of a node abandoned by a
// failed or canceled acquire (default 5s). After it, the delete is handed to
// the session's guaranteed-delete queue.
func WithCleanupTimeout(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("%w: cleanup timeout %v", ErrBadArgument, d)
		}
		c.cleanupTimeout = d
		return nil
	}
}

// createMode is how the engine creates contender nodes (WithMultiCreate).
type createMode uint8

const (
	// createDefault: a plain create for contender nodes; placed nodes and
	// counted leases carry a setData on the directory (for their token and
	// count) unless that is refused.
	createDefault createMode = iota
	// createMulti: WithMultiCreate(true), every node with the setData.
	createMulti
	// createPlain: WithMultiCreate(false), never a setData.
	createPlain
)

// WithMultiCreate(true) creates contender nodes with a multi of the create
// and an empty setData on the recipe directory, whose Stat returns the
// fencing token (our czxid) without reading it from the create's reply; the
// directory's data version then grows with every acquire. The default, and
// WithMultiCreate(false), is a plain create whose token the session reads
// from the reply, with no other request; with false, the nodes a read-write
// lock's downgrade places and a semaphore's leases never write the
// directory either (they then cost one more read).
func WithMultiCreate(on bool) Option {
	return func(c *config) error {
		c.create = createPlain
		if on {
			c.create = createMulti
		}
		return nil
	}
}

// ApplyOptions applies a recipe package's options to its configuration c,
// in order: a nil option is session.ErrBadArgument, and the first option's
// error stops it.
func ApplyOptions[C any, O ~func(*C) error](c *C, opts []O) error {
	for _, o := range opts {
		if o == nil {
			return fmt.Errorf("%w: nil option", ErrBadArgument)
		}
		if err := o(c); err != nil {
			return err
		}
	}
	return nil
}

// CallContext merges a call's ctx with closing, the context a recipe
// cancels at Close: the context it returns ends with either, and the func
// releases it. It fails for a nil ctx (ErrBadArgument) and once closing has
// ended (Closed()).
func CallContext(ctx, closing context.Context) (context.Context, context.CancelFunc, error) {
	if ctx == nil {
		return nil, nil, fmt.Errorf("%w: nil context", ErrBadArgument)
	}
	if closing.Err() != nil {
		return nil, nil, Closed()
	}
	actx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(closing, cancel)
	return actx, func() { stop(); cancel() }, nil
}
