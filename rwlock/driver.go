package rwlock

import (
	"fmt"

	"github.com/zkrecipes/zkrecipes/recipes"
)

// Markers of the two sides' nodes, as in Curator's InterProcessReadWriteLock
// ("_c_<uuid>-__READ__<seq>", "_c_<uuid>-__WRIT__<seq>").
const (
	ReadMarker  = "__READ__"
	WriteMarker = "__WRIT__"
)

var markers = []string{ReadMarker, WriteMarker}

// The drivers decide on sequences, not on positions: a read node placed
// beside a write node by a downgrade (CURATOR-621) carries the write node's
// sequence, and which of the two sorts first among equal sequences is up to
// their names. Sequential nodes of one directory never share a sequence, so
// a read node with the sequence of a write node is that writer's downgrade.

// writeDriver decides for a write node: it holds when every node before it
// has its own sequence (none, or its own downgrade read nodes); otherwise it
// waits for its nearest predecessor, as Curator's writer does.
//
// It is recipes.Monotone, but only recipes.Settled when no other writer
// sorted before it when it last read the directory: a downgrade places a
// read node beside a write node that exists when it is placed (the create
// checks it), so with a writer before ours such a node may have appeared
// before ours since we read (typically: the writer we wait for downgrades,
// then releases its write node), and a writer woken then must read the
// directory again. With only readers before ours, no write node sorting
// before ours exists any more (write nodes are sequential: none can be
// created before ours), so none can be downgraded, and the handoff on the
// deletion notice alone is safe. Curator's writer always reads again.
type writeDriver struct{}

func (writeDriver) Marker() string    { return WriteMarker }
func (writeDriver) Markers() []string { return markers }
func (writeDriver) Monotone() bool    { return true }

// Settled reports whether prefix (the children up to ours, ours last) holds
// no write node other than ours.
func (writeDriver) Settled(prefix []recipes.Child) bool {
	if len(prefix) == 0 {
		return false
	}
	me := prefix[len(prefix)-1]
	for _, c := range prefix[:len(prefix)-1] {
		if c.Marker == WriteMarker && c.Seq != me.Seq {
			return false
		}
	}
	return true
}

func (writeDriver) Decide(sorted []recipes.Child, self int) (bool, string, error) {
	if self < 0 || self >= len(sorted) {
		return false, "", fmt.Errorf("%w: our node (index %d) is not in the snapshot of %d", recipes.ErrLockLost, self, len(sorted))
	}
	me := sorted[self]
	for i := self - 1; i >= 0; i-- {
		if sorted[i].Seq != me.Seq {
			return false, sorted[i].Name, nil
		}
	}
	return true, "", nil
}

// readDriver decides for a read node: it holds when no write node with
// another sequence sorts before it; otherwise it waits for the nearest such
// write node. Curator's reader waits for the first one; the nearest is as
// safe (a reader holds only once every writer before it is gone, and new
// writers only queue after it) and wakes the reader once, when that writer
// goes, which it does only after every writer before it has gone, instead of
// once for each writer before it.
//
// anchor, when set, is the name of the write node we hold: the read node is
// then placed beside it (recipes.Placed), with its sequence.
//
// It is recipes.Monotone: nodes that sort before a read node and appear
// after it was created are only downgrade read nodes, which do not block a
// reader.
type readDriver struct{ anchor string }

func (readDriver) Marker() string    { return ReadMarker }
func (readDriver) Markers() []string { return markers }
func (readDriver) Monotone() bool    { return true }
func (d readDriver) Anchor() string  { return d.anchor }

func (readDriver) Decide(sorted []recipes.Child, self int) (bool, string, error) {
	if self < 0 || self >= len(sorted) {
		return false, "", fmt.Errorf("%w: our node (index %d) is not in the snapshot of %d", recipes.ErrLockLost, self, len(sorted))
	}
	me := sorted[self]
	for i := self - 1; i >= 0; i-- {
		if c := sorted[i]; c.Marker == WriteMarker && c.Seq != me.Seq {
			return false, c.Name, nil
		}
	}
	return true, "", nil
}

// driverFor returns the driver of a side.
func driverFor(s Side) recipes.Driver {
	if s == Write {
		return writeDriver{}
	}
	return readDriver{}
}
