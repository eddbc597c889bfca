package engine_test

import (
	"fmt"
	"testing"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/internal/engine"
	"github.com/zkrecipes/zkrecipes/internal/testkit/curatortest"
	"github.com/zkrecipes/zkrecipes/internal/testkit/sessiontest"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// notNull fails the test for each full server path in ps whose data, read
// through raw, is a null buffer: go-zookeeper reads a null back as nil and
// empty data as a non-nil empty slice.
func notNull(t *testing.T, raw *zk.Conn, ps ...string) {
	t.Helper()
	for _, p := range ps {
		d, _, err := raw.Get(p)
		if err != nil {
			t.Fatalf("get %s: %v", p, err)
		}
		if d == nil {
			t.Errorf("%s holds a null buffer, want data a Java client can read", p)
		}
	}
}

// TestNodeDataNeverNull: the nodes an engine creates and writes hold data,
// never a null buffer, whatever data the caller gives (nil included), in
// every way the engine creates them: the plain create, the multi with a
// setData on the directory, a placed node and counted leases. The recipe
// directory and its parents (containers) are read too: the setData of the
// multi must not write a null into them.
func TestNodeDataNeverNull(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []engine.Option
	}{
		{"default", nil},
		{"multi", []engine.Option{engine.WithMultiCreate(true)}},
		{"plain", []engine.Option{engine.WithMultiCreate(false)}},
	} {
		for _, data := range [][]byte{nil, {}} {
			t.Run(fmt.Sprintf("%s/%s", tc.name, map[bool]string{true: "nil", false: "empty"}[data == nil]), func(t *testing.T) {
				ns := zktest.NewNamespace(t)
				raw := ns.Conn(t)
				ctx := ctxT(t)
				in := newInternals(t, sessiontest.Connect(t, ns), tc.opts...)
				queued, err := in.Acquire(ctx, placedDriver("a-", ""), data)
				if err != nil {
					t.Fatal(err)
				}
				placed, err := in.TryAcquire(ctx, placedDriver("b-", queued.Node()), data)
				if err != nil {
					t.Fatal(err)
				}
				notNull(t, raw, ns.Path("/r"), ns.Path(dir), queued.Path(), placed.Path())

				counted := newInternalsAt(t, sessiontest.Connect(t, ns), "/r/leases", tc.opts...)
				ls, err := counted.AcquireCounted(ctx, engine.CountedSpec{Marker: "lease-", Data: data, N: 2, Max: 2})
				if err != nil {
					t.Fatal(err)
				}
				notNull(t, raw, ns.Path("/r/leases"), ls[0].Path(), ls[1].Path())
			})
		}
	}
}

// TestCuratorReadsNodeData: Curator's LeaderLatch reads every latch node's
// data as its participant id (getLeader, getParticipants). A latch node
// created through the engine with nil or empty data is read as an empty id;
// a null would make Curator fail with a NullPointerException.
func TestCuratorReadsNodeData(t *testing.T) {
	for _, data := range [][]byte{nil, {}} {
		t.Run(map[bool]string{true: "nil", false: "empty"}[data == nil], func(t *testing.T) {
			ns := zktest.NewNamespace(t)
			ctx := ctxT(t)
			const latchPath = "/latch"
			in := newInternalsAt(t, sessiontest.Connect(t, ns), latchPath, engine.WithMultiCreate(true))
			l, err := in.Acquire(ctx, engine.Standard("latch-", 1), data)
			if err != nil {
				t.Fatal(err)
			}
			j := curatortest.StartLatch(t, ns.Servers(), ns.Path(latchPath), "java")
			if err := j.Start(ctx); err != nil {
				t.Fatal(err)
			}
			var leader string
			var ids []string
			zktest.Eventually(t, wait, func() bool {
				leader, ids, err = j.Participants(ctx)
				if err != nil {
					t.Fatalf("Curator's participants with a Go latch node of %q data: %v", data, err)
				}
				return len(ids) == 1 // the Go node's empty id is not printed
			}, "Curator sees its own latch node")
			if leader != "" || ids[0] != "java" {
				t.Fatalf("Curator's leader %q, participants %q: want the Go node (empty id) leading, then java", leader, ids)
			}
			if err := l.Release(ctx); err != nil {
				t.Fatal(err)
			}
			if _, err := j.WaitLeader(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestCommitDataNeverNull: a guarded write's create and setData with nil
// data write empty data, not a null buffer, as the engine's own nodes do.
func TestCommitDataNeverNull(t *testing.T) {
	ns := zktest.NewNamespace(t)
	raw := ns.Conn(t)
	ctx := ctxT(t)
	in := newInternals(t, sessiontest.Connect(t, ns))
	l, err := in.Acquire(ctx, engine.Standard("lock-", 1), []byte("id"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Commit(ctx,
		&zk.CreateRequest{Path: "/created", Data: nil},
		&zk.CreateRequest{Path: "/written", Data: []byte("x")},
		&zk.SetDataRequest{Path: "/written", Data: nil, Version: -1},
	); err != nil {
		t.Fatal(err)
	}
	notNull(t, raw, ns.Path("/created"), ns.Path("/written"))
}
