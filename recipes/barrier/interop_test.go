package barrier_test

// Interoperability with Apache Curator 5.4's DistributedDoubleBarrier and
// DistributedBarrier (internal/testkit/curatortest's CuratorBarrier program).
// The Java side gets full server paths (the Go sessions' namespace root plus
// the path).

import (
	"testing"

	"github.com/zkrecipes/zkrecipes/internal/testkit/curatortest"
	"github.com/zkrecipes/zkrecipes/internal/testkit/sessiontest"
	"github.com/zkrecipes/zkrecipes/recipes/barrier"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// A Curator member and a Go member of one double barrier of two, for two
// rounds: each waits in enter for the other, whichever comes first, each
// waits in leave for the other, and nothing is left after a round. (The
// member UUIDs are random, so over runs either side sorts lowest, the one
// Curator keeps until the others have left.)
func TestInteropDouble(t *testing.T) {
	ns := zktest.NewNamespace(t)
	raw := ns.Conn(t)
	ctx := ctxT(t)
	j := curatortest.StartDoubleBarrier(t, ns.Servers(), ns.Path(bpath), 2)
	g := newDouble(t, sessiontest.Connect(t, ns), 2)

	// Round 1: Java first in both phases.
	if err := j.BeginEnter(); err != nil {
		t.Fatal(err)
	}
	waitMembers(t, raw, ns, 1)
	if len(j.Lines()) != 1 { // READY only: Curator still waits
		t.Fatalf("Curator printed %v before the Go member entered", j.Lines())
	}
	if err := g.Enter(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := j.Expect(ctx, "ENTERED"); err != nil {
		t.Fatal(err)
	}
	if err := j.BeginLeave(); err != nil {
		t.Fatal(err)
	}
	// Curator's member deletes its node at once unless it is the lowest,
	// which waits for the others first: either way it waits for Go's.
	for _, l := range j.Lines() {
		if l.Word() == "LEFT" {
			t.Fatal("Curator left before the Go member did")
		}
	}
	if err := g.Leave(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := j.Expect(ctx, "LEFT"); err != nil {
		t.Fatal(err)
	}
	zktest.Eventually(t, wait, func() bool { return len(kids(t, raw, ns)) == 0 }, "nothing left after round 1")

	// Round 2: Go first in both phases.
	entered := async(func() error { return g.Enter(ctx) })
	waitMembers(t, raw, ns, 1)
	pending(t, "Enter", entered)
	if err := j.BeginEnter(); err != nil {
		t.Fatal(err)
	}
	if err := sessiontest.Recv(t, entered, wait, "Go Enter"); err != nil {
		t.Fatal(err)
	}
	if _, err := j.Expect(ctx, "ENTERED"); err != nil {
		t.Fatal(err)
	}
	left := async(func() error { return g.Leave(ctx) })
	waitMembers(t, raw, ns, 1)
	pending(t, "Leave", left)
	if err := j.BeginLeave(); err != nil {
		t.Fatal(err)
	}
	if _, err := j.Expect(ctx, "LEFT"); err != nil {
		t.Fatal(err)
	}
	if err := sessiontest.Recv(t, left, wait, "Go Leave"); err != nil {
		t.Fatal(err)
	}
	zktest.Eventually(t, wait, func() bool { return len(kids(t, raw, ns)) == 0 }, "nothing left after round 2")
	for _, l := range j.Lines() {
		if l.Word() == "ERR" {
			t.Fatalf("Curator: %s", l.Text)
		}
	}
}

// Curator's DistributedBarrier and Barrier on one path: Curator sets, Go
// waits until Curator removes; Go sets, Curator waits until Go removes.
func TestInteropBarrier(t *testing.T) {
	ns := zktest.NewNamespace(t)
	ctx := ctxT(t)
	j := curatortest.StartBarrier(t, ns.Servers(), ns.Path(bpath))
	s := sessiontest.Connect(t, ns)
	b, err := barrier.New(s, bpath)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := j.Set(ctx); err != nil {
		t.Fatal(err)
	}
	waited := async(func() error { return b.Wait(ctx) })
	zktest.Eventually(t, wait, func() bool { return sessiontest.Core(s).WatchCount() > 0 }, "Wait sets its watch")
	pending(t, "Wait", waited)
	if err := j.Remove(ctx); err != nil {
		t.Fatal(err)
	}
	if err := sessiontest.Recv(t, waited, wait, "Go Wait"); err != nil {
		t.Fatal(err)
	}

	if err := b.Set(ctx); err != nil {
		t.Fatal(err)
	}
	if err := j.BeginWait(); err != nil {
		t.Fatal(err)
	}
	if err := b.Remove(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := j.Expect(ctx, "WAITED"); err != nil {
		t.Fatal(err)
	}
	for _, l := range j.Lines() {
		if l.Word() == "ERR" {
			t.Fatalf("Curator: %s", l.Text)
		}
	}
}
