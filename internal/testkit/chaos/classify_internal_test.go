package chaos

import (
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/session"
)

// TestClassifyDeletedWaiter: an overlap where a third party deleted the
// newcomer's own node before it acquired is excused only when the
// newcomer's hold ended with "node deleted" within deletedWaiterBound (the
// bound engine.WithNodeWatch documents), or was released before the node
// watch was due (100 ms: nothing had to tell it); a deletion of the earlier
// holder's node is excused as before; anything else is a violation.
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
		{"newcomer's node deleted, released by its holder 103 ms after it acquired (never told)",
			Interval{Node: "/chaos/rwlock/b", Start: 60 * ms, End: 163 * ms},
			del("/chaos/rwlock/b"), ""},
		{"newcomer's node deleted, released by its holder 77 ms after it acquired, before its watch was due",
			Interval{Node: "/chaos/rwlock/b", Start: 60 * ms, End: 137 * ms},
			del("/chaos/rwlock/b"), ReasonDelete},
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
		if got := classify(a, c.b, c.faults, servingKillRace); got != c.want {
			t.Errorf("%s: classify = %q, want %q", c.desc, got, c.want)
		}
	}
}

// TestClassifyServingKill: an instant kill through the serving member
// excuses an overlap when it killed the earlier holder's session and that
// holder heard of it within servingKillRace, or when it killed the
// newcomer's session, whose lease then ended within servingKillRace; a kill
// of a third session excuses nothing.
func TestClassifyServingKill(t *testing.T) {
	ms := time.Millisecond
	kill := func(sid int64) []FaultEvent {
		return []FaultEvent{{Kind: FaultKillServing, SessionID: sid, At: 50 * ms, End: 51 * ms}}
	}
	a := Interval{SessionID: 1, Node: "/chaos/semaphore/leases/a", Start: 0, End: 200 * ms, Lost: true, Cause: "suspended"}
	cases := []struct {
		desc   string
		a, b   Interval
		faults []FaultEvent
		want   string
	}{
		{"earlier holder killed, told 140 ms after the newcomer acquired", a,
			Interval{SessionID: 2, Start: 60 * ms, End: 300 * ms}, kill(1), ReasonServingKill},
		{"earlier holder killed, told past the bound",
			Interval{SessionID: 1, Start: 0, End: 60*ms + servingKillRace + ms, Lost: true},
			Interval{SessionID: 2, Start: 60 * ms, End: 300 * ms}, kill(1), ""},
		{"newcomer killed, its lease ended 20 ms after it returned",
			Interval{SessionID: 2, Start: 0, End: 500 * ms},
			Interval{SessionID: 1, Start: 60 * ms, End: 80 * ms, Lost: true, Cause: "suspended"}, kill(1), ReasonServingKill},
		{"newcomer killed, its lease lasted past the bound",
			Interval{SessionID: 2, Start: 0, End: 5000 * ms},
			Interval{SessionID: 1, Start: 60 * ms, End: 60*ms + servingKillRace + ms, Lost: true}, kill(1), ""},
		{"newcomer killed, released by its holder (never told)",
			Interval{SessionID: 2, Start: 0, End: 500 * ms},
			Interval{SessionID: 1, Start: 60 * ms, End: 80 * ms}, kill(1), ""},
		{"a third session killed",
			Interval{SessionID: 2, Start: 0, End: 500 * ms},
			Interval{SessionID: 3, Start: 60 * ms, End: 80 * ms, Lost: true}, kill(1), ""},
	}
	for _, c := range cases {
		if got := classify(c.a, c.b, c.faults, servingKillRace); got != c.want {
			t.Errorf("%s: classify = %q, want %q", c.desc, got, c.want)
		}
	}
}

// TestClassifySessionOnlyWindow: an overlap with a session-only holder is
// excused only when the holder's session ended: its hold ended with the
// session's loss, or the session was not live at the end of the run and a
// fault that disconnects sessions hit it (or its hold ended by a loss). A
// session-only holder whose session rode the fault out kept its node: a
// newcomer that acquired past it is a violation, as under the standard
// policy.
func TestClassifySessionOnlyWindow(t *testing.T) {
	ms := time.Millisecond
	b := Interval{Session: 2, SessionID: 2, Start: 60 * ms, End: 300 * ms}
	cut := []FaultEvent{{Kind: FaultCut, Sessions: []int{1}, At: 50 * ms, End: 55 * ms}}
	move := []FaultEvent{{Kind: FaultMove, At: 20 * ms, End: 55 * ms}}
	only := func(iv Interval) Interval {
		iv.Session, iv.SessionID, iv.Policy, iv.Start = 1, 1, session.SessionOnly, 0
		return iv
	}
	cases := []struct {
		desc   string
		a      Interval
		faults []FaultEvent
		want   string
	}{
		{"ended by the session's loss", only(Interval{End: 200 * ms, Lost: true, Cause: causeSessionLost}), nil, ReasonSessionOnly},
		{"cut, session ended later, released on its own", only(Interval{End: 200 * ms, SessionEnded: true}), cut, ReasonSessionOnly},
		{"member moved, session ended later, released on its own", only(Interval{End: 200 * ms, SessionEnded: true}), move, ReasonSessionOnly},
		{"cut, session live to the end", only(Interval{End: 200 * ms}), cut, ""},
		{"member moved, session live to the end", only(Interval{End: 200 * ms}), move, ""},
		{"node deleted with no fault, session live to the end", only(Interval{End: 200 * ms, Lost: true, Cause: "node deleted"}), nil, ""},
		{"session ended, no fault, released on its own", only(Interval{End: 200 * ms, SessionEnded: true}), nil, ""},
		{"standard policy, session ended after a cut",
			Interval{Session: 1, SessionID: 1, Policy: session.Standard, End: 200 * ms, SessionEnded: true, Lost: true, Cause: causeSessionLost}, cut, ""},
	}
	for _, c := range cases {
		if got := classify(c.a, b, c.faults, servingKillRace); got != c.want {
			t.Errorf("%s: classify = %q, want %q", c.desc, got, c.want)
		}
	}
}
