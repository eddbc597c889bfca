package zksession_test

import (
	"context"
	"testing"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/internal/testkit/sessiontest"
	"github.com/zkrecipes/zkrecipes/session"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// TestEnsureContainersMakesContainers: the directories EnsureContainers
// creates below the namespace are sent as createContainer requests, and
// are containers: the server reaps them once their last child is gone
// (it would keep persistent nodes).
func TestEnsureContainersMakesContainers(t *testing.T) {
	ns := zktest.NewNamespace(t)
	tap := zktest.NewTap()
	s := sessiontest.Connect(t, ns, session.WithDialer(tap.Dialer()))
	raw := ns.Conn(t)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	const opCreate, opCreateContainer = 1, 19
	before := tap.Requests()
	if err := sessiontest.Core(s).EnsureContainers(ctx, ns.Path("/dirs/a/b")); err != nil {
		t.Fatal(err)
	}
	after := tap.Requests()
	if n := after[opCreateContainer] - before[opCreateContainer]; n != 3 {
		t.Errorf("%d createContainer requests for 3 directories (%d plain creates)", n, after[opCreate]-before[opCreate])
	}
	leaf := ns.Path("/dirs/a/b/x")
	if _, err := raw.Create(leaf, nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	if err := raw.Delete(leaf, -1); err != nil {
		t.Fatal(err)
	}
	zktest.Eventually(t, wait, func() bool {
		ok, _, err := raw.Exists(ns.Path("/dirs"))
		return err == nil && !ok
	}, "the containers under %s were not reaped once empty", ns.Path("/dirs"))
}
