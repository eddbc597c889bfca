package leader

// What the public API no longer offers and the package's tests still check
// (tests only).

// TermID returns the participant id stored in t's node (its data); "" for a
// nil term.
func TermID(t *Term) string {
	if t == nil {
		return ""
	}
	return t.lease.ID()
}

// TermPath returns the full server path of t's node (session namespace
// included); "" for a nil term.
func TermPath(t *Term) string {
	if t == nil {
		return ""
	}
	return t.lease.Path()
}

// TermSessionID returns the ZooKeeper session id that owns t's node (its
// ephemeralOwner): the session under which the term was won; 0 for a nil
// term.
func TermSessionID(t *Term) int64 {
	if t == nil {
		return 0
	}
	return t.lease.Epoch().SessionID()
}

// LatchID returns l's participant id.
func LatchID(l *Latch) string { return l.e.id }

// SelectorID returns s's participant id.
func SelectorID(s *Selector) string { return s.e.id }
