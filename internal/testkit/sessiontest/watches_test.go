package sessiontest_test

import (
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/internal/testkit/sessiontest"
	"github.com/zkrecipes/zkrecipes/zktest"
)

func TestMain(m *testing.M) { zktest.Main(m) }

const wait = 30 * time.Second

// TestWatchesListsDataWatchesOnly: Watches lists the session's data watches
// (a data read's and an exists check's, on a node that is missing too), and
// neither its child watches nor another session's watches.
func TestWatchesListsDataWatchesOnly(t *testing.T) {
	ns := zktest.NewNamespace(t)
	raw := ns.Conn(t)
	s := sessiontest.Connect(t, ns)
	other := sessiontest.Connect(t, ns)
	data, parent, missing, others := ns.Path("/data"), ns.Path("/parent"), ns.Path("/missing"), ns.Path("/others")
	for _, p := range []string{data, parent, parent + "/child", others} {
		if _, err := raw.Create(p, nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
			t.Fatal(err)
		}
	}
	// The server registers a watch before it answers the read that sets it.
	if _, _, _, err := s.Conn().GetW(data); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := s.Conn().ExistsW(missing); err != nil {
		t.Fatal(err)
	}
	_, _, childEvents, err := s.Conn().ChildrenW(parent)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := other.Conn().GetW(others); err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for p := range sessiontest.Watches(t, ns.Server.Addr(), s.SessionID()) {
		if strings.HasPrefix(p, ns.Root+"/") {
			got[p] = true
		}
	}
	want := map[string]bool{data: true, missing: true}
	if len(got) != len(want) || !got[data] || !got[missing] {
		t.Errorf("Watches lists %v under the test's root, want the data and exists watches %v (not the child watch on %s, nor the other session's on %s)",
			got, want, parent, others)
	}
	if w := sessiontest.Watches(t, ns.Server.Addr(), other.SessionID()); !w[others] || w[data] {
		t.Errorf("the other session's watches %v, want %s and not %s", w, others, data)
	}
	// The child watch was there all along: a new child fires it.
	if _, err := raw.Create(parent+"/another", nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	select {
	case ev := <-childEvents:
		if ev.Type != zk.EventNodeChildrenChanged {
			t.Errorf("the child watch fired with %v", ev.Type)
		}
	case <-time.After(wait):
		t.Fatal("the child watch did not fire: it was never set")
	}
}
