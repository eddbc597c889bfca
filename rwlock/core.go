package rwlock

import (
	"context"
	"errors"
	"fmt"

	"github.com/zkrecipes/zkrecipes/recipes"
)

// core is what both lock kinds share: the engine and the identity.
type core struct {
	in   *recipes.Engine
	path string
	id   string
}

// acquire takes one side with the engine. anchor, for the read side, is the
// name of a write node we hold: the read node is placed beside it.
func (c *core) acquire(ctx context.Context, s Side, try bool, anchor string) (*recipes.Lease, error) {
	var d recipes.Driver = writeDriver{}
	if s == Read {
		d = readDriver{anchor: anchor}
	}
	if !try {
		return c.in.Acquire(ctx, d, []byte(c.id))
	}
	l, err := c.in.TryAcquire(ctx, d, []byte(c.id))
	if errors.Is(err, recipes.ErrWouldBlock) {
		return nil, recipes.NewError("rwlock", c.path, ErrLocked)
	}
	return l, err
}

// nilCtx returns the error for a nil context.
func (c *core) nilCtx() error {
	return recipes.NewError("rwlock", c.path, fmt.Errorf("%w: nil context", ErrBadOption))
}

// Participant is one contender of the lock, as Participants reads it: the
// node's name, participant id, sequence, owner session and creation zxid
// (recipes.Participant), the side it holds or waits for, and whether it
// holds it.
type Participant struct {
	recipes.Participant
	// Side is the side the node holds or waits for. The embedded Holds
	// reports whether the node holds its side in the snapshot read: a writer
	// when only its own downgrade read nodes sort before it, a reader when no
	// writer with another sequence sorts before it. (A read node that Curator
	// 5.4 creates for a downgrade is an ordinary sequential node; while
	// writers queued before it remain, it is listed as waiting although its
	// owner holds it.)
	Side Side
}

// participants reads the lock directory: every read and write node in queue
// order, with its side and whether it holds.
func (c *core) participants(ctx context.Context) ([]Participant, error) {
	if ctx == nil {
		return nil, c.nilCtx()
	}
	ps, err := c.in.Participants(ctx, writeDriver{})
	if err != nil {
		return nil, err
	}
	kids := make([]recipes.Child, len(ps))
	for i, p := range ps {
		kids[i] = recipes.Child{Name: p.Node, Marker: p.Marker, Seq: p.Seq}
	}
	out := make([]Participant, len(ps))
	for i, p := range ps {
		side := Write
		if p.Marker == ReadMarker {
			side = Read
		}
		p.Holds, _, _ = driverFor(side).Decide(kids, i)
		out[i] = Participant{Participant: p, Side: side}
	}
	return out, nil
}
