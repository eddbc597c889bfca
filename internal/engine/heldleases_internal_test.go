package engine

import (
	"context"
	"errors"
	"testing"
)

// TestHeldLeasesCountsLiveAndForgetsEnded: Count counts the leases added
// that have not ended, and ended leases are forgotten as the set grows, so
// that a value handing out many short leases keeps about as many as are
// held.
func TestHeldLeasesCountsLiveAndForgetsEnded(t *testing.T) {
	lease := func() (*Lease, func()) {
		ctx, cancel := context.WithCancelCause(context.Background())
		return &Lease{lctx: ctx}, func() { cancel(errors.New("ended")) }
	}
	var h HeldLeases
	live, endLive := lease()
	h.Add(live)
	for i := 0; i < 1000; i++ {
		l, end := lease()
		h.Add(l)
		end()
	}
	if n := h.Count(); n != 1 {
		t.Fatalf("Count %d, want 1 (one live lease among 1001)", n)
	}
	if n := len(h.ls); n > 32 {
		t.Fatalf("%d leases kept after 1,000 ended ones were added, want at most 32", n)
	}
	endLive()
	if n := h.Count(); n != 0 {
		t.Fatalf("Count %d after the last lease ended, want 0", n)
	}
}
