package zktest_test

import (
	"context"
	"errors"
	"net"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/zktest"
)

// refuses reports whether a connection to addr is refused (nothing listens
// there).
func refuses(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err == nil {
		c.Close()
	}
	return errors.Is(err, syscall.ECONNREFUSED)
}

// host returns addr's host.
func host(t *testing.T, addr string) string {
	t.Helper()
	h, _, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// get reads path through a new connection to servers, after a sync.
func get(t *testing.T, servers []string, path string) string {
	t.Helper()
	c := zktest.Conn(t, servers, 4*time.Second)
	defer c.Close()
	if _, err := c.Sync(path); err != nil {
		t.Fatalf("sync %s through %v: %v", path, servers, err)
	}
	data, _, err := c.Get(path)
	if err != nil {
		t.Fatalf("get %s through %v: %v", path, servers, err)
	}
	return string(data)
}

// A standalone server that moves keeps its data and its port, answers on
// its new address only, and restarts there.
func TestServerMove(t *testing.T) {
	s := zktest.StartServerT(t)
	old := s.Addr()
	if h := host(t, old); !net.ParseIP(h).IsLoopback() {
		t.Fatalf("address %s is not a loopback address", old)
	}
	c := zktest.Conn(t, s.Servers(), 4*time.Second)
	if _, err := c.Create("/moved", []byte("v"), 0, acl); err != nil {
		t.Fatal(err)
	}
	c.Close()

	start := time.Now()
	addr, err := s.Move()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("moved %s -> %s in %v", old, addr, time.Since(start))
	if addr != s.Addr() || addr == old {
		t.Fatalf("Move = %s, Addr %s, was %s", addr, s.Addr(), old)
	}
	if host(t, old) != "127.0.0.1" { // the system has loopback addresses to spare
		if host(t, addr) == host(t, old) || !strings.HasSuffix(addr, old[strings.LastIndex(old, ":"):]) {
			t.Fatalf("moved from %s to %s: want a new host and the same port", old, addr)
		}
	}
	if !refuses(old) {
		t.Fatalf("the old address %s still accepts connections", old)
	}
	if d := get(t, s.Servers(), "/moved"); d != "v" {
		t.Fatalf("after the move /moved = %q", d)
	}
	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	if s.Addr() != addr {
		t.Fatalf("Restart moved the server from %s to %s", addr, s.Addr())
	}
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Move(); err == nil {
		t.Fatal("Move after Stop succeeded")
	}
}

// Every member of an ensemble moves in turn; the ensemble keeps its quorum
// and its data, and each old address refuses connections.
func TestEnsembleMembersMove(t *testing.T) {
	e := zktest.StartEnsembleT(t, 3)
	first := e.Servers()
	hosts := map[string]bool{}
	for _, a := range first {
		hosts[host(t, a)] = true
	}
	if len(hosts) != 3 && !hosts["127.0.0.1"] {
		t.Fatalf("members share client hosts: %v", first)
	}
	c := zktest.Conn(t, e.Servers(), 4*time.Second)
	if _, err := c.Create("/ens", []byte("0"), 0, acl); err != nil {
		t.Fatal(err)
	}
	c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for i := range first {
		start := time.Now()
		addr, err := e.Member(i).Move()
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("member %d moved %s -> %s in %v", i+1, first[i], addr, time.Since(start))
		if e.Servers()[i] != addr {
			t.Fatalf("Servers() = %v after member %d moved to %s", e.Servers(), i+1, addr)
		}
		if !refuses(first[i]) {
			t.Fatalf("the old address %s still accepts connections", first[i])
		}
		if err := e.WaitReady(ctx); err != nil {
			t.Fatal(err)
		}
		// Writes go through the moved member: the quorum is whole.
		w := zktest.Conn(t, []string{addr}, 4*time.Second)
		if _, err := w.Set("/ens", []byte{byte('1' + i)}, -1); err != nil {
			t.Fatalf("write through moved member %d: %v", i+1, err)
		}
		w.Close()
	}
	for i, a := range e.Servers() {
		if d := get(t, []string{a}, "/ens"); d != "3" {
			t.Fatalf("member %d reads /ens = %q, want 3", i+1, d)
		}
	}
	if _, err := e.Reconfig(ctx, 1); !errors.Is(err, zktest.ErrBadArgument) {
		t.Fatalf("Reconfig on an ensemble without reconfigEnabled = %v", err)
	}
}

// A reconfig-enabled ensemble announces its members' client addresses, and
// Reconfig replaces all three original members, one at a time, keeping the
// data.
func TestReconfigReplacesMembers(t *testing.T) {
	e := zktest.StartEnsembleT(t, 3, zktest.WithConfig("reconfigEnabled", "true"))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	announced := func(servers []string) []string {
		t.Helper()
		c := zktest.Conn(t, servers, 4*time.Second)
		defer c.Close()
		if _, err := c.Sync("/zookeeper/config"); err != nil {
			t.Fatal(err)
		}
		data, _, err := c.Get("/zookeeper/config")
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, l := range strings.Split(string(data), "\n") {
			if _, client, ok := strings.Cut(l, ";"); ok && strings.HasPrefix(l, "server.") {
				out = append(out, client)
			}
		}
		slices.Sort(out)
		return out
	}
	sorted := func(s []string) []string { s = slices.Clone(s); slices.Sort(s); return s }
	original := e.Servers()
	if got := announced(original); !slices.Equal(got, sorted(original)) {
		t.Fatalf("/zookeeper/config announces %v, want %v", got, original)
	}
	if _, err := e.Member(0).Move(); err == nil {
		t.Fatal("Move of a member of a reconfig-enabled ensemble succeeded")
	}
	c := zktest.Conn(t, original, 4*time.Second)
	if _, err := c.Create("/reconf", []byte("0"), 0, acl); err != nil {
		t.Fatal(err)
	}
	c.Close()

	old0 := e.Member(0) // not a member once replaced
	for i := 0; i < 3; i++ {
		old := e.Member(0)
		start := time.Now()
		added, err := e.Reconfig(ctx, 1, old)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("replaced %s by %s in %v", old, added[0], time.Since(start))
		if len(added) != 1 || e.Member(2) != added[0] || len(e.Servers()) != 3 || slices.Contains(e.Servers(), old.Addr()) {
			t.Fatalf("after replacing %s: added %v, members %v", old, added, e.Servers())
		}
		if !refuses(old.Addr()) {
			t.Fatalf("the removed member %s still accepts connections", old)
		}
		w := zktest.Conn(t, added[0].Servers(), 4*time.Second)
		if _, err := w.Set("/reconf", []byte{byte('1' + i)}, -1); err != nil {
			t.Fatalf("write through new member %s: %v", added[0], err)
		}
		w.Close()
	}
	final := e.Servers()
	for _, a := range final {
		if slices.Contains(original, a) {
			t.Fatalf("an original member is still in %v", final)
		}
		if d := get(t, []string{a}, "/reconf"); d != "3" {
			t.Fatalf("%s reads /reconf = %q, want 3", a, d)
		}
	}
	if got := announced(final); !slices.Equal(got, sorted(final)) {
		t.Fatalf("/zookeeper/config announces %v, want %v", got, final)
	}
	if _, err := e.Leader(); err != nil {
		t.Fatal(err)
	}
	for _, bad := range [][]*zktest.Server{nil, {old0}, {e.Member(0), e.Member(1), e.Member(2)}} {
		if _, err := e.Reconfig(ctx, 0, bad...); !errors.Is(err, zktest.ErrBadArgument) {
			t.Fatalf("Reconfig(ctx, 0, %v) = %v, want ErrBadArgument", bad, err)
		}
	}
	if err := e.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Reconfig(ctx, 1); err == nil {
		t.Fatal("Reconfig after Stop succeeded")
	}
}
