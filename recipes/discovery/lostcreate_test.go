package discovery_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/internal/testkit/sessiontest"
	"github.com/zkrecipes/zkrecipes/recipes/discovery"
	"github.com/zkrecipes/zkrecipes/session"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// TestLostCreateThenClose: a Static instance's create that the server
// applies but whose answer is lost (the proxy swallows it and then refuses
// the connection), and Close before the registration could look again: the
// node it may have created does not outlive the Registration once the
// connection is back.
func TestLostCreateThenClose(t *testing.T) {
	ns := zktest.NewNamespace(t)
	raw := ns.Conn(t)
	s, p := sessiontest.ConnectProxy(t, ns, session.WithSessionTimeout(10*time.Second))
	// The parents first, so that the instance's create is the one hooked.
	register(t, s, discovery.Instance{Name: "svc", ID: "other", Type: discovery.Static})
	full := ns.Path("services/svc/lost")
	var hit atomic.Int32
	p.OnRequest(func(r zktest.Request) zktest.Action {
		if (r.Op == zktest.OpCreate || r.Op == zktest.OpCreate2) && r.Path == full && hit.Add(1) == 1 {
			p.Refuse(true) // no connection until Close: the registration cannot look again
			return zktest.SwallowReply
		}
		return zktest.Forward
	})
	defer p.Heal()
	states := sessiontest.Record(t, s)
	r, err := discovery.Register(s, base, discovery.Instance{Name: "svc", ID: "lost", Type: discovery.Static})
	if err != nil {
		t.Fatal(err)
	}
	zktest.Eventually(t, wait, func() bool { _, ok := exists(t, raw, full); return ok }, "the create applied")
	states.Wait(t, wait, session.Suspended)
	r.Close()
	p.OnRequest(nil)
	p.Refuse(false)
	states.Wait(t, wait, session.Reconnected)
	zktest.Eventually(t, wait, func() bool { _, ok := exists(t, raw, full); return !ok },
		"the node of the create whose answer was lost deleted")
}

// TestCloseAfterSessionClosed: a Registration closed after its session
// leaves a Static node on the server (nothing can delete it any more), as
// Close says, and returns at once.
func TestCloseAfterSessionClosed(t *testing.T) {
	ns := zktest.NewNamespace(t)
	raw := ns.Conn(t)
	s := sessiontest.Connect(t, ns)
	r := register(t, s, discovery.Instance{Name: "svc", ID: "stays", Type: discovery.Static})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	r.Close()
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("Close after the session's took %v", d)
	}
	if _, ok := exists(t, raw, ns.Path("services/svc/stays")); !ok {
		t.Fatal("the Static node is gone, though its session was closed before the Registration")
	}
}
