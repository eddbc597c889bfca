package discovery

import (
	"testing"
	"time"
)

// TestRoundRobinCounterWraps: the round-robin counter past the range of int
// (after 2^31 picks where int has 32 bits, 2^63 where it has 64) still picks
// each instance in turn; it used to turn negative and panic.
func TestRoundRobinCounterWraps(t *testing.T) {
	c := &Cache{path: "/services/svc", byNode: map[string]Instance{}}
	for _, id := range []string{"a", "b", "c"} {
		c.byNode[id] = Instance{Name: "svc", ID: id, RegistrationTime: time.UnixMilli(1)}
	}
	for _, start := range []uint64{1<<31 - 1, 1<<63 - 1, 1<<64 - 2} {
		p, err := NewProvider(c)
		if err != nil {
			t.Fatal(err)
		}
		p.next.Store(start)
		seen := map[string]int{}
		for i := 0; i < 6; i++ {
			in, err := p.Pick()
			if err != nil {
				t.Fatalf("counter from %d, pick %d: %v", start, i, err)
			}
			seen[in.ID]++
		}
		if len(seen) != 3 {
			t.Errorf("counter from %d: picked %v, want each of a, b, c", start, seen)
		}
	}
}
