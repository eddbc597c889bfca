package rwlock

import "github.com/zkrecipes/zkrecipes/internal/engine"

// What the package's tests need and the public API no longer offers.

// The node markers of the two sides.
const (
	ReadMarker  = readMarker
	WriteMarker = writeMarker
)

// NodePath returns the full server path of l's node.
func NodePath(l *Lease) string { return l.l.Path() }

// NodeSessionID returns the session id that owns l's node.
func NodeSessionID(l *Lease) int64 { return l.l.Epoch().SessionID() }

// NodeID returns the participant id stored in l's node.
func NodeID(l *Lease) string { return l.l.ID() }

// LeaseKind returns the side l holds as recipes.Participant.Kind names it,
// "read" or "write", read from the marker of its node ("" if neither).
func LeaseKind(l *Lease) string {
	cs := engine.SortChildren([]string{l.l.Node()}, markers)
	if len(cs) != 1 {
		return ""
	}
	switch cs[0].Marker {
	case readMarker:
		return "read"
	case writeMarker:
		return "write"
	}
	return ""
}

// Holds returns the calling goroutine's hold counts of m's read and write
// lock; a lost hold still counts until it is released.
func Holds(m *Reentrant) (read, write int) { return m.rd.Count(), m.wr.Count() }
