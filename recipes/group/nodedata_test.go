package group_test

import (
	"context"
	"path"
	"testing"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/internal/testkit/curatortest"
	"github.com/zkrecipes/zkrecipes/internal/testkit/sessiontest"
	"github.com/zkrecipes/zkrecipes/recipes/group"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// notNull fails the test for each full server path in ps whose data, read
// through raw, is a null buffer (go-zookeeper reads a null back as nil and
// empty data as a non-nil empty slice), or is not want.
func notNull(t *testing.T, raw *zk.Conn, want string, ps ...string) {
	t.Helper()
	for _, p := range ps {
		d, _, err := raw.Get(p)
		if err != nil {
			t.Fatalf("get %s: %v", p, err)
		}
		if d == nil || string(d) != want {
			t.Errorf("%s holds %q (null: %v), want %q", p, d, d == nil, want)
		}
	}
}

// TestNodeDataNeverNull: nil data (documented as empty data) is written as
// empty data, never as a null buffer, which Java clients read as null: by a
// Node in every mode, a Member, SetData(nil), and in the containers created
// for the parents.
func TestNodeDataNeverNull(t *testing.T) {
	for _, data := range [][]byte{nil, {}} {
		t.Run(map[bool]string{true: "nil", false: "empty"}[data == nil], func(t *testing.T) {
			ns := zktest.NewNamespace(t)
			raw := ns.Conn(t)
			s := sessiontest.Connect(t, ns)
			var nodes []*group.Node
			for _, mode := range modes {
				n, err := group.NewNode(s, path.Join("/nodes", mode.String(), "n"), mode, data)
				if err != nil {
					t.Fatal(err)
				}
				if err := n.Start(); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { n.Close() })
				nodes = append(nodes, n)
			}
			m, err := group.NewMember(s, groupPath, "m", data)
			if err != nil {
				t.Fatal(err)
			}
			if err := m.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { m.Close() })
			waitFor(t, "Member.Wait", m.Wait)
			ps := []string{ns.Path("/nodes"), ns.Path("/groups"), ns.Path(groupPath), ns.Path(groupPath + "/m")}
			for _, n := range nodes {
				waitFor(t, "Node.Wait", n.Wait)
				ps = append(ps, ns.Path(path.Dir(n.Path())), ns.Path(n.Path()))
			}
			notNull(t, raw, "", ps...)

			// SetData(nil) after other data.
			waitFor(t, "SetData", func(ctx context.Context) error { return m.SetData(ctx, []byte("x")) })
			notNull(t, raw, "x", ns.Path(groupPath+"/m"))
			waitFor(t, "SetData", func(ctx context.Context) error { return m.SetData(ctx, data) })
			notNull(t, raw, "", ns.Path(groupPath+"/m"))
		})
	}
}

// TestCuratorReadsEmptyData: Curator's GroupMember.getCurrentMembers fails
// with a NullPointerException on a child of the group whose data is null.
// It reads, as members with empty data, a Go member created with nil data,
// one whose data was set to nil, and a container that a Go Node below the
// group path created inside it.
func TestCuratorReadsEmptyData(t *testing.T) {
	ns := zktest.NewNamespace(t)
	ctx := ctxT(t)
	j := curatortest.StartGroup(t, ns.Servers(), ns.Path(groupPath), "java1", "jdata")
	if err := j.Start(ctx); err != nil {
		t.Fatal(err)
	}
	s := sessiontest.Connect(t, ns)
	g, err := group.NewMember(s, groupPath, "go1", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	all := map[string]string{"java1": "jdata", "go1": ""}
	javaSees(t, j, all)
	goSees(t, all, g)

	g2 := startMember(t, sessiontest.Connect(t, ns), groupPath, "go2", "data")
	all["go2"] = "data"
	javaSees(t, j, all)
	waitFor(t, "SetData", func(ctx context.Context) error { return g2.SetData(ctx, nil) })
	all["go2"] = ""
	javaSees(t, j, all)

	// A Node below the group path: its parent, a container, is a child of
	// the group, and a member to Curator as to a Go member.
	n := startNode(t, s, groupPath+"/sub/n", group.Ephemeral, "x")
	waitFor(t, "Node.Wait", n.Wait)
	all["sub"] = ""
	javaSees(t, j, all)
	goSees(t, all, g, g2)
}
