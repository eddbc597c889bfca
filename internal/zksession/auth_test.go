package zksession_test

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/zkrecipes/zkrecipes/internal/testkit/sessiontest"
	"github.com/zkrecipes/zkrecipes/session"
	"github.com/zkrecipes/zkrecipes/zktest"
	"go.uber.org/goleak"
)

// Digest credentials and ACLs: a session without the credentials gets NoAuth
// on protected nodes; the credentials survive a new session.
func TestDigestAuthSurvivesNewSession(t *testing.T) {
	ns := zktest.NewNamespace(t)
	acl := zk.DigestACL(zk.PermAll, "alice", "secret")
	s, tap := sessiontest.ConnectTap(t, ns, session.WithDigestAuth("alice", "secret"), session.WithACL(acl))
	rec := sessiontest.Record(t, s)
	ctx := ctxT(t, wait)
	dir, err := s.Path("/secure")
	if err != nil {
		t.Fatal(err)
	}
	if err := sessiontest.Core(s).EnsureContainers(ctx, dir); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { // the harness's own client could not remove protected nodes
		children, _, _ := s.Conn().Children(dir)
		for _, c := range children {
			_ = s.Conn().Delete(dir+"/"+c, -1)
		}
		_ = s.Conn().Delete(dir, -1)
	})
	if got, _, err := s.Conn().GetACL(dir); err != nil || len(got) != 1 || got[0].Scheme != "digest" {
		t.Fatalf("ACL of %s: %v %v", dir, got, err)
	}
	if _, _, err := sessiontest.Core(s).CreateEphemeral(ctx, sessiontest.Core(s).Epoch(), dir+"/a", nil, 0); err != nil {
		t.Fatal(err)
	}
	// A persistent child keeps the container from being reaped when the
	// session's ephemerals go.
	if _, err := s.Conn().Create(dir+"/keep", []byte("k"), 0, sessiontest.Core(s).ACL()); err != nil {
		t.Fatal(err)
	}

	other := sessiontest.Connect(t, ns)
	if _, _, err := other.Conn().Get(dir); !errors.Is(err, zk.ErrNoAuth) {
		t.Fatalf("Get without credentials: %v", err)
	}
	if _, _, err := sessiontest.Core(other).CreateEphemeral(ctx, sessiontest.Core(other).Epoch(), dir+"/b", nil, 0); !errors.Is(err, zk.ErrNoAuth) {
		t.Fatalf("CreateEphemeral without credentials: %v", err)
	}
	if err := sessiontest.Core(other).EnsureContainers(ctx, dir+"/sub"); !errors.Is(err, zk.ErrNoAuth) {
		t.Fatalf("EnsureContainers without credentials: %v", err)
	}
	if _, _, err := ns.Conn(t).Children(dir); !errors.Is(err, zk.ErrNoAuth) {
		t.Fatalf("raw Children without credentials: %v", err)
	}

	old := sessiontest.Core(s).Epoch()
	sessiontest.Expire(t, s, tap)
	rc := rec.Wait(t, wait, session.Reconnected)
	if rc.SessionID == old.SessionID() {
		t.Fatal("same session after expiry")
	}
	err = sessiontest.Core(s).Retry(ctx, rc.Epoch, func(c *zk.Conn) error {
		_, _, err := c.Get(dir + "/keep")
		return err
	})
	if err != nil {
		t.Fatalf("Get with credentials on the new session: %v", err)
	}
	if _, _, err := sessiontest.Core(s).CreateEphemeral(ctx, rc.Epoch, dir+"/c", nil, 0); err != nil {
		t.Fatalf("create on the new session: %v", err)
	}
	// EnsureContainers on an existing node below a parent we may not write to.
	if err := sessiontest.Core(other).EnsureContainers(ctx, dir); err != nil {
		t.Fatalf("EnsureContainers of an existing protected node: %v", err)
	}
}

// Each Session lives under its own namespace, created on demand: the
// namespace's nodes persistent, the recipe's parents containers.
func TestNamespaceIsolation(t *testing.T) {
	ns := zktest.NewNamespace(t)
	a := sessiontest.ConnectTo(t, ns.Servers(), ns.Root+"/a/deep")
	b := sessiontest.ConnectTo(t, ns.Servers(), ns.Root+"/b")
	ctx := ctxT(t, wait)
	if sessiontest.Core(a).Namespace() != ns.Root+"/a/deep" {
		t.Fatalf("Namespace() = %q", sessiontest.Core(a).Namespace())
	}
	for _, s := range []*session.Session{a, b} {
		dir, err := s.Path("/locks/x")
		if err != nil {
			t.Fatal(err)
		}
		if err := sessiontest.Core(s).EnsureContainers(ctx, dir); err != nil {
			t.Fatal(err)
		}
		if err := sessiontest.Core(s).EnsureContainers(ctx, dir); err != nil { // idempotent
			t.Fatal(err)
		}
		if _, _, err := sessiontest.Core(s).CreateEphemeral(ctx, sessiontest.Core(s).Epoch(), dir+"/n", nil, 0); err != nil {
			t.Fatal(err)
		}
	}
	bDir, _ := b.Path("/locks/x")
	if err := sessiontest.Core(a).EnsureContainers(ctx, bDir); !errors.Is(err, session.ErrBadArgument) {
		t.Fatalf("a's EnsureContainers on b's path: %v", err)
	}
	raw := ns.Conn(t)
	children, _, err := raw.Children(ns.Root)
	sort.Strings(children)
	if err != nil || fmt.Sprint(children) != "[a b]" {
		t.Fatalf("children of the root: %v %v", children, err)
	}
	owner := func(p string) int64 {
		_, st, err := raw.Get(p)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		return st.EphemeralOwner
	}
	for _, p := range []string{ns.Root + "/a", ns.Root + "/a/deep", ns.Root + "/b"} {
		if o := owner(p); o != 0 {
			t.Errorf("namespace node %s: ephemeralOwner 0x%x, want persistent", p, o)
		}
	}
	for _, p := range []string{ns.Root + "/a/deep/locks/x/n", ns.Root + "/b/locks/x/n"} {
		if o := owner(p); o == 0 {
			t.Errorf("%s missing its owner", p)
		}
	}
	// The parents below the namespace are containers: once empty, the server
	// reaps them (zktest checks every 500 ms); the namespace stays.
	if err := a.Conn().Delete(ns.Root+"/a/deep/locks/x/n", -1); err != nil {
		t.Fatal(err)
	}
	zktest.Eventually(t, wait, func() bool {
		ok, _, err := raw.Exists(ns.Root + "/a/deep/locks")
		return err == nil && !ok
	}, "containers not reaped")
	if ok, _, err := raw.Exists(ns.Root + "/a/deep"); err != nil || !ok {
		t.Fatalf("namespace node reaped: %v %v", ok, err)
	}
	// Created again on demand.
	dir, _ := a.Path("/locks/x")
	if err := sessiontest.Core(a).EnsureContainers(ctx, dir); err != nil {
		t.Fatal(err)
	}
}

// Close returns after every goroutine the Session started has exited,
// go-zookeeper's included, whatever was in flight.
func TestCloseJoinsGoroutines(t *testing.T) {
	ns := zktest.NewNamespace(t)
	ignore := goleak.IgnoreCurrent()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	s, err := session.Connect(ctx, ns.Servers(), session.WithNamespace(ns.Root), session.WithSessionTimeout(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	s.Subscribe() // never read, never closed
	s.Subscribe().Close()
	if err := sessiontest.Core(s).EnsureContainers(ctx, ns.Root+"/d"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := sessiontest.Core(s).CreateEphemeral(ctx, sessiontest.Core(s).Epoch(), ns.Root+"/d/n", nil, zk.FlagSequence); err != nil {
		t.Fatal(err)
	}
	_, _, watch, err := s.Conn().GetW(ns.Root + "/d")
	if err != nil {
		t.Fatal(err)
	}
	sessiontest.Core(s).GuaranteedDelete(sessiontest.Core(s).Epoch(), ns.Root+"/d/missing", -1)
	start := time.Now()
	s.Close()
	t.Logf("Close took %v", time.Since(start).Round(time.Millisecond))
	if ev := <-watch; ev.Type != zk.EventNotWatching {
		t.Fatalf("watch after close: %+v", ev)
	}
	if err := goleak.Find(ignore); err != nil {
		t.Fatal(err)
	}
}
