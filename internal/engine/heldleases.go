package engine

import "sync"

// HeldLeases keeps the leases a recipe value (a mutex, a semaphore) has
// handed out in this process, for its Held: Count counts those that have not
// ended (Release ends a lease at once, as does a loss). Ended leases are
// forgotten as the set grows, so it stays as large as the leases held. The
// zero value is ready; it is safe for concurrent use.
type HeldLeases struct {
	mu      sync.Mutex
	ls      []*Lease
	pruneAt int
}

// Add records leases handed out.
func (h *HeldLeases) Add(ls ...*Lease) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ls = append(h.ls, ls...)
	if len(h.ls) >= h.pruneAt {
		h.pruneLocked()
		h.pruneAt = max(16, 2*len(h.ls))
	}
}

// Count returns how many of the leases added have not ended. It does no I/O.
func (h *HeldLeases) Count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.pruneLocked()
	return len(h.ls)
}

// pruneLocked forgets ended leases. h.mu held.
func (h *HeldLeases) pruneLocked() {
	kept := h.ls[:0]
	for _, l := range h.ls {
		if l.Err() == nil {
			kept = append(kept, l)
		}
	}
	clear(h.ls[len(kept):])
	h.ls = kept
}
