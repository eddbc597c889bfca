package zksession_test

import (
	"testing"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/internal/testkit/sessiontest"
	"github.com/zkrecipes/zkrecipes/internal/zksession"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// TestNodeDataNeverNull: every node the Session creates holds data that a
// Java client can read: the namespace's nodes, the containers of
// EnsureContainers and CreateContainers, and ephemerals created with nil
// data hold empty data, never a null buffer (go-zookeeper sends nil as
// length -1, and Curator's GroupMember and LeaderLatch fail on a null).
// go-zookeeper reads a null back as nil and empty data as a non-nil empty
// slice, so a raw read tells them apart.
func TestNodeDataNeverNull(t *testing.T) {
	ns := zktest.NewNamespace(t)
	raw := ns.Conn(t)
	s := sessiontest.ConnectTo(t, ns.Servers(), ns.Root+"/app/deep")
	zs := sessiontest.Core(s)
	ctx := ctxT(t, wait)
	ensured, err := s.Path("/x/y")
	if err != nil {
		t.Fatal(err)
	}
	if err := zs.EnsureContainers(ctx, ensured); err != nil {
		t.Fatal(err)
	}
	created, err := s.Path("/c/d")
	if err != nil {
		t.Fatal(err)
	}
	if err := zs.CreateContainers(ctx, created); err != nil {
		t.Fatal(err)
	}
	nodes := []string{ns.Root + "/app", ns.Root + "/app/deep", ns.Root + "/app/deep/x", ensured,
		ns.Root + "/app/deep/c", created}
	for _, tc := range []struct {
		name  string
		data  []byte
		flags int32
	}{
		{"nil", nil, 0},
		{"nil-seq-", nil, zk.FlagSequence},
		{"empty", []byte{}, 0},
	} {
		p, _, err := zs.CreateEphemeral(ctx, zs.Epoch(), ensured+"/"+tc.name, tc.data, tc.flags)
		if err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, p)
	}
	for _, p := range nodes {
		d, _, err := raw.Get(p)
		if err != nil {
			t.Fatalf("get %s: %v", p, err)
		}
		if d == nil || len(d) != 0 {
			t.Errorf("%s holds %q (nil: %v), want empty data, not null", p, d, d == nil)
		}
	}
}

// TestNodeData: NodeData turns nil into empty data and keeps anything else.
func TestNodeData(t *testing.T) {
	if d := zksession.NodeData(nil); d == nil || len(d) != 0 {
		t.Errorf("NodeData(nil) = %#v, want a non-nil empty slice", d)
	}
	in := []byte("x")
	if d := zksession.NodeData(in); &d[0] != &in[0] {
		t.Errorf("NodeData copied its input")
	}
}
