package engine_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/zkrecipes/zkrecipes/internal/engine"
	"github.com/zkrecipes/zkrecipes/internal/testkit/sessiontest"
	"github.com/zkrecipes/zkrecipes/recipes"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// placedDriver returns a driver for the tests of placed nodes: markers "a-"
// and "b-"; a node holds when only nodes of its own sequence sort before
// it; anchor, when set, places the node.
func placedDriver(marker, anchor string) *engine.Driver {
	return &engine.Driver{Marker: marker, Markers: []string{"a-", "b-"}, Anchor: anchor,
		Decide: func(sorted []engine.Child, self int) (bool, string, error) {
			for i := self - 1; i >= 0; i-- {
				if sorted[i].Seq != sorted[self].Seq {
					return false, sorted[i].Name, nil
				}
			}
			return true, "", nil
		}}
}

// TestPlacedNode: a placed node is EPHEMERAL, named with the anchor's
// sequence text after our marker, holds beside its anchor, sorts before a
// node queued after the anchor, and carries its own token; with the plain
// create (no multi token) too.
func TestPlacedNode(t *testing.T) {
	for _, multi := range []bool{true, false} {
		t.Run(map[bool]string{true: "multi", false: "plain"}[multi], func(t *testing.T) {
			ns := zktest.NewNamespace(t)
			raw := ns.Conn(t)
			ctx := ctxT(t)
			s := sessiontest.Connect(t, ns)
			in := newInternals(t, s, engine.WithMultiCreate(multi))
			anchor, err := in.Acquire(ctx, placedDriver("a-", ""), []byte("anchor"))
			if err != nil {
				t.Fatal(err)
			}
			// A node queued after the anchor.
			other := newInternals(t, sessiontest.Connect(t, ns))
			if _, err := other.TryAcquire(ctx, placedDriver("a-", ""), nil); !errors.Is(err, recipes.ErrBusy) {
				t.Fatalf("TryAcquire behind the anchor: %v", err)
			}
			p, err := in.TryAcquire(ctx, placedDriver("b-", anchor.Node()), []byte("placed"))
			if err != nil {
				t.Fatalf("placed TryAcquire: %v", err)
			}
			seqText := anchor.Node()[strings.LastIndex(anchor.Node(), "a-")+2:]
			if engine.ProtectedUUID(p.Node()) == "" || !strings.HasSuffix(p.Node(), "-b-"+seqText) || p.Seq() != anchor.Seq() {
				t.Fatalf("placed node %q (seq %d), anchor %q", p.Node(), p.Seq(), anchor.Node())
			}
			data, st, err := raw.Get(p.Path())
			if err != nil || string(data) != "placed" || st.EphemeralOwner != sessiontest.Core(s).Epoch().SessionID() || st.Czxid != p.Token() || p.Token() <= anchor.Token() {
				t.Fatalf("placed node: data %q, stat %+v, token %d, err %v", data, st, p.Token(), err)
			}
			// Releasing the anchor leaves the placed node holding.
			if err := anchor.Release(ctx); err != nil {
				t.Fatal(err)
			}
			if p.Err() != nil {
				t.Fatalf("placed lease ended with its anchor: %v", p.Err())
			}
			if err := p.Release(ctx); err != nil {
				t.Fatal(err)
			}
			waitChildren(t, raw, ns, 0)
		})
	}
}

// TestPlacedAnchorGone: a placed acquire whose anchor is gone fails with
// ErrNodeDeleted and creates nothing; a bad anchor is refused before any I/O.
func TestPlacedAnchorGone(t *testing.T) {
	ns := zktest.NewNamespace(t)
	raw := ns.Conn(t)
	ctx := ctxT(t)
	in := newInternals(t, sessiontest.Connect(t, ns))
	anchor, err := in.Acquire(ctx, placedDriver("a-", ""), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := raw.Delete(anchor.Path(), -1); err != nil {
		t.Fatal(err)
	}
	if _, err := in.Acquire(ctx, placedDriver("b-", anchor.Node()), nil); !errors.Is(err, recipes.ErrNodeDeleted) {
		t.Fatalf("placed Acquire beside a deleted anchor: %v, want ErrNodeDeleted", err)
	}
	if k := children(t, raw, ns); len(k) != 0 {
		t.Fatalf("children after a failed placed acquire: %q", k)
	}
	for _, bad := range []string{"no-marker", "x/a-0000000001", "_c_x-a-"} {
		if _, err := in.Acquire(ctx, placedDriver("b-", bad), nil); !errors.Is(err, engine.ErrBadDriver) {
			t.Errorf("anchor %q: %v, want ErrBadDriver", bad, err)
		}
	}
}
