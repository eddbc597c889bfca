package leader_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/internal/testkit/sessiontest"
	"github.com/zkrecipes/zkrecipes/leader"
	"github.com/zkrecipes/zkrecipes/recipes"
	"github.com/zkrecipes/zkrecipes/session"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// waitLeader reads ch until it delivers a value for which ok holds.
func waitLeader(t testing.TB, ch <-chan recipes.Participant, what string, ok func(recipes.Participant) bool) recipes.Participant {
	t.Helper()
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	var seen []recipes.Participant
	for {
		select {
		case p, open := <-ch:
			if !open {
				t.Fatalf("%s: channel closed; saw %+v", what, seen)
			}
			seen = append(seen, p)
			if ok(p) {
				return p
			}
		case <-deadline.C:
			t.Fatalf("%s: not within %v; saw %+v", what, wait, seen)
		}
	}
}

func TestObserve(t *testing.T) {
	ns := zktest.NewNamespace(t)
	obs := sessiontest.Connect(t, ns)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch, err := leader.Observe(ctx, obs, electionPath)
	if err != nil {
		t.Fatal(err)
	}
	none := func(p recipes.Participant) bool { return p == recipes.Participant{} }
	waitLeader(t, ch, "no leader while the path does not exist", none)

	a := startLatch(t, sessiontest.Connect(t, ns), "a")
	ta := await(t, a)
	p := waitLeader(t, ch, "a leads", func(p recipes.Participant) bool { return p.ID == "a" })
	if p.Node != ta.Node() || !p.Holds || p.Token != ta.Token() {
		t.Errorf("observed %+v, term node %s token %d", p, ta.Node(), ta.Token())
	}
	// The observed leader is what leader.Leader reads, every field.
	read, ok, err := leader.Leader(ctx, obs, electionPath)
	if err != nil || !ok || read != p || p.Kind != "latch" || p.SessionID == 0 {
		t.Errorf("observed %+v, leader.Leader read %+v (%v, %v)", p, read, ok, err)
	}
	b := startLatch(t, sessiontest.Connect(t, ns), "b")
	zktest.Eventually(t, wait, func() bool { return len(children(t, ns.Conn(t), ns)) == 2 }, "b queued")
	a.Close()
	waitLeader(t, ch, "b leads", func(p recipes.Participant) bool { return p.ID == "b" })
	b.Close()
	waitLeader(t, ch, "no leader", none)

	// Selector nodes are recognised too.
	sel := newSelector(t, sessiontest.Connect(t, ns), "sel", holdFor(newCallLog(), "sel", time.Hour))
	if err := sel.Start(); err != nil {
		t.Fatal(err)
	}
	waitLeader(t, ch, "selector leads", func(p recipes.Participant) bool { return p.ID == "sel" && lockNode.MatchString(p.Node) })
	sel.Close()
	waitLeader(t, ch, "no leader", none)

	cancel()
	for range ch { // closed once ctx ends
	}
}

// watchedPaths returns the paths that have watches on the server (wchp).
func watchedPaths(t testing.TB, ns *zktest.Namespace) map[string]bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	out, err := zktest.FourLetterWord(ctx, ns.Servers()[0], "wchp")
	if err != nil {
		t.Fatalf("wchp: %v", err)
	}
	paths := map[string]bool{}
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "/") {
			paths[strings.TrimSpace(line)] = true
		}
	}
	return paths
}

// Observe on a missing election path polls for it without leaving a watch
// behind, and reports the leader once a participant creates the path.
func TestObserveMissingPath(t *testing.T) {
	ns := zktest.NewNamespace(t)
	obs := sessiontest.Connect(t, ns)
	full := ns.Path(electionPath)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch, err := leader.Observe(ctx, obs, electionPath)
	if err != nil {
		t.Fatal(err)
	}
	none := func(p recipes.Participant) bool { return p == recipes.Participant{} }
	waitLeader(t, ch, "no leader while the path does not exist", none)

	// A second observer whose ctx ends while the path is still missing.
	ctx2, cancel2 := context.WithCancel(context.Background())
	ch2, err := leader.Observe(ctx2, obs, electionPath)
	if err != nil {
		t.Fatal(err)
	}
	waitLeader(t, ch2, "second observer: no leader", none)
	cancel2()
	for range ch2 { // closed once ctx2 ends
	}
	// Each observer has read the path before delivering its first value;
	// neither may have left a watch on it, including the one whose ctx ended.
	if watchedPaths(t, ns)[full] {
		t.Errorf("a watch is registered on the missing path %s", full)
	}

	a := startLatch(t, sessiontest.Connect(t, ns), "a")
	ta := await(t, a)
	p := waitLeader(t, ch, "a leads", func(p recipes.Participant) bool { return p.ID == "a" })
	if p.Node != ta.Node() || !p.Holds || p.Token != ta.Token() {
		t.Errorf("observed %+v, term node %s token %d", p, ta.Node(), ta.Token())
	}
	// The observed leader is what leader.Leader reads, every field.
	read, ok, err := leader.Leader(ctx, obs, electionPath)
	if err != nil || !ok || read != p || p.Kind != "latch" || p.SessionID == 0 {
		t.Errorf("observed %+v, leader.Leader read %+v (%v, %v)", p, read, ok, err)
	}
	cancel()
	for range ch {
	}
}

func TestObserveSessionClosed(t *testing.T) {
	ns := zktest.NewNamespace(t)
	obs := sessiontest.Connect(t, ns)
	ch, err := leader.Observe(context.Background(), obs, electionPath)
	if err != nil {
		t.Fatal(err)
	}
	waitLeader(t, ch, "first value", func(recipes.Participant) bool { return true })
	obs.Close()
	deadline := time.After(wait)
	for {
		select {
		case _, open := <-ch:
			if !open {
				return
			}
		case <-deadline:
			t.Fatal("Observe's channel not closed after the session was closed")
		}
	}
}

func TestObserveBadInput(t *testing.T) {
	ns := zktest.NewNamespace(t)
	s := sessiontest.Connect(t, ns)
	if _, err := leader.Observe(context.Background(), nil, electionPath); !errors.Is(err, session.ErrBadArgument) {
		t.Errorf("nil session: %v", err)
	}
	if _, err := leader.Observe(context.Background(), s, "no-slash"); err == nil {
		t.Error("bad path accepted")
	}
	if _, err := leader.Participants(context.Background(), nil, electionPath); !errors.Is(err, session.ErrBadArgument) {
		t.Errorf("Participants nil session: %v", err)
	}
	if _, _, err := leader.Leader(context.Background(), s, "/x/"); err == nil {
		t.Error("Leader: bad path accepted")
	}
}
