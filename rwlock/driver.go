package rwlock

import (
	"fmt"

	"github.com/zkrecipes/zkrecipes/internal/engine"
)

// The markers of the two sides' nodes, as in Curator's InterProcessReadWriteLock
// ("_c_<uuid>-__READ__<seq>", "_c_<uuid>-__WRIT__<seq>").
const (
	readMarker  = "__READ__"
	writeMarker = "__WRIT__"
)

var markers = []string{readMarker, writeMarker}

// writeDriver is the queue of a write node for a write node: it holds when every node before it
// has its own sequence (none, or its own downgrade read nodes); otherwise it
// waits for its nearest predecessor, as Curator's writer does.
//
// It is Monotone, but only Settled when no other writer
// sorted before it when it last read the directory: a downgrade places a
// read node beside a write node that exists when it is placed (the create
// checks it), so with a writer before ours such a node may have appeared
// before ours since we read (typically: the writer we wait for downgrades,
// then releases its write node), and a writer woken then must read the
// directory again. With only readers before ours, no write node sorting
// before ours exists any more (write nodes are sequential: none can be
// created before ours), so none can be downgraded, and the handoff on the
// deletion notice alone is safe. Curator's writer always reads again.
var writeDriver = &engine.Driver{
	Kind:   "rwlock.write",
	Marker: writeMarker, Markers: markers, Monotone: true,
	Decide: decideWrite, Settled: writeSettled,
}

// writeSettled: no writer with another sequence sorted before ours.
func writeSettled(prefix []engine.Child) bool {
	if len(prefix) == 0 {
		return false
	}
	me := prefix[len(prefix)-1]
	for _, c := range prefix[:len(prefix)-1] {
		if c.Marker == writeMarker && c.Seq != me.Seq {
			return false
		}
	}
	return true
}

func decideWrite(sorted []engine.Child, self int) (bool, string, error) {
	if self < 0 || self >= len(sorted) {
		return false, "", fmt.Errorf("%w: our node (index %d) is not in the snapshot of %d", engine.ErrNodeDeleted, self, len(sorted))
	}
	me := sorted[self]
	for i := self - 1; i >= 0; i-- {
		if sorted[i].Seq != me.Seq {
			return false, sorted[i].Name, nil
		}
	}
	return true, "", nil
}

// readDriver returns the queue of a read node: it holds when no write node
// with another sequence sorts before it; otherwise it waits for the nearest
// such write node. Curator's reader waits for the first one; the nearest is
// as safe (a reader holds only once every writer before it is gone, and new
// writers only queue after it) and wakes the reader once, when that writer
// goes, instead of once for each writer before it.
//
// anchor, when set, is the name of the write node we hold (a downgrade): the
// read node is then placed beside it, with its sequence.
//
// It is Monotone: nodes that sort before a read node and appear after it was
// created are only downgrade read nodes, which do not block a reader.
func readDriver(anchor string) *engine.Driver {
	if anchor == "" {
		return queuedRead
	}
	return &engine.Driver{Kind: "rwlock.read", Marker: readMarker, Markers: markers, Monotone: true, Decide: decideRead, Anchor: anchor}
}

var queuedRead = &engine.Driver{Kind: "rwlock.read", Marker: readMarker, Markers: markers, Monotone: true, Decide: decideRead}

func decideRead(sorted []engine.Child, self int) (bool, string, error) {
	if self < 0 || self >= len(sorted) {
		return false, "", fmt.Errorf("%w: our node (index %d) is not in the snapshot of %d", engine.ErrNodeDeleted, self, len(sorted))
	}
	me := sorted[self]
	for i := self - 1; i >= 0; i-- {
		if c := sorted[i]; c.Marker == writeMarker && c.Seq != me.Seq {
			return false, c.Name, nil
		}
	}
	return true, "", nil
}

// everyone lists both sides for Participants: each node holds as its own
// side decides.
var everyone = &engine.Driver{
	Marker: writeMarker, Markers: markers,
	Decide: func(sorted []engine.Child, self int) (bool, string, error) {
		if self >= 0 && self < len(sorted) && sorted[self].Marker == readMarker {
			return decideRead(sorted, self)
		}
		return decideWrite(sorted, self)
	},
}
