package recipes

// Settled is an optional interface of a Monotone driver whose nodes may be
// placed (see Placed) before a waiter's node after the waiter read the
// directory: the engine's handoff on a deletion notice alone (see Monotone)
// assumes that every child sorting before ours was created before ours, and
// a placed node breaks that. A placed node can only appear beside an anchor
// that exists when it is created, so a driver can tell from the snapshot
// whether one may have appeared since.
//
// Settled reports whether no child can have been placed before ours since
// prefix was read (prefix: the children sorted up to and including ours, as
// last read, ours last). When it returns false, a waiter woken by its
// watched child's deletion reads the directory again instead of deciding on
// the notice.
type Settled interface {
	Settled(prefix []Child) bool
}

// settled reports whether d lets the engine decide a handoff on prefix
// without reading the directory again: true unless d is Settled and says no.
func settled(d Driver, prefix []Child) bool {
	s, ok := d.(Settled)
	return !ok || s.Settled(prefix)
}
