package group_test

import (
	"context"
	"path"
	"regexp"
	"testing"

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

// protected is a protected name of base "api" with a sequence number, as
// Curator's PersistentNode (EPHEMERAL_SEQUENTIAL, protection) creates it.
var protected = regexp.MustCompile(`^_c_([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})-api([0-9]{10})$`)

// TestCuratorPersistentNodeLayout: a Curator PersistentNode
// (EPHEMERAL_SEQUENTIAL with protection) and a Go Node in
// ProtectedEphemeralSequential mode on one base path create nodes of the
// same form, side by side in one directory, each with its own uuid and the
// directory's sequence; a Go member of that directory sees both.
func TestCuratorPersistentNodeLayout(t *testing.T) {
	ns := zktest.NewNamespace(t)
	ctx := ctxT(t)
	j := curatortest.StartGroup(t, ns.Servers(), ns.Path(groupPath), "java1", "jdata")
	jpath, err := j.StartNode(ctx, ns.Path("/services/api"), "jnode")
	if err != nil {
		t.Fatal(err)
	}
	s := sessiontest.Connect(t, ns)
	n := startNode(t, s, "/services/api", group.ProtectedEphemeralSequential, "gnode")
	waitFor(t, "Wait", n.Wait)
	gpath := n.Path()
	if path.Dir(jpath) != ns.Path("services") || path.Dir(gpath) != "/services" {
		t.Fatalf("Curator node %s and Go node %s are not in %s", jpath, gpath, ns.Path("services"))
	}
	jm := protected.FindStringSubmatch(path.Base(jpath))
	gm := protected.FindStringSubmatch(path.Base(gpath))
	if jm == nil || gm == nil {
		t.Fatalf("names %q (Curator) and %q (Go): want both to match %v", path.Base(jpath), path.Base(gpath), protected)
	}
	if jm[1] == gm[1] || jm[2] == gm[2] {
		t.Fatalf("Curator %q and Go %q share a uuid or a sequence number", jm, gm)
	}
	// A Go member of /services sees both nodes, with their data.
	m := startMember(t, s, "/services", "watcher", "w")
	waitFor(t, "Member.Wait", m.Wait)
	want := map[string]string{path.Base(jpath): "jnode", path.Base(gpath): "gnode", "watcher": "w"}
	goSees(t, want, m)
	if err := j.CloseNode(ctx); err != nil {
		t.Fatal(err)
	}
	delete(want, path.Base(jpath))
	goSees(t, want, m)
}
