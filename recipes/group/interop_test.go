package group_test

import (
	"context"
	"errors"
	"path"
	"strings"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/internal/testkit/curatortest"
	"github.com/zkrecipes/zkrecipes/internal/testkit/sessiontest"
	"github.com/zkrecipes/zkrecipes/recipes/group"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// javaSees waits until the Curator member's getCurrentMembers equals want.
func javaSees(t *testing.T, j *curatortest.Group, want map[string]string) {
	t.Helper()
	var got map[string]string
	zktest.Eventually(t, wait, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		var err error
		got, err = j.Members(ctx)
		if err != nil {
			t.Fatalf("Curator members: %v", err)
		}
		return sameView(got, want)
	}, "Curator GroupMember sees %v", want)
}

// goSees waits until every Go member's view equals want.
func goSees(t *testing.T, want map[string]string, ms ...*group.Member) {
	t.Helper()
	zktest.Eventually(t, wait, func() bool {
		for _, m := range ms {
			if !sameView(text(m.Members()), want) {
				return false
			}
		}
		return true
	}, "Go members see %v", want)
}

// TestCuratorGroupMember: a Curator GroupMember and Go members on one group
// path see each other, with their data: joins, data changes and leaves, in
// both directions.
func TestCuratorGroupMember(t *testing.T) {
	ns := zktest.NewNamespace(t)
	raw := ns.Conn(t)
	ctx := ctxT(t)
	j := curatortest.StartGroup(t, ns.Servers(), ns.Path(groupPath), "java1", "jdata")
	if err := j.Start(ctx); err != nil {
		t.Fatal(err)
	}
	g1 := startMember(t, sessiontest.Connect(t, ns), groupPath, "go1", "gdata")
	g2 := startMember(t, sessiontest.Connect(t, ns), groupPath, "go2", "")
	all := map[string]string{"java1": "jdata", "go1": "gdata", "go2": ""}
	goSees(t, all, g1, g2)
	javaSees(t, j, all)
	if v := serverView(t, raw, ns.Path(groupPath)); !sameView(v, all) {
		t.Fatalf("server children %v, want %v", v, all)
	}

	if err := j.SetData(ctx, "jdata2"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "SetData", func(ctx context.Context) error { return g1.SetData(ctx, []byte("gdata2")) })
	all = map[string]string{"java1": "jdata2", "go1": "gdata2", "go2": ""}
	goSees(t, all, g1, g2)
	javaSees(t, j, all)

	g2.Close()
	delete(all, "go2")
	javaSees(t, j, all)
	goSees(t, all, g1)

	if err := j.Close(ctx); err != nil {
		t.Fatal(err)
	}
	delete(all, "java1")
	goSees(t, all, g1)
}

// uuidOf returns the uuid of a protected node path ("" for another path).
func uuidOf(p string) string {
	b := path.Base(p)
	if len(b) < len("_c_")+36 || b[:3] != "_c_" {
		return ""
	}
	return b[3 : 3+36]
}

// TestCuratorPersistentNode: a Curator PersistentNode and a Go Node in the
// matching mode on one path. With protection (EPHEMERAL, and
// EPHEMERAL_SEQUENTIAL) both create nodes of the same form side by side,
// each with its own uuid; a Go member of the directory sees both with their
// data, and the Curator one leave. Without protection (EPHEMERAL, the path
// itself) the Go Node leaves the Curator node alone and creates its own once
// Curator's is gone.
func TestCuratorPersistentNode(t *testing.T) {
	for _, tc := range []struct {
		mode group.Mode
		java curatortest.NodeMode
	}{
		{group.ProtectedEphemeralSequential, curatortest.NodeProtectedSequential},
		{group.ProtectedEphemeral, curatortest.NodeProtectedEphemeral},
		{group.Ephemeral, curatortest.NodeEphemeral},
	} {
		t.Run(tc.mode.String(), func(t *testing.T) {
			ns := zktest.NewNamespace(t)
			raw := ns.Conn(t)
			ctx := ctxT(t)
			j := curatortest.StartGroup(t, ns.Servers(), ns.Path(groupPath), "java1", "jdata")
			jfull, err := j.StartNode(ctx, tc.java, ns.Path(nodePath), "jnode")
			if err != nil {
				t.Fatal(err)
			}
			jpath := strings.TrimPrefix(jfull, ns.Root)
			if !nameOf[tc.mode].MatchString(jpath) {
				t.Fatalf("Curator's node %q does not match the Go mode's form %v", jpath, nameOf[tc.mode])
			}
			s := sessiontest.Connect(t, ns)
			n := startNode(t, s, nodePath, tc.mode, "gnode")
			if tc.mode == group.Ephemeral {
				wctx, cancel := context.WithTimeout(ctx, 2*time.Second)
				err := n.Wait(wctx)
				cancel()
				if !errors.Is(err, context.DeadlineExceeded) {
					t.Fatalf("Wait while Curator holds the node: %v, want DeadlineExceeded", err)
				}
				if d, _, _ := stat(t, raw, jfull); string(d) != "jnode" {
					t.Fatalf("Curator's node holds %q, want jnode", d)
				}
				if err := j.CloseNode(ctx); err != nil {
					t.Fatal(err)
				}
				waitFor(t, "Wait", n.Wait)
				if d, st, _ := stat(t, raw, jfull); string(d) != "gnode" || st.EphemeralOwner != s.SessionID() {
					t.Fatalf("after Curator's close the node holds %q owned by 0x%x, want gnode of 0x%x", d, ownerOf(st), s.SessionID())
				}
				return
			}
			waitFor(t, "Wait", n.Wait)
			gpath := n.Path()
			if !nameOf[tc.mode].MatchString(gpath) || uuidOf(gpath) == uuidOf(jpath) {
				t.Fatalf("Go node %q, Curator node %q: want the same form with different uuids", gpath, jpath)
			}
			// A Go member of the directory sees both nodes, with their data.
			m := startMember(t, s, path.Dir(nodePath), "watcher", "w")
			waitFor(t, "Member.Wait", m.Wait)
			want := map[string]string{path.Base(jpath): "jnode", path.Base(gpath): "gnode", "watcher": "w"}
			goSees(t, want, m)
			if err := j.CloseNode(ctx); err != nil {
				t.Fatal(err)
			}
			delete(want, path.Base(jpath))
			goSees(t, want, m)
		})
	}
}
