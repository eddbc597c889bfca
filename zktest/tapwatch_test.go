package zktest_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// fires waits for every channel of chs to deliver an event.
func fires(t *testing.T, what string, chs ...<-chan zk.Event) {
	t.Helper()
	timeout := time.After(15 * time.Second)
	for i, ch := range chs {
		select {
		case <-ch:
		case <-timeout:
			t.Fatalf("%s: watch %d of %d did not fire", what, i+1, len(chs))
		}
	}
}

// TestTapWatches: the tap counts the client's watcher registrations as
// go-zookeeper keeps them: one per successful GetW/ExistsW/ChildrenW (and
// ExistsW on a missing node), none for plain reads or a GetW that fails, all
// of a path and type removed by the notification that fires them.
func TestTapWatches(t *testing.T) {
	ns := zktest.NewNamespace(t)
	tap := zktest.NewTap()
	c := zktest.Conn(t, ns.Servers(), 4*time.Second, zk.WithDialer(tap.Dialer()))
	other := ns.Conn(t)
	dir := ns.Path("dir")
	p, absent := dir+"/p", dir+"/absent"
	for _, n := range []string{dir, p} {
		if _, err := c.Create(n, nil, 0, acl); err != nil {
			t.Fatal(err)
		}
	}
	check := func(step string, want map[string]int) {
		t.Helper()
		if _, err := tap.Notifications(); err != nil {
			t.Fatal(err)
		}
		got := tap.Watches()
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("%s: Watches = %v, want %v", step, got, want)
		}
		total := 0
		for _, n := range want {
			total += n
		}
		if n := zktest.WatchCount(tap); n != total {
			t.Fatalf("%s: WatchCount = %d, want %d", step, n, total)
		}
	}

	if _, _, err := c.Get(p); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.Exists(absent); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.Children(dir); err != nil {
		t.Fatal(err)
	}
	check("plain reads", map[string]int{})

	var onP []<-chan zk.Event
	for i := 0; i < 2; i++ { // the same path twice: two channels in the client
		_, _, w, err := c.GetW(p)
		if err != nil {
			t.Fatal(err)
		}
		onP = append(onP, w)
	}
	_, _, w, err := c.ExistsW(p)
	if err != nil {
		t.Fatal(err)
	}
	onP = append(onP, w)
	check("GetW twice, ExistsW", map[string]int{p: 3})

	if _, _, _, err := c.GetW(absent); err != zk.ErrNoNode {
		t.Fatalf("GetW(absent) = %v, want ErrNoNode", err)
	}
	check("GetW on a missing node", map[string]int{p: 3})
	ok, _, onAbsent, err := c.ExistsW(absent)
	if err != nil || ok {
		t.Fatalf("ExistsW(absent) = %v, %v", ok, err)
	}
	_, _, onDir, err := c.ChildrenW(dir)
	if err != nil {
		t.Fatal(err)
	}
	check("ExistsW on a missing node, ChildrenW", map[string]int{p: 3, absent: 1, dir: 1})

	// NodeDataChanged fires data- and exists-watches of p: all three go.
	if _, err := other.Set(p, []byte("x"), -1); err != nil {
		t.Fatal(err)
	}
	fires(t, "set p", onP...)
	check("after NodeDataChanged", map[string]int{absent: 1, dir: 1})

	// NodeCreated fires the exists-watch, NodeChildrenChanged the child-watch.
	if _, err := other.Create(absent, nil, 0, acl); err != nil {
		t.Fatal(err)
	}
	fires(t, "create absent", onAbsent, onDir)
	check("after NodeCreated and NodeChildrenChanged", map[string]int{})

	// NodeDeleted fires every type on the path.
	_, _, w1, err := c.GetW(absent)
	if err != nil {
		t.Fatal(err)
	}
	_, _, w2, err := c.ExistsW(absent)
	if err != nil {
		t.Fatal(err)
	}
	check("GetW, ExistsW", map[string]int{absent: 2})
	if err := other.Delete(absent, -1); err != nil {
		t.Fatal(err)
	}
	fires(t, "delete absent", w1, w2)
	check("after NodeDeleted", map[string]int{})
}

// TestTapWatchesReconnectAndExpiry: a reconnect to the same session keeps
// the client's watchers (go-zookeeper sends them again); an expired session
// drops them all.
func TestTapWatchesReconnectAndExpiry(t *testing.T) {
	ns := zktest.NewNamespace(t)
	px := ns.Proxy(t)
	tap := zktest.NewTap()
	rec := &recorder{}
	c := zktest.Conn(t, px.Servers(), 4*time.Second, zk.WithDialer(tap.Dialer()), zk.WithEventCallback(rec.cb))
	absent := ns.Path("absent")
	for i := 0; i < 2; i++ {
		if _, _, _, err := c.ExistsW(absent); err != nil {
			t.Fatal(err)
		}
	}
	if n := zktest.WatchCount(tap); n != 2 {
		t.Fatalf("WatchCount = %d, want 2", n)
	}

	m := rec.mark()
	px.Cut()
	zktest.Eventually(t, 15*time.Second, func() bool {
		return rec.seq(m, zk.StateDisconnected, zk.StateHasSession)
	}, "no reconnect after a cut: %v", rec.all())
	if n := zktest.WatchCount(tap); n != 2 {
		t.Fatalf("WatchCount after a reconnect = %d, want 2", n)
	}

	expire(t, ns.Servers(), lastSession(t, tap))
	m = rec.mark()
	px.Cut()
	zktest.Eventually(t, 15*time.Second, func() bool { return rec.has(m, zk.StateExpired) },
		"the client did not learn of the expiry: %v", rec.all())
	if n := zktest.WatchCount(tap); n != 0 {
		t.Fatalf("WatchCount after the session expired = %d, want 0", n)
	}
	if _, err := tap.Notifications(); err != nil {
		t.Fatal(err)
	}
}
