package engine

// Reading a recipe's participants.

import (
	"context"
	"errors"
	"fmt"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/internal/zksession"
	"github.com/zkrecipes/zkrecipes/recipes"
)

// Participants returns the contenders of the queue d describes, in order:
// the holders first. A node that disappears while it is read is skipped. A
// missing directory gives an empty list. ctx bounds the requests.
func (e *Engine) Participants(ctx context.Context, d *Driver) ([]Participant, error) {
	if ctx == nil {
		return nil, e.errf(fmt.Errorf("%w: nil context", ErrBadArgument))
	}
	if err := checkDriver(d); err != nil {
		return nil, e.errf(err)
	}
	if !e.enter() {
		return nil, e.closedErr()
	}
	defer e.wg.Done()
	ep, err := e.zs.WaitConnected(ctx)
	if err != nil {
		return nil, e.errf(err)
	}
	var kids []string
	err = e.zs.Retry(ctx, ep, func(c *zk.Conn) error {
		var err error
		kids, _, err = c.Children(e.path)
		return zksession.Refused("list", e.path, err)
	})
	if errors.Is(err, zk.ErrNoNode) {
		return []Participant{}, nil
	}
	if err != nil {
		return nil, e.errf(err)
	}
	sorted := SortChildren(kids, d.Markers)
	out := make([]Participant, 0, len(sorted))
	for i, c := range sorted {
		// Who holds, as the driver decides on this listing.
		holds, _, _ := d.Decide(sorted, i)
		var data []byte
		var st *zk.Stat
		err := e.zs.Retry(ctx, ep, func(conn *zk.Conn) error {
			var err error
			p := e.path + "/" + c.Name
			data, st, err = conn.Get(p)
			return zksession.Refused("read", p, err)
		})
		if errors.Is(err, zk.ErrNoNode) {
			continue
		}
		if err != nil {
			return nil, e.errf(err)
		}
		out = append(out, Participant{ID: string(data), Node: c.Name, Kind: KindOf(c.Marker), Holds: holds,
			SessionID: st.EphemeralOwner, Token: st.Czxid})
	}
	return out, nil
}

// Participant is the type of Participants' results.
type Participant = recipes.Participant

// KindOf returns a Participant's Kind for a node marker: "lock-" gives
// "lock", "__READ__" "read", "__WRIT__" "write", and so on; a fixed node's
// (no marker) is "lock".
func KindOf(marker string) string {
	switch marker {
	case "", "lock-":
		return "lock"
	case "latch-":
		return "latch"
	case "lease-":
		return "lease"
	case "__READ__":
		return "read"
	case "__WRIT__":
		return "write"
	}
	return marker
}
