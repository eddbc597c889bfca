package discovery_test

import (
	"context"
	"testing"

	"github.com/zkrecipes/zkrecipes/internal/testkit/sessiontest"
	"github.com/zkrecipes/zkrecipes/recipes/cache"
	"github.com/zkrecipes/zkrecipes/recipes/discovery"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// TestCosts: the costs doc.go states, counted on the wire: a registration
// holds one watch; a cache of n instances holds n+1 (a child watch and a
// data watch per instance), loads with one list and n reads, and reads one
// node per change.
func TestCosts(t *testing.T) {
	ns := zktest.NewNamespace(t)
	reg, regTap := sessiontest.ConnectTap(t, ns)
	var regs []*discovery.Registration
	for _, id := range []string{"a", "b", "c"} {
		regs = append(regs, register(t, reg, discovery.Instance{Name: "svc", ID: id}))
	}
	zktest.Eventually(t, wait, func() bool { return sessiontest.TapWatches(regTap) == 3 },
		"3 registrations hold 3 watches (hold %d)", sessiontest.TapWatches(regTap))
	s, tap := sessiontest.ConnectTap(t, ns)
	before := tap.Requests()
	c := newCache(t, s, "svc")
	rec := record(c.Events())
	rec.waitInit(t)
	after := tap.Requests()
	if lists, reads := after[zktest.OpGetChildren2]-before[zktest.OpGetChildren2], after[zktest.OpGetData]-before[zktest.OpGetData]; lists != 1 || reads != 3 {
		t.Fatalf("first load: %d lists, %d reads; want 1 and 3", lists, reads)
	}
	zktest.Eventually(t, wait, func() bool { return sessiontest.TapWatches(tap) == 4 },
		"the cache holds 4 watches (has %d)", sessiontest.TapWatches(tap))
	in := regs[0].Instance()
	in.Port = 9
	waitFor(t, "Update", func(ctx context.Context) error { return regs[0].Update(ctx, in) })
	rec.WaitFor(t, wait, "Updated", func(evs []recorded) bool { return countType(evs, cache.Updated) == 1 })
	zktest.Eventually(t, wait, func() bool {
		r := tap.Requests()
		return r[zktest.OpGetData]-after[zktest.OpGetData] == 1 && r[zktest.OpGetChildren2] == after[zktest.OpGetChildren2]
	}, "one read for a change")
}

// TestContainers: the base and service nodes a registration creates are
// containers, so the server removes them once empty.
func TestContainers(t *testing.T) {
	ns := zktest.NewNamespace(t)
	raw := ns.Conn(t)
	s := sessiontest.Connect(t, ns)
	r := register(t, s, discovery.Instance{Name: "svc", ID: "a"})
	// The server's Stat does not say a node is a container: its removal
	// once empty does.
	r.Close()
	zktest.Eventually(t, wait, func() bool { _, ok := exists(t, raw, ns.Path("services")); return !ok },
		"the empty containers removed by the server")
}

// TestTakeOverPersistent: a Static instance whose node is there already
// (left by an earlier run, or written by someone else) takes it over: the
// same node, holding the registration's data.
func TestTakeOverPersistent(t *testing.T) {
	ns := zktest.NewNamespace(t)
	raw := ns.Conn(t)
	mustCreate(t, raw, ns.Path("services"), nil)
	mustCreate(t, raw, ns.Path("services/svc"), nil)
	mustCreate(t, raw, ns.Path("services/svc/x"), instanceJSON(t, "svc", "x", 1))
	st, _ := exists(t, raw, ns.Path("services/svc/x"))
	s := sessiontest.Connect(t, ns)
	r := register(t, s, discovery.Instance{Name: "svc", ID: "x", Port: 2, Type: discovery.Static})
	list, err := discovery.Instances(ctxT(t), s, base, "svc")
	if err != nil || len(list) != 1 || !equalInstance(list[0], r.Instance()) {
		t.Fatalf("after the take-over: %+v %v", list, err)
	}
	if st2, _ := exists(t, raw, ns.Path("services/svc/x")); st2.Czxid != st.Czxid {
		t.Fatal("the node was replaced, not taken over")
	}
}

// TestProviderWhileDisconnected: while its session is cut off a cache keeps
// its last copy and a provider picks from it; once the connection is back
// the cache reports what changed and the provider follows.
func TestProviderWhileDisconnected(t *testing.T) {
	ns := zktest.NewNamespace(t)
	raw := ns.Conn(t)
	s, p := sessiontest.ConnectProxy(t, ns)
	c := newCache(t, s, "svc")
	rec := record(c.Events())
	other := sessiontest.Connect(t, ns)
	register(t, other, discovery.Instance{Name: "svc", ID: "a"})
	gone := register(t, other, discovery.Instance{Name: "svc", ID: "b"})
	rec.WaitFor(t, wait, "2 Added", func(evs []recorded) bool { return countType(evs, cache.Added) == 2 })
	pr := newProvider(t, c)
	p.Partition() // the cache hears nothing from now on
	gone.Close()
	zktest.Eventually(t, wait, func() bool { _, ok := exists(t, raw, ns.Path("services/svc/b")); return !ok }, "b unregistered")
	if got := len(c.Instances()); got != 2 {
		t.Fatalf("a cut-off cache holds %d instances, want its last copy of 2", got)
	}
	if _, err := pr.Pick(); err != nil {
		t.Fatalf("Pick while cut off: %v", err)
	}
	p.Heal()
	rec.WaitFor(t, convergeBound, "b Removed", func(evs []recorded) bool { return countType(evs, cache.Removed) == 1 })
	for i := 0; i < 4; i++ {
		in, err := pr.Pick()
		if err != nil || in.ID != "a" {
			t.Fatalf("Pick after the reconnect: %v %v", in.ID, err)
		}
	}
}
