package mutex

import (
	"sync"

	"github.com/zkrecipes/zkrecipes/recipes"
)

// holds keeps the engine leases a lock value has handed out in this process
// and not unlocked, for Held, which counts those not ended. A lock value
// holds few at once, so a slice does; ended leases are pruned as it grows.
type holds struct {
	mu      sync.Mutex
	ls      []*recipes.Lease
	pruneAt int
}

// add counts l until drop(l) or until l ends, whichever comes first.
func (h *holds) add(l *recipes.Lease) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ls = append(h.ls, l)
	if len(h.ls) >= h.pruneAt {
		h.pruneLocked()
		h.pruneAt = max(8, 2*len(h.ls))
	}
}

// drop stops counting l.
func (h *holds) drop(l *recipes.Lease) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for i, x := range h.ls {
		if x == l {
			last := len(h.ls) - 1
			h.ls[i] = h.ls[last]
			h.ls[last] = nil
			h.ls = h.ls[:last]
			return
		}
	}
}

// held reports whether a lease added and not dropped has not ended.
func (h *holds) held() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.pruneLocked()
	return len(h.ls) > 0
}

// pruneLocked forgets ended leases. h.mu held.
func (h *holds) pruneLocked() {
	kept := h.ls[:0]
	for _, l := range h.ls {
		if l.Err() == nil {
			kept = append(kept, l)
		}
	}
	clear(h.ls[len(kept):])
	h.ls = kept
}
