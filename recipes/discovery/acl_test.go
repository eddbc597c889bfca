package discovery_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/internal/testkit/sessiontest"
	"github.com/zkrecipes/zkrecipes/recipes/discovery"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// TestRefused: a base path whose ACL refuses the session stops a
// registration at once: Wait and Update return zk.ErrNoAuth naming the
// node, and no node is created. The queries say the same.
func TestRefused(t *testing.T) {
	ns := zktest.NewNamespace(t)
	raw := ns.Conn(t)
	if _, err := raw.Create(ns.Path("services"), nil, 0, zk.WorldACL(zk.PermRead)); err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Create(ns.Path("hidden"), nil, 0, zk.WorldACL(zk.PermCreate)); err != nil {
		t.Fatal(err)
	}
	s := sessiontest.Connect(t, ns)
	for _, typ := range []discovery.ServiceType{discovery.Dynamic, discovery.Static} {
		r, err := discovery.Register(s, base, discovery.Instance{Name: "svc", ID: "x", Type: typ})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(ctxT(t), wait)
		err = r.Wait(ctx)
		if !errors.Is(err, zk.ErrNoAuth) || !strings.Contains(err.Error(), "/services") {
			t.Fatalf("%v: Wait: %v, want zk.ErrNoAuth naming the node", typ, err)
		}
		if err := r.Update(ctx, r.Instance()); !errors.Is(err, zk.ErrNoAuth) {
			t.Fatalf("%v: Update after the registration stopped: %v, want zk.ErrNoAuth", typ, err)
		}
		cancel()
		r.Close()
	}
	if kids, _, err := raw.Children(ns.Path("services")); err != nil || len(kids) != 0 {
		t.Fatalf("under the refused base: %v %v", kids, err)
	}
	if _, err := discovery.Names(ctxT(t), s, "/hidden"); !errors.Is(err, zk.ErrNoAuth) {
		t.Fatalf("Names of an unreadable base: %v, want zk.ErrNoAuth", err)
	}
}

// TestTLS: registration, cache and queries over a TLS port.
func TestTLS(t *testing.T) {
	ns := sessiontest.NamespaceTLS(t)
	s := sessiontest.ConnectTLS(t, ns)
	c := newCache(t, s, "svc", discovery.WithEvents(false))
	r := register(t, s, discovery.Instance{Name: "svc", ID: "tls", Port: 443})
	zktest.Eventually(t, wait, func() bool { return len(c.Instances()) == 1 }, "the cache has the instance")
	list, err := discovery.Instances(ctxT(t), s, base, "svc")
	if err != nil || len(list) != 1 || !equalInstance(list[0], r.Instance()) {
		t.Fatalf("Instances over TLS: %+v %v", list, err)
	}
}
