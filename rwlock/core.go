package rwlock

import (
	"context"
	"errors"
	"fmt"

	"github.com/zkrecipes/zkrecipes/internal/engine"
	"github.com/zkrecipes/zkrecipes/recipes"
	"github.com/zkrecipes/zkrecipes/session"
)

// core is what both lock kinds share: the engine and the identity.
type core struct {
	e    *engine.Engine
	path string
	data []byte // the participant id, our nodes' data (never written)
}

// acquire takes one side with the engine. anchor, for the read side, is the
// name of a write node we hold: the read node is placed beside it.
func (c *core) acquire(ctx context.Context, write, try bool, anchor string) (*engine.Lease, error) {
	d := writeDriver
	if !write {
		d = readDriver(anchor)
	}
	if !try {
		return c.e.Acquire(ctx, d, c.data)
	}
	return c.e.TryAcquire(ctx, d, c.data)
}

// downgradeRead places the read node of a downgrade beside our write node
// anchor: not an acquire for the session's hooks (the write lease goes on as
// this read lease).
func (c *core) downgradeRead(ctx context.Context, anchor string) (*engine.Lease, error) {
	return c.e.AcquireObserved(ctx, readDriver(anchor), c.data, nil)
}

// nilCtx returns the error for a nil context.
func (c *core) nilCtx() error {
	return engine.NewError("rwlock", c.path, fmt.Errorf("%w: nil context", session.ErrBadArgument))
}

// participants reads the lock directory: every read and write node in queue
// order, with whether it holds its side.
func (c *core) participants(ctx context.Context) ([]recipes.Participant, error) {
	if ctx == nil {
		return nil, c.nilCtx()
	}
	return c.e.Participants(ctx, everyone)
}

// ErrUpgrade is returned by a Reentrant's Lock and TryLock called by a
// goroutine that holds only the read lock: waiting for the write lock would
// wait for itself (Curator blocks for ever there). Release the read lease
// first. Nothing is queued.
var ErrUpgrade = errors.New("rwlock: cannot upgrade: the calling goroutine holds the read lock")
