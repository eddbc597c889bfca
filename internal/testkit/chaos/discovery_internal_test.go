package chaos

import (
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/recipes/discovery"
	"github.com/zkrecipes/zkrecipes/session"
)

// TestOutages: a registration's outage is the time it was absent from the
// watcher's lists while its session was Connected or Reconnected, within
// the measured span, less the time the watcher's connection was down;
// absences while the session was Suspended or Lost are not outages.
func TestOutages(t *testing.T) {
	s := time.Second
	ms := time.Millisecond
	up := func(at time.Duration) stateAt { return stateAt{at, session.Reconnected} }
	down := func(at time.Duration) stateAt { return stateAt{at, session.Suspended} }
	lost := func(at time.Duration) stateAt { return stateAt{at, session.Lost} }
	snap := func(at time.Duration, present bool) regSnap {
		ids := map[string]bool{"s9": true}
		if present {
			ids["s0"] = true
		}
		return regSnap{at: at, ids: ids}
	}
	connected := []stateAt{{0, session.Connected}}
	cases := []struct {
		desc   string
		states []stateAt
		snaps  []regSnap
		blind  []stall
		want   []outage
	}{
		{"present throughout", connected, []regSnap{snap(0, true), snap(2*s, true)}, nil, nil},
		{"absent for 500 ms while connected", connected,
			[]regSnap{snap(0, true), snap(1*s, false), snap(1500*ms, true)}, nil,
			[]outage{{1 * s, 1500 * ms, 500 * ms}}},
		{"absent while the session was lost, back 100 ms after the reconnection",
			[]stateAt{{0, session.Connected}, down(1 * s), lost(2 * s), up(3 * s)},
			[]regSnap{snap(0, true), snap(1200*ms, false), snap(3100*ms, true)}, nil,
			[]outage{{3 * s, 3100 * ms, 100 * ms}}},
		{"the watcher's blind time deducted", connected,
			[]regSnap{snap(0, true), snap(1*s, false), snap(2*s, true)}, []stall{{1200 * ms, 1700 * ms}},
			[]outage{{1 * s, 2 * s, 500 * ms}}},
		{"still absent at the end of the span", connected,
			[]regSnap{snap(0, true), snap(9*s, false)}, nil,
			[]outage{{9 * s, 10 * s, 1 * s}}},
		{"an absence before the span is cut at its start", connected,
			[]regSnap{snap(0, false), snap(1500*ms, true)}, nil,
			[]outage{{1 * s, 1500 * ms, 500 * ms}}},
		{"an absence after the span does not count", connected,
			[]regSnap{snap(0, true), snap(11*s, false)}, nil, nil},
	}
	for _, c := range cases {
		rs := &regSet{since: 1 * s, until: 10 * s, watch: &regWatcher{rec: newRecorder(), snaps: c.snaps, blind: c.blind}}
		got := rs.outages(&sessReg{id: "s0", states: c.states})
		if len(got) != len(c.want) {
			t.Errorf("%s: outages %v, want %v", c.desc, got, c.want)
			continue
		}
		for i := range got {
			if got[i] != c.want[i] {
				t.Errorf("%s: outages %v, want %v", c.desc, got, c.want)
				break
			}
		}
	}
}

// TestInstancesDiffer: a cache matches the server only with the same
// instances holding the same data.
func TestInstancesDiffer(t *testing.T) {
	a := discovery.Instance{Name: regService, ID: "s0", Port: 1}
	b := discovery.Instance{Name: regService, ID: "s1", Port: 2}
	server := map[string]regNode{"s0": {data: normal(a)}, "s1": {data: normal(b)}}
	if d := instancesDiffer([]discovery.Instance{a, b}, server); d != "" {
		t.Errorf("the same instances: %s", d)
	}
	c := b
	c.Port = 3
	for _, got := range [][]discovery.Instance{{a}, {a, c}, {a, b, {Name: regService, ID: "s2"}}} {
		if d := instancesDiffer(got, server); d == "" {
			t.Errorf("%v against %v: no difference", got, sortedKeys(server))
		}
	}
}
