package engine

import (
	"fmt"
	"strings"
)

// Driver tells the engine how one ordered recipe decides ownership: the
// markers of its nodes, and who holds on a sorted snapshot of the recipe
// directory. It is the engine's one extension point; its flags say what the
// engine may assume to save requests. Build one with Standard or as a
// literal, and do not change it once it is in use: the engine reads it from
// many goroutines.
//
// The engine creates our node as "_c_<uuid>-" + Marker + sequence, sorts the
// directory's children by the sequence after their last marker (children
// with no marker of Markers are ignored), and calls Decide on every
// snapshot. Unlike Curator's LockInternalsDriver, sequences are parsed
// explicitly after the marker, so markers of different lengths may share a
// directory.
type Driver struct {
	// Kind is the session.Recipe Kind of the acquires with this driver
	// (see WithObserved), e.g. "rwlock.read"; "" for the Engine's.
	Kind string
	// Marker is the marker of our own node, e.g. "lock-": non-empty, no '/'
	// or NUL, and one of Markers.
	Marker string
	// Markers lists every marker that takes part in the queue, e.g.
	// "__READ__" and "__WRIT__" for a read-write lock.
	Markers []string
	// Decide is pure: given the sorted snapshot and the index of our node in
	// it, it says whether we hold the recipe, or else the name of the child
	// whose deletion we must wait for (a data watch is set on it). An error
	// ends the acquire (our node is deleted). The engine may reuse the
	// slice's array once Decide returns: Decide must not keep it.
	Decide func(sorted []Child, self int) (held bool, watch string, err error)

	// Monotone says that the decision (to hold, and which child to watch)
	// depends only on the children sorted up to and including ours, and that
	// holding survives their removal. The engine then passes Decide only
	// that prefix, and may decide a handoff from the watch notification
	// alone (the watched child was deleted) when the snapshot it last read
	// shows that this is enough (typically: the second in line watching the
	// holder). The ordered recipes are all monotone.
	Monotone bool
	// LookAhead, for a Monotone one-holder queue (a mutex), makes a waiter
	// with two or more children before its own watch the child two places
	// before it instead of its predecessor, and read the children again when
	// that child goes. In a queue left in order its predecessor holds by
	// then, so the waiter, now next in line, watches the holder and takes
	// over on the deletion notice: the read leaves the handoff. It costs one
	// more data watch per acquire. The engine looks ahead only with the node
	// watch on (WithNodeWatch). Safety does not depend on it: a waiter still
	// holds only on a snapshot that shows it first, or on the notice that its
	// predecessor, first in that snapshot, is gone.
	LookAhead bool
	// TrustHandoff makes a waiter hold as soon as the node it waits for is
	// deleted, without reading the children again and without watching its
	// own node: a handoff then costs no request at all. It is exact while the
	// queue is left in order; when a waiter in the middle gives up, the one
	// behind it holds alongside the holder, and a third party's delete of a
	// waiter's node goes unnoticed. Use it only for a queue whose exclusion
	// keeps nothing safe by itself, such as the semaphore's acquirer mutex,
	// every write of whose holder is a transaction that deletes the holder's
	// own node and so fails as a whole once that node is gone.
	TrustHandoff bool
	// Anchor, if not "", places our node beside the anchor, a child of the
	// recipe directory (its name, not its path) that the caller holds,
	// instead of queueing it: see placed.go.
	Anchor string
	// Settled, for a Monotone driver whose nodes may be placed (Anchor),
	// reports whether no child can have been placed before ours since prefix
	// (the children up to ours as last read, ours last) was read. When it
	// returns false, a waiter woken by its watched child's deletion reads the
	// directory again instead of deciding on the notice. nil means true.
	Settled func(prefix []Child) bool

	invalid string // why Standard's arguments are invalid, for checkDriver
}

// Standard returns Curator's StandardLockInternalsDriver for marker: a node
// holds when fewer than max nodes sort before it, otherwise it watches the
// node max places before it. Standard("lock-", 1) is the fair mutex
// (InterProcessMutex); max is at least 1.
func Standard(marker string, max int) *Driver {
	d := &Driver{
		Marker:   marker,
		Markers:  []string{marker},
		Monotone: true,
		Decide: func(sorted []Child, self int) (bool, string, error) {
			if max < 1 {
				return false, "", fmt.Errorf("%w: at most %d holders", ErrBadDriver, max)
			}
			if self < 0 || self >= len(sorted) {
				return false, "", fmt.Errorf("%w: our node (index %d) is not in the snapshot of %d", ErrNodeDeleted, self, len(sorted))
			}
			if self < max {
				return true, "", nil
			}
			return false, sorted[self-max].Name, nil
		},
	}
	if max < 1 {
		d.invalid = fmt.Sprintf("at most %d holders", max)
	}
	return d
}

// looksAhead reports whether the engine may look ahead for d: a trusted
// handoff would hold on the wrong notice.
func looksAhead(d *Driver) bool { return d.LookAhead && d.Monotone && !d.TrustHandoff }

// settled reports whether d lets the engine decide a handoff on prefix
// without reading the directory again.
func settled(d *Driver, prefix []Child) bool { return d.Settled == nil || d.Settled(prefix) }

// checkDriver validates a driver before any I/O.
func checkDriver(d *Driver) error {
	if d == nil || d.Decide == nil {
		return fmt.Errorf("%w: nil", ErrBadDriver)
	}
	if d.invalid != "" {
		return fmt.Errorf("%w: %s", ErrBadDriver, d.invalid)
	}
	m := d.Marker
	if m == "" || strings.ContainsAny(m, "/\x00") {
		return fmt.Errorf("%w: marker %q", ErrBadDriver, m)
	}
	for _, x := range d.Markers {
		if x == m {
			_, err := anchorSeq(d)
			return err
		}
	}
	return fmt.Errorf("%w: marker %q is not among the markers %q", ErrBadDriver, m, d.Markers)
}
