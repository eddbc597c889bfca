package leader_test

import (
	"context"
	"testing"

	"github.com/zkrecipes/zkrecipes/internal/testkit/sessiontest"
	"github.com/zkrecipes/zkrecipes/leader"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// TestCloseDeletesQueuedNode checks Close's promise on a healthy connection:
// when Close returns, the node of a participant that was queued (Latch) or
// campaigning (Selector) is gone. The read comes right after Close, on
// purpose: Close waits for the delete that its canceled acquire queued.
func TestCloseDeletesQueuedNode(t *testing.T) {
	ns := zktest.NewNamespace(t)
	conn := ns.Conn(t)
	first := startLatch(t, sessiontest.Connect(t, ns), "first")
	await(t, first)
	for round := 0; round < 5; round++ {
		queued := startLatch(t, sessiontest.Connect(t, ns), "queued")
		sel, err := leader.NewSelector(sessiontest.Connect(t, ns), electionPath,
			func(ctx context.Context) error { <-ctx.Done(); return nil },
			leader.WithID("selector"))
		if err != nil {
			t.Fatal(err)
		}
		if err := sel.Start(); err != nil {
			t.Fatal(err)
		}
		waitChildren(t, conn, ns, 3)
		if err := queued.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		if err := sel.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		if kids := children(t, conn, ns); len(kids) != 1 {
			t.Fatalf("round %d: %d election nodes right after Close, want the leader's only: %v", round, len(kids), kids)
		}
	}
}
