package mutex

import (
	"context"
	"sync"

	"github.com/zkrecipes/zkrecipes/recipes"
)

// holds counts the engine leases a lock value has handed out in this process
// that are neither unlocked nor ended, for Held.
type holds struct {
	mu    sync.Mutex
	n     int
	stops map[*recipes.Lease]func() bool
}

// add counts l until drop(l) or until l ends, whichever comes first.
func (h *holds) add(l *recipes.Lease) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.stops == nil {
		h.stops = make(map[*recipes.Lease]func() bool)
	}
	h.n++
	h.stops[l] = context.AfterFunc(l.Context(), func() { h.drop(l) })
}

// drop stops counting l (once).
func (h *holds) drop(l *recipes.Lease) {
	h.mu.Lock()
	stop, ok := h.stops[l]
	if ok {
		delete(h.stops, l)
		h.n--
	}
	h.mu.Unlock()
	if ok {
		stop()
	}
}

func (h *holds) held() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.n > 0
}
