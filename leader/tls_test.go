package leader_test

import (
	"context"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/internal/testkit/sessiontest"
	"github.com/zkrecipes/zkrecipes/leader"
)

// Leader election works over TLS (sessions on the secure port of the
// package's shared TLS server): of two latches exactly one leads, and when
// it resigns the other leads with a greater token; two selectors with
// requeue take turns. Nothing is left behind.
func TestTLSElection(t *testing.T) {
	ns := sessiontest.NamespaceTLS(t)
	raw := ns.Conn(t)
	ls := []*leader.Latch{
		startLatch(t, sessiontest.ConnectTLS(t, ns), "a"),
		startLatch(t, sessiontest.ConnectTLS(t, ns), "b"),
	}
	// Start does not block: both must be in the election before the leader
	// resigns, or the resigning latch may lead again at once.
	waitChildren(t, raw, ns, 2)
	first := oneLeader(t, ls)
	term := await(t, ls[first])
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if err := ls[first].Resign(ctx); err != nil {
		t.Fatalf("Resign: %v", err)
	}
	waitDone(t, term, wait)
	next := await(t, ls[1-first])
	if next.Token() <= term.Token() {
		t.Errorf("tokens %d then %d: not growing", term.Token(), next.Token())
	}
	for _, l := range ls {
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}

	log := newCallLog()
	var sels []*leader.Selector
	for _, id := range []string{"s0", "s1"} {
		sels = append(sels, newSelector(t, sessiontest.ConnectTLS(t, ns), id, holdFor(log, id, 5*time.Millisecond), leader.WithRequeue(true)))
	}
	for _, sel := range sels {
		if err := sel.Start(); err != nil {
			t.Fatal(err)
		}
	}
	log.waitCalls(t, "each selector leads twice", func(calls []call) bool {
		n := map[string]int{}
		for _, c := range calls {
			n[c.id]++
		}
		return n["s0"] >= 2 && n["s1"] >= 2
	})
	for _, sel := range sels {
		if err := sel.Close(); err != nil {
			t.Fatal(err)
		}
	}
	log.check(t)
	if kids := children(t, raw, ns); len(kids) != 0 {
		t.Errorf("nodes left after Close: %v", kids)
	}
}
