package zksession_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/zkrecipes/zkrecipes/internal/testkit/sessiontest"
	"github.com/zkrecipes/zkrecipes/session"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// A guaranteed delete queued while the connection is down happens once the
// same session is back.
func TestGuaranteedDeleteAcrossDisconnect(t *testing.T) {
	ns := zktest.NewNamespace(t)
	p := ns.Proxy(t)
	logOpt, logs := observed(t)
	s := sessiontest.ConnectTo(t, times3(p.Addr()), ns.Root, session.WithSessionTimeout(4*time.Second), logOpt)
	rec := sessiontest.Record(t, s)
	raw := ns.Conn(t)
	ctx := ctxT(t, wait)
	ep := sessiontest.Core(s).Epoch()
	node, _, err := sessiontest.Core(s).CreateEphemeral(ctx, ep, ns.Root+"/n", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	p.Partition()
	rec.Wait(t, wait, session.Suspended)
	sessiontest.Core(s).GuaranteedDelete(ep, node, -1)
	if ok, _, err := raw.Exists(node); err != nil || !ok {
		t.Fatalf("node gone while partitioned: %v %v", ok, err)
	}
	p.Heal()
	rc := rec.Wait(t, wait, session.Reconnected)
	if rc.Epoch != ep {
		t.Fatalf("new epoch %v", rc.Epoch)
	}
	zktest.Eventually(t, wait, func() bool {
		ok, _, err := raw.Exists(node)
		return err == nil && !ok
	}, "node not deleted after reconnect")
	zktest.Eventually(t, wait, func() bool { return logged(logs, "guaranteed delete done", "path", node) },
		"no log of the delete")
}

// A guaranteed delete for a session that has expired finishes once the
// session has been replaced: the server removed the session's ephemerals
// itself.
func TestGuaranteedDeleteFinishesOnNewSession(t *testing.T) {
	ns := zktest.NewNamespace(t)
	p := ns.Proxy(t)
	tap := zktest.NewTap()
	logOpt, logs := observed(t)
	s := sessiontest.ConnectTo(t, times3(p.Addr()), ns.Root, session.WithDialer(tap.Dialer()), logOpt)
	rec := sessiontest.Record(t, s)
	raw := ns.Conn(t)
	ctx := ctxT(t, wait)
	ep := sessiontest.Core(s).Epoch()
	node, _, err := sessiontest.Core(s).CreateEphemeral(ctx, ep, ns.Root+"/n", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	p.Partition()
	rec.Wait(t, wait, session.Suspended)
	done := sessiontest.Core(s).GuaranteedDelete(ep, node, -1)
	sessiontest.Expire(t, s, tap, ns.Servers()...)
	p.Heal()
	rec.Wait(t, wait, session.Lost)
	rc := rec.Wait(t, wait, session.Reconnected)
	if rc.SessionID == ep.SessionID() {
		t.Fatal("same session after expiry")
	}
	select {
	case <-done:
	case <-time.After(wait):
		t.Fatal("the delete of an expired session's node did not finish")
	}
	if logged(logs, "deleted a node of a session this client had left, before the server expired that session", "path", node) {
		t.Fatal("deleted a node the server had already removed")
	}
	if ok, _, err := raw.Exists(node); err != nil || ok {
		t.Fatalf("node of the expired session: %v %v", ok, err)
	}
}

// Close lets the queue drain before it closes the connection.
func TestCloseDrainsGuaranteedDeletes(t *testing.T) {
	ns := zktest.NewNamespace(t)
	s := sessiontest.Connect(t, ns)
	raw := ns.Conn(t)
	var nodes []string
	for i := 0; i < 5; i++ {
		// Persistent nodes: only the queue can remove them.
		p, err := raw.Create(fmt.Sprintf("%s/p%d", ns.Root, i), nil, 0, zk.WorldACL(zk.PermAll))
		if err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, p)
		sessiontest.Core(s).GuaranteedDelete(sessiontest.Core(s).Epoch(), p, -1)
	}
	s.Close()
	for _, p := range nodes {
		if ok, _, err := raw.Exists(p); err != nil || ok {
			t.Fatalf("%s after Close: %v %v", p, ok, err)
		}
	}
	sessiontest.Core(s).GuaranteedDelete(sessiontest.Core(s).Epoch(), nodes[0], -1) // after Close: dropped, no panic
}

// The local timer declares Lost; then the SAME session comes back (a
// standalone server restart revives its sessions). The next Reconnected is a
// new epoch; the old epoch's nodes still exist under the same session id and
// a guaranteed delete for the old epoch still removes them.
func TestSameSessionAfterLocalLost(t *testing.T) {
	srv := zktest.StartServerT(t)
	// The client reaches the server through a proxy that refuses it while
	// the server restarts: a standalone server accepts connections before it
	// has loaded its data and then neither answers nor closes them (its close
	// path throws a NullPointerException), and go-zookeeper waits 10 × ⅔ of
	// the session timeout in such a handshake. On a loaded machine a retry
	// lands in that window often enough to fail the test.
	px := zktest.NewProxyT(t, srv.Addr())
	s := sessiontest.ConnectTo(t, px.Servers(), "", session.WithSessionTimeout(4*time.Second))
	rec := sessiontest.Record(t, s)
	ctx := ctxT(t, wait)
	ep := sessiontest.Core(s).Epoch()
	lease := sessiontest.Core(s).LeaseContext()
	node, _, err := sessiontest.Core(s).CreateEphemeral(ctx, ep, "/old", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Kill(); err != nil {
		t.Fatal(err)
	}
	rec.Wait(t, wait, session.Suspended)
	lost := rec.Wait(t, wait, session.Lost)
	if lost.Epoch != ep || !errors.Is(ep.Err(), session.ErrLost) {
		t.Fatalf("Lost %v %v", lost.Epoch, ep.Err())
	}
	sessiontest.Core(s).GuaranteedDelete(ep, node, -1)
	px.Refuse(true)
	if err := srv.Restart(); err != nil { // returns once the server serves
		t.Fatal(err)
	}
	px.Refuse(false)
	rc := rec.Wait(t, wait, session.Reconnected)
	if rc.SessionID != ep.SessionID() {
		// A standalone restart keeps sessions (HAZARDS): a new id means the
		// case under test did not happen, which is a failure, not a skip.
		t.Fatalf("the server did not revive session 0x%x (got 0x%x)", ep.SessionID(), rc.SessionID)
	}
	if rc.Epoch == ep || rc.Epoch.Seq() != 2 || ep.Err() == nil || rc.Epoch.Err() != nil {
		t.Fatalf("same session back: epoch %v (old %v, err %v)", rc.Epoch, ep, ep.Err())
	}
	if !errors.Is(context.Cause(lease), session.ErrSuspended) {
		t.Fatalf("old lease %v", context.Cause(lease))
	}
	if err := sessiontest.Core(s).Retry(ctx, ep, func(*zk.Conn) error { return nil }); !errors.Is(err, session.ErrLost) {
		t.Fatalf("Retry on the old epoch: %v", err)
	}
	zktest.Eventually(t, wait, func() bool {
		ok, _, err := s.Conn().Exists(node)
		return err == nil && !ok
	}, "the old epoch's node was not deleted")
	t.Logf("states %v; epochs %v -> %v", rec.States(), ep, rc.Epoch)
}

// A create that finishes after its caller gave up is undone.
//
// The caller gives up while the create is held in the proxy, and the proxy
// relays it only once CreateEphemeral has returned: so its reply comes after
// the caller has gone, whatever the scheduling. (Holding it only until the
// caller's deadline was not enough: a caller that runs late on a loaded
// machine may find the reply already in when it wakes, and CreateEphemeral
// then returns the node, as documented, instead of undoing it.)
func TestAbandonedCreateUndone(t *testing.T) {
	ns := zktest.NewNamespace(t)
	p := ns.Proxy(t)
	logOpt, logs := observed(t)
	s := sessiontest.ConnectTo(t, p.Servers(), ns.Root, session.WithSessionTimeout(4*time.Second), logOpt)
	raw := ns.Conn(t)
	// wait is only a sanity bound: the caller gives up (cancel) as soon as
	// the proxy has the create.
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	var held atomic.Bool
	gaveUp := make(chan struct{})
	p.OnRequest(func(r zktest.Request) zktest.Action {
		if r.Op == zktest.OpCreate && r.Path == ns.Root+"/late" && !held.Swap(true) {
			cancel()
			<-gaveUp // blocks only this connection's client-to-server relay, until the caller has returned
		}
		return zktest.Forward
	})
	_, _, err := sessiontest.Core(s).CreateEphemeral(ctx, sessiontest.Core(s).Epoch(), ns.Root+"/late", nil, 0)
	close(gaveUp)
	if !held.Load() {
		t.Fatalf("the create did not reach the proxy within %v: err = %v", wait, err)
	}
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled (the reply could not come before the caller gave up)", err)
	}
	zktest.Eventually(t, wait, func() bool {
		return logged(logs, "create finished after the caller gave up; node deleted", "node", ns.Root+"/late")
	}, "late create not undone")
	if ok, _, err := raw.Exists(ns.Root + "/late"); err != nil || ok {
		t.Fatalf("stray node: %v %v", ok, err)
	}
}
