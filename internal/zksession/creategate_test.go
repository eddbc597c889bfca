package zksession_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/internal/testkit/sessiontest"
	"github.com/zkrecipes/zkrecipes/internal/zksession"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// countingGate counts its CreateSent calls.
type countingGate struct{ n atomic.Int32 }

func (g *countingGate) CreateSent() { g.n.Add(1) }

// TestGateCreate checks GateCreate's documentation: the gate of a path is
// told once, by the time the create of that path has been answered (it is
// told when the request is written); a create of another path, or of the
// path after UngateCreate, tells it nothing; UngateCreate reports whether
// it took the gate back (false once the wire has told it).
func TestGateCreate(t *testing.T) {
	ns := zktest.NewNamespace(t)
	s := sessiontest.Connect(t, ns)
	zs := sessiontest.Core(s)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	create := func(p string) {
		t.Helper()
		if _, err := zksession.Call(ctx, zs, func(c *zk.Conn) (string, error) {
			return c.Create(p, nil, 0, zk.WorldACL(zk.PermAll))
		}, nil); err != nil {
			t.Fatal(err)
		}
	}
	a, b, c := ns.Path("/a"), ns.Path("/b"), ns.Path("/c")
	var ga, gb, gc countingGate
	zs.GateCreate(a, &ga)
	zs.GateCreate(b, &gb)
	zs.GateCreate(c, &gc)
	create(a)
	if n := ga.n.Load(); n != 1 {
		t.Fatalf("the gate of %s was told %d times after its create, want 1", a, n)
	}
	if n := gb.n.Load(); n != 0 {
		t.Fatalf("the gate of %s was told %d times by a create of %s", b, n, a)
	}
	if !zs.UngateCreate(b) {
		t.Fatalf("UngateCreate(%s) found no gate, before any create of it", b)
	}
	if zs.UngateCreate(a) {
		t.Fatalf("UngateCreate(%s) found the gate the wire had told", a)
	}
	create(b)
	create(c)
	create(ns.Path("/d"))
	if ga.n.Load() != 1 || gb.n.Load() != 0 || gc.n.Load() != 1 {
		t.Fatalf("gates told %d, %d, %d times, want 1 (%s), 0 (%s, forgotten), 1 (%s)", ga.n.Load(), gb.n.Load(), gc.n.Load(), a, b, c)
	}
}
