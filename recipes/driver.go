package recipes

import (
	"fmt"
	"reflect"
	"strings"
)

// Driver says how one ordered recipe decides ownership. The engine
// (Engine) creates a node named "_c_<uuid>-" + Marker() + sequence, sorts
// the directory's children with SortChildren(names, Markers()), and calls
// Decide on every snapshot. A Driver must be safe for concurrent use; the
// engine never modifies the slices it passes while Decide runs, and may reuse
// their arrays afterwards: Decide must not keep them.
//
// This mirrors Curator's LockInternalsDriver, without its hidden coupling:
// sequences are parsed explicitly after the marker, so markers of different
// lengths may share a directory.
type Driver interface {
	// Marker returns the marker of our own node, e.g. "lock-". It must be
	// non-empty, contain no '/', and be one of Markers().
	Marker() string
	// Markers returns every marker that takes part in this queue, e.g.
	// "__READ__" and "__WRIT__" for a read-write lock. Children with other
	// names are ignored.
	Markers() []string
	// Decide is pure: given the sorted snapshot and the index of our node in
	// it, it says whether we hold the recipe, or else the name of the child
	// whose deletion we must wait for (a data watch is set on it). An error
	// ends the acquire (our node is deleted).
	Decide(sorted []Child, self int) (held bool, watch string, err error)
}

// Monotone is an optional interface of a Driver. A driver is monotone when
// its decision (to hold, and which child to watch) depends only on the
// children sorted up to and including ours, and holding survives their
// removal: if Decide says held for a sorted snapshot, it also says held for
// that snapshot with any children other than ours removed. The engine passes
// a monotone driver only the children up to and including ours (ours last).
// The ordered recipes are monotone (a mutex, a semaphore, a leader latch, either side of a read-write lock hold
// when few enough, or no conflicting, children sort before theirs). For a
// monotone driver the engine decides a handoff from the watch notification
// itself (the watched child was deleted) without reading the children again,
// when the snapshot it last read shows that this is enough (typically: the
// second in line watching the holder). Deeper in a queue the snapshot still
// lists children that have gone meanwhile, and the engine reads again.
type Monotone interface {
	Monotone() bool
}

// LooksAhead is an optional interface of a Monotone driver that holds only
// once every child sorting before its own is gone (a mutex) and watches its
// predecessor meanwhile. When LooksAhead returns true, a waiter with two or
// more children before its own watches the child two places before it
// instead, and reads the children again when that child goes. In a queue
// that is left in order its predecessor holds by then, so the waiter, now
// next in line, watches the holder, and the handoff is decided on the
// deletion notice alone (see Monotone): the read leaves the handoff and is
// made while the predecessor holds. It costs one more data watch per
// acquire (a request and, at that child's delete, a notification). The
// engine looks ahead only with the node watch on (WithNodeWatch): without
// it a handoff always reads the children (see heldWithout). Safety
// does not depend on it: a waiter still holds only on a snapshot that shows
// it first, or on the notice that its predecessor, first in that snapshot,
// is gone.
type LooksAhead interface {
	LooksAhead() bool
}

// looksAhead reports whether d is a LooksAhead driver that says so, and does
// not trust handoffs (a trusted handoff would hold on the wrong notice).
func looksAhead(d Driver) bool {
	l, ok := d.(LooksAhead)
	return ok && l.LooksAhead() && monotone(d) && !trustsHandoff(d)
}

// StandardDriver is Curator's StandardLockInternalsDriver: a node holds the
// recipe when fewer than MaxLeases nodes sort before it; otherwise it watches
// the node MaxLeases places before it. StandardDriver{Name: "lock-",
// MaxLeases: 1} is the fair mutex (InterProcessMutex). The zero MaxLeases is
// taken as 1.
type StandardDriver struct {
	// Name is the marker, e.g. "lock-" (Curator's lockName).
	Name string
	// MaxLeases is how many nodes hold at once; 0 means 1.
	MaxLeases int
	// LookAhead, with MaxLeases 1, makes a waiter two or more places back
	// watch the child two places before its own instead of its predecessor
	// (see LooksAhead).
	LookAhead bool
}

// Marker returns d.Name.
func (d StandardDriver) Marker() string { return d.Name }

// Markers returns []string{d.Name}.
func (d StandardDriver) Markers() []string { return []string{d.Name} }

// Monotone returns true: fewer children before ours never stop us holding.
func (d StandardDriver) Monotone() bool { return true }

// LooksAhead implements LooksAhead: d.LookAhead, for a mutex (MaxLeases 0
// or 1) only.
func (d StandardDriver) LooksAhead() bool { return d.LookAhead && d.MaxLeases <= 1 }

// Decide implements Driver: held when self < MaxLeases, else watch
// sorted[self-MaxLeases].
func (d StandardDriver) Decide(sorted []Child, self int) (bool, string, error) {
	max := d.MaxLeases
	if max == 0 {
		max = 1
	}
	if max < 0 {
		return false, "", fmt.Errorf("%w: MaxLeases %d", ErrBadDriver, d.MaxLeases)
	}
	if self < 0 || self >= len(sorted) {
		return false, "", fmt.Errorf("%w: our node (index %d) is not in the snapshot of %d", ErrLockLost, self, len(sorted))
	}
	if self < max {
		return true, "", nil
	}
	return false, sorted[self-max].Name, nil
}

// checkDriver validates a driver before any I/O.
func checkDriver(d Driver) error {
	if d == nil || isNil(d) {
		return fmt.Errorf("%w: nil", ErrBadDriver)
	}
	var max int
	switch sd := d.(type) {
	case StandardDriver:
		max = sd.MaxLeases
	case *StandardDriver:
		if sd == nil {
			return fmt.Errorf("%w: nil", ErrBadDriver)
		}
		max = sd.MaxLeases
	}
	if max < 0 {
		// 0 means 1; anything below would never hold (Decide would fail only
		// after the node was created).
		return fmt.Errorf("%w: MaxLeases %d, want at least 1", ErrBadDriver, max)
	}
	m := d.Marker()
	if m == "" || strings.ContainsAny(m, "/\x00") {
		return fmt.Errorf("%w: marker %q", ErrBadDriver, m)
	}
	for _, x := range d.Markers() {
		if x == m {
			_, err := anchorSeq(d)
			return err
		}
	}
	return fmt.Errorf("%w: marker %q is not among Markers() %q", ErrBadDriver, m, d.Markers())
}

// isNil reports whether v, a non-nil interface value, holds a nil pointer,
// func, map, slice, channel or interface (a typed nil), whose methods would
// typically panic.
func isNil(v any) bool {
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Pointer, reflect.Func, reflect.Map, reflect.Slice, reflect.Chan, reflect.Interface, reflect.UnsafePointer:
		return rv.IsNil()
	}
	return false
}
