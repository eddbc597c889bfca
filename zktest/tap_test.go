package zktest_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// TestTapRequests counts create, getData and delete on the client's side of
// the wire, and checks the tap against the proxy's own request parsing,
// which sees pings too.
func TestTapRequests(t *testing.T) {
	ns := zktest.NewNamespace(t)
	px := ns.Proxy(t)
	var mu sync.Mutex
	seen := map[int32]int64{} // by the proxy, pings included
	px.OnRequest(func(r zktest.Request) zktest.Action {
		mu.Lock()
		seen[r.Op]++
		mu.Unlock()
		return zktest.Forward
	})
	tap := zktest.NewTap()
	// go-zookeeper pings every third of the session timeout (~670 ms here).
	// Not shorter: it drops a connection that reads nothing for ⅔ of the
	// timeout, and a reconnect (Dials 2, a setWatches) would fail the counts
	// below; a loaded machine under -race can stall the client for longer
	// than the 330 ms a 500 ms session allowed.
	c := zktest.Conn(t, px.Servers(), 2*time.Second, zk.WithDialer(tap.Dialer()))
	before := tap.Requests()
	p := ns.Path("n")
	if _, err := c.Create(p, []byte("x"), 0, acl); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.Get(p); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(p, -1); err != nil {
		t.Fatal(err)
	}
	got := minus(tap.Requests(), before)
	want := map[int32]int64{zktest.OpCreate: 1, zktest.OpGetData: 1, zktest.OpDelete: 1}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("requests = %v, want %v", named(got), named(want))
	}

	zktest.Eventually(t, 15*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return seen[zktest.OpPing] >= 2
	}, "the proxy saw no pings")
	all := tap.Requests()
	if n, ok := all[zktest.OpPing]; ok {
		t.Fatalf("the tap counted %d pings", n)
	}
	mu.Lock()
	delete(seen, zktest.OpPing)
	mu.Unlock()
	if fmt.Sprint(all) != fmt.Sprint(seen) {
		t.Fatalf("tap counted %v, proxy saw %v (pings aside)", named(all), named(seen))
	}
	if _, err := tap.Notifications(); err != nil {
		t.Fatal(err)
	}
	if d := tap.Dials(); d != 1 {
		t.Fatalf("Dials = %d, want 1", d)
	}
}

// TestTapNotifications: a data watch firing shows up as a NodeDeleted
// notification with the node's server path.
func TestTapNotifications(t *testing.T) {
	ns := zktest.NewNamespace(t)
	tap := zktest.NewTap()
	c := zktest.Conn(t, ns.Servers(), 4*time.Second, zk.WithDialer(tap.Dialer()))
	other := ns.Conn(t)
	p := ns.Path("watched")
	if _, err := c.Create(p, nil, 0, acl); err != nil {
		t.Fatal(err)
	}
	if n, err := tap.Notifications(); err != nil || len(n) != 0 {
		t.Fatalf("Notifications before any watch = %v, %v", n, err)
	}
	_, _, w, err := c.GetW(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := other.Delete(p, -1); err != nil {
		t.Fatal(err)
	}
	select {
	case ev := <-w:
		if ev.Type != zk.EventNodeDeleted {
			t.Fatalf("watch event %v, want NodeDeleted", ev)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the watch did not fire")
	}
	// The tap records a notification before go-zookeeper reads it.
	got, err := tap.Notifications()
	if err != nil {
		t.Fatal(err)
	}
	want := []zktest.Notification{{Type: zk.EventNodeDeleted, State: zk.StateSyncConnected, Path: p}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("Notifications = %+v, want %+v", got, want)
	}
	tap.ResetNotifications()
	if n, err := tap.Notifications(); err != nil || len(n) != 0 {
		t.Fatalf("Notifications after ResetNotifications = %v, %v", n, err)
	}
}

// TestTapDialsProxyCut: a cut connection is dialled again, on the same
// session; the rewatch go-zookeeper sends on reconnect counts as a request.
func TestTapDialsProxyCut(t *testing.T) {
	ns := zktest.NewNamespace(t)
	px := ns.Proxy(t)
	tap := zktest.NewTap()
	rec := &recorder{}
	c := zktest.Conn(t, px.Servers(), 4*time.Second, zk.WithDialer(tap.Dialer()), zk.WithEventCallback(rec.cb))
	if d := tap.Dials(); d != 1 {
		t.Fatalf("Dials = %d after connecting, want 1", d)
	}
	if _, _, _, err := c.ExistsW(ns.Path("absent")); err != nil {
		t.Fatal(err)
	}
	m := rec.mark()
	px.Cut()
	zktest.Eventually(t, 15*time.Second, func() bool {
		return rec.seq(m, zk.StateDisconnected, zk.StateHasSession)
	}, "no Disconnected then HasSession after a cut: %v", rec.all())
	if d := tap.Dials(); d < 2 {
		t.Fatalf("Dials = %d after a cut and a reconnect, want at least 2", d)
	}
	if s := tap.Sessions(); len(s) != 1 || s[0].ID != c.SessionID() {
		t.Fatalf("Sessions = %v, want just 0x%x", s, c.SessionID())
	}
	zktest.Eventually(t, 15*time.Second, func() bool { return tap.Requests()[opSetWatches] == 1 },
		"no setWatches after the reconnect: %v", named(tap.Requests()))
	if _, err := tap.Notifications(); err != nil {
		t.Fatal(err)
	}
}

// Operation codes that zktest names but does not export (ZooDefs.OpCode).
const (
	opSetWatches   int32 = 101
	opCloseSession int32 = -11
)

func TestOpName(t *testing.T) {
	for op, want := range map[int32]string{
		zktest.OpCreate: "create", zktest.OpGetChildren2: "getChildren2", opSetWatches: "setWatches",
		opCloseSession: "closeSession", 3: "exists", 99: "op99",
	} {
		if got := zktest.OpName(op); got != want {
			t.Errorf("OpName(%d) = %q, want %q", op, got, want)
		}
	}
}

func minus(a, b map[int32]int64) map[int32]int64 {
	out := map[int32]int64{}
	for op, n := range a {
		if d := n - b[op]; d != 0 {
			out[op] = d
		}
	}
	return out
}

func named(m map[int32]int64) map[string]int64 {
	out := map[string]int64{}
	for op, n := range m {
		out[zktest.OpName(op)] = n
	}
	return out
}
