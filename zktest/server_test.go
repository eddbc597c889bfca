package zktest_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/zkrecipes/zkrecipes/zktest"
)

func TestStandaloneServes(t *testing.T) {
	ns := zktest.NewNamespace(t)
	if !strings.HasPrefix(ns.Root, "/zktest/TestStandaloneServes-") {
		t.Fatalf("root %q", ns.Root)
	}
	conn := ns.Conn(t)
	p := ns.Path("hello")
	if _, err := conn.Create(p, []byte("world"), 0, acl); err != nil {
		t.Fatalf("create: %v", err)
	}
	data, _, err := conn.Get(p)
	if err != nil || string(data) != "world" {
		t.Fatalf("get = %q, %v", data, err)
	}
	// Extended types are on: TTL nodes work.
	if _, err := conn.CreateTTL(ns.Path("ttl"), nil, zk.FlagTTL, acl, time.Minute); err != nil {
		t.Fatalf("create TTL: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := zktest.Srvr(ctx, ns.Server.Addr())
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode != "standalone" || st.NodeCount < 3 || !strings.HasPrefix(st.Version, "3.") || st.Connections < 1 || st.Zxid == 0 {
		t.Fatalf("srvr = %+v", st)
	}
	m, err := zktest.Mntr(ctx, ns.Server.Addr())
	if err != nil {
		t.Fatal(err)
	}
	if m["zk_server_state"] != "standalone" || !strings.HasPrefix(m["zk_version"], st.Version) {
		t.Fatalf("mntr zk_server_state = %q, zk_version = %q (srvr's version %q)", m["zk_server_state"], m["zk_version"], st.Version)
	}
}

func TestNamespaceRemovedAtCleanup(t *testing.T) {
	var root string
	t.Run("inner", func(t *testing.T) {
		ns := zktest.NewNamespace(t)
		root = ns.Root
		c := ns.Conn(t)
		for _, p := range []string{"a", "a/b", "a/b/c", "d"} {
			if _, err := c.Create(ns.Path(p), nil, 0, acl); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := c.Create(ns.Path("a/e"), nil, zk.FlagEphemeral, acl); err != nil {
			t.Fatal(err)
		}
	})
	if !strings.Contains(root, "TestNamespaceRemovedAtCleanup_inner-") {
		t.Fatalf("root %q", root)
	}
	ok, _, err := zktest.Conn(t, zktest.SharedServers(), 0).Exists(root)
	if err != nil || ok {
		t.Fatalf("namespace %s still there after cleanup (exists=%v, err=%v)", root, ok, err)
	}
}

func TestWatchNotifications(t *testing.T) {
	ns := zktest.NewNamespace(t)
	c := ns.Conn(t)
	p := ns.Path("w")
	if _, err := c.Create(p, nil, 0, acl); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var chans []<-chan zk.Event
	for i := 0; i < 3; i++ {
		w := zktest.Conn(t, ns.Servers(), 0)
		_, _, ch, err := w.GetW(p)
		if err != nil {
			t.Fatal(err)
		}
		chans = append(chans, ch)
	}
	before, err := zktest.WatchNotifications(ctx, ns.Server.Addr())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Set(p, []byte("x"), -1); err != nil {
		t.Fatal(err)
	}
	for _, ch := range chans {
		select {
		case <-ch:
		case <-ctx.Done():
			t.Fatal("watch did not fire")
		}
	}
	after, err := zktest.WatchNotifications(ctx, ns.Server.Addr())
	if err != nil {
		t.Fatal(err)
	}
	if after-before != 3 {
		t.Fatalf("watch notifications %d -> %d, want +3", before, after)
	}
}

func TestServerLifecycle(t *testing.T) {
	s := zktest.StartServerT(t, zktest.WithConfig("tickTime", "300"))
	addr, pid := s.Addr(), s.Pid()
	if pid == 0 || !s.Running() {
		t.Fatal("no pid")
	}
	// WithConfig's line comes after zktest's own and wins.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if conf, err := zktest.FourLetterWord(ctx, s.Addr(), "conf"); err != nil || !strings.Contains(conf, "tickTime=300\n") {
		t.Fatalf("conf = %q, %v; want tickTime=300", conf, err)
	}
	// The client reaches the server through a proxy that refuses it while
	// the server restarts: a standalone server accepts connections before it
	// has loaded its data and then neither answers nor closes them (its close
	// path throws a NullPointerException), and go-zookeeper waits 10 × ⅔ of
	// the session timeout in such a handshake. On a loaded machine a retry
	// lands in that window often enough to fail the test.
	px := zktest.NewProxyT(t, s.Addr())
	c := zktest.Conn(t, px.Servers(), 0)
	if _, err := c.Create("/keep", []byte("v"), 0, acl); err != nil {
		t.Fatal(err)
	}
	if err := s.Kill(); err != nil {
		t.Fatal(err)
	}
	if s.Pid() != 0 || s.Running() {
		t.Fatal("still running after Kill")
	}
	px.Refuse(true)
	if err := s.Restart(); err != nil { // returns once the server serves
		t.Fatal(err)
	}
	px.Refuse(false)
	if s.Addr() != addr || s.Pid() == 0 || s.Pid() == pid {
		t.Fatalf("restart: addr %s (was %s) pid %d (was %d)", s.Addr(), addr, s.Pid(), pid)
	}
	zktest.Eventually(t, 20*time.Second, func() bool {
		d, _, err := c.Get("/keep")
		return err == nil && string(d) == "v"
	}, "data lost across restart")
	if tail := s.LogTail(5); !strings.Contains(s.LogTail(1000), "### zktest: starting") || tail == "" {
		t.Fatalf("log tail %q", tail)
	}
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := s.Stop(); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
	if err := s.Restart(); err == nil {
		t.Fatal("Restart after Stop succeeded")
	}
}
