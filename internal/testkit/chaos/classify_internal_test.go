package chaos

import (
	"testing"
	"time"
)

// TestClassifyDeletedWaiter: an overlap where a third party deleted the
// newcomer's own node before it acquired is excused only when the
// newcomer's hold ended with "node deleted" within deletedWaiterBound (the
// bound engine.WithNodeWatch documents); a deletion of the earlier holder's
// node is excused as before; anything else is a violation.
func TestClassifyDeletedWaiter(t *testing.T) {
	ms := time.Millisecond
	a := Interval{Node: "/chaos/rwlock/a", Start: 0, End: 200 * ms}
	del := func(node string) []FaultEvent {
		return []FaultEvent{{Kind: FaultDelete, Node: node, At: 50 * ms, End: 51 * ms}}
	}
	cases := []struct {
		desc   string
		b      Interval
		faults []FaultEvent
		want   string
	}{
		{"newcomer's node deleted, its lease ended in 103 ms",
			Interval{Node: "/chaos/rwlock/b", Start: 60 * ms, End: 163 * ms, Lost: true, Cause: "node deleted"},
			del("/chaos/rwlock/b"), ReasonDelete},
		{"newcomer's node deleted, its lease lasted past the bound",
			Interval{Node: "/chaos/rwlock/b", Start: 60 * ms, End: 60*ms + deletedWaiterBound + ms, Lost: true, Cause: "node deleted"},
			del("/chaos/rwlock/b"), ""},
		{"newcomer's node deleted, released by its holder (never told)",
			Interval{Node: "/chaos/rwlock/b", Start: 60 * ms, End: 163 * ms},
			del("/chaos/rwlock/b"), ""},
		{"newcomer's node deleted after it acquired",
			Interval{Node: "/chaos/rwlock/b", Start: 40 * ms, End: 143 * ms, Lost: true, Cause: "node deleted"},
			del("/chaos/rwlock/b"), ""},
		{"earlier holder's node deleted",
			Interval{Node: "/chaos/rwlock/b", Start: 60 * ms, End: 500 * ms},
			del("/chaos/rwlock/a"), ReasonDelete},
		{"another node deleted",
			Interval{Node: "/chaos/rwlock/b", Start: 60 * ms, End: 163 * ms, Lost: true, Cause: "node deleted"},
			del("/chaos/rwlock/c"), ""},
	}
	for _, c := range cases {
		if got := classify(a, c.b, c.faults); got != c.want {
			t.Errorf("%s: classify = %q, want %q", c.desc, got, c.want)
		}
	}
}
