package zktest_test

import (
	"context"
	"errors"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/zkrecipes/zkrecipes/zktest"
)

var acl = zk.WorldACL(zk.PermAll)

func TestProxyCutKeepsSession(t *testing.T) {
	ns := zktest.NewNamespace(t)
	px := ns.Proxy(t)
	rec := &recorder{}
	c := zktest.Conn(t, px.Servers(), 4*time.Second, zk.WithEventCallback(rec.cb))
	id := c.SessionID()
	if _, err := c.Create(ns.Path("e"), nil, zk.FlagEphemeral, acl); err != nil {
		t.Fatal(err)
	}
	m := rec.mark()
	px.Cut()
	zktest.Eventually(t, 15*time.Second, func() bool {
		return rec.seq(m, zk.StateDisconnected, zk.StateHasSession)
	}, "no Disconnected then HasSession after a cut: %v", rec.all())
	if got := c.SessionID(); got != id {
		t.Fatalf("session id changed across a cut: %x -> %x", id, got)
	}
	if rec.has(m, zk.StateExpired) {
		t.Fatalf("session expired across a short cut: %v", rec.all())
	}
	if _, _, err := c.Get(ns.Path("e")); err != nil {
		t.Fatalf("get after cut: %v", err)
	}
	if s := px.Sessions(); len(s) != 1 || s[0].ID != id || len(s[0].Password()) == 0 || s[0].Timeout() != 4*time.Second {
		t.Fatalf("proxy sessions = %+v, want one with id %x", s, id)
	}
}

func TestProxyPartitionExpiresSession(t *testing.T) {
	ns := zktest.NewNamespace(t)
	px := ns.Proxy(t)
	rec := &recorder{}
	victim := zktest.Conn(t, px.Servers(), time.Second, zk.WithEventCallback(rec.cb))
	observer := ns.Conn(t)
	id := victim.SessionID()
	p := ns.Path("eph")
	if _, err := victim.Create(p, nil, zk.FlagEphemeral, acl); err != nil {
		t.Fatal(err)
	}
	m := rec.mark()
	px.Partition()
	zktest.Eventually(t, 15*time.Second, func() bool {
		ok, _, err := observer.Exists(p)
		return err == nil && !ok
	}, "ephemeral %s survived a partition past the session timeout", p)
	// go-zookeeper notices silence after 2/3 of the timeout, before the
	// server expires the session; but its event reaches the callback on the
	// victim's goroutines, which a loaded machine may run after the observer
	// saw the node go. What matters is that it comes during the partition.
	zktest.Eventually(t, 15*time.Second, func() bool { return rec.has(m, zk.StateDisconnected) },
		"victim did not see Disconnected during the partition: %v", rec.all())
	px.Heal()
	zktest.Eventually(t, 15*time.Second, func() bool {
		return rec.seq(m, zk.StateExpired, zk.StateHasSession)
	}, "victim did not see Expired then a new session after heal: %v", rec.all())
	if victim.SessionID() == id {
		t.Fatalf("victim kept session %x after expiry", id)
	}
}

func TestProxyGhostNode(t *testing.T) {
	ns := zktest.NewNamespace(t)
	px := ns.Proxy(t)
	p := ns.Path("ghost")
	var swallowed atomic.Int32
	px.OnRequest(func(r zktest.Request) zktest.Action {
		if (r.Op == zktest.OpCreate || r.Op == zktest.OpCreate2) && r.Path == p && swallowed.Add(1) == 1 {
			return zktest.SwallowReply
		}
		return zktest.Forward
	})
	rec := &recorder{}
	c := zktest.Conn(t, px.Servers(), 4*time.Second, zk.WithEventCallback(rec.cb))
	id := c.SessionID()
	_, err := c.Create(p, []byte("x"), zk.FlagEphemeral, acl)
	if !errors.Is(err, zk.ErrConnectionClosed) {
		t.Fatalf("create with swallowed reply: err = %v, want %v", err, zk.ErrConnectionClosed)
	}
	observer := ns.Conn(t)
	ok, st, err := observer.Exists(p)
	if err != nil || !ok {
		t.Fatalf("ghost node missing: exists=%v err=%v", ok, err)
	}
	if st.EphemeralOwner != id {
		t.Fatalf("ghost node owner = %x, want the client's session %x", st.EphemeralOwner, id)
	}
	// The client comes back on the same session and can see its ghost.
	zktest.Eventually(t, 15*time.Second, func() bool {
		_, _, err := c.Get(p)
		return err == nil
	}, "client did not reconnect after the swallowed reply")
	if c.SessionID() != id {
		t.Fatalf("session changed: %x -> %x", id, c.SessionID())
	}
}

func TestProxyDropRequest(t *testing.T) {
	ns := zktest.NewNamespace(t)
	px := ns.Proxy(t)
	p := ns.Path("dropped")
	var dropped atomic.Int32
	px.OnRequest(func(r zktest.Request) zktest.Action {
		if r.Op == zktest.OpCreate && r.Path == p && dropped.Add(1) == 1 {
			return zktest.DropRequest
		}
		return zktest.Forward
	})
	c := zktest.Conn(t, px.Servers(), 4*time.Second)
	_, err := c.Create(p, nil, 0, acl)
	if !errors.Is(err, zk.ErrConnectionClosed) {
		t.Fatalf("create with dropped request: err = %v, want %v", err, zk.ErrConnectionClosed)
	}
	if ok, _, err := ns.Conn(t).Exists(p); err != nil || ok {
		t.Fatalf("dropped create happened: exists=%v err=%v", ok, err)
	}
	px.OnRequest(nil)
	zktest.Eventually(t, 15*time.Second, func() bool {
		_, err := c.Create(p, nil, 0, acl)
		return err == nil
	}, "create after the hook was removed failed")
}

func TestProxyRefuseAndLatency(t *testing.T) {
	ns := zktest.NewNamespace(t)
	px := ns.Proxy(t)
	rec := &recorder{}
	c := zktest.Conn(t, px.Servers(), 4*time.Second, zk.WithEventCallback(rec.cb))
	id := c.SessionID()

	m := rec.mark()
	px.Refuse(true)
	px.Cut()
	zktest.Eventually(t, 10*time.Second, func() bool { return rec.has(m, zk.StateDisconnected) }, "no Disconnected")
	// A refusing proxy closes new connections at once and holds none.
	zktest.Eventually(t, 10*time.Second, func() bool { return px.Conns() == 0 }, "cut connections linger")
	raw, err := net.Dial("tcp", px.Addr())
	if err != nil {
		t.Fatal(err)
	}
	_ = raw.SetDeadline(time.Now().Add(10 * time.Second))
	if n, err := raw.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("read from a refusing proxy: %d, %v; want EOF", n, err)
	}
	raw.Close()
	px.Refuse(false)
	zktest.Eventually(t, 15*time.Second, func() bool { return rec.seq(m, zk.StateDisconnected, zk.StateHasSession) },
		"no reconnect after Refuse(false): %v", rec.all())
	if c.SessionID() != id {
		t.Fatalf("session changed: %x -> %x", id, c.SessionID())
	}

	const d = 100 * time.Millisecond
	px.SetLatency(d)
	start := time.Now()
	if _, err := c.Create(ns.Path("slow"), nil, 0, acl); err != nil {
		t.Fatal(err)
	}
	// Request and reply are each delayed by d: a lower bound, not a timing race.
	if el := time.Since(start); el < 2*d {
		t.Fatalf("create through a %v proxy took %v, want >= %v", d, el, 2*d)
	}
	px.SetLatency(0)
}

func TestFourLetterWordsThroughProxy(t *testing.T) {
	ns := zktest.NewNamespace(t)
	px := ns.Proxy(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := zktest.Srvr(ctx, px.Addr())
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode != "standalone" {
		t.Fatalf("srvr through proxy: mode %q", st.Mode)
	}
}

func TestExpireSession(t *testing.T) {
	ns := zktest.NewNamespace(t)
	tap := zktest.NewTap()
	rec := &recorder{}
	victim := zktest.Conn(t, ns.Servers(), 10*time.Second, zk.WithDialer(tap.Dialer()), zk.WithEventCallback(rec.cb))
	p := ns.Path("victim")
	if _, err := victim.Create(p, nil, zk.FlagEphemeral, acl); err != nil {
		t.Fatal(err)
	}
	creds := lastSession(t, tap)
	if creds.ID != victim.SessionID() || len(creds.Password()) == 0 {
		t.Fatalf("tap creds = %+v; want session %x", creds, victim.SessionID())
	}
	observer := ns.Conn(t)
	_, _, w, err := observer.ExistsW(p)
	if err != nil {
		t.Fatal(err)
	}
	m := rec.mark()
	start := time.Now()
	expire(t, ns.Servers(), creds)
	// The server deletes the ephemeral as it closes the session, before
	// ExpireSession returns: the bound only has to tell that from the 10 s
	// session timeout running out, with room for a loaded machine.
	const bound = 5 * time.Second
	select {
	case ev := <-w:
		if ev.Type != zk.EventNodeDeleted {
			t.Fatalf("watch event %v, want NodeDeleted", ev)
		}
		t.Logf("ephemeral deleted %v after ExpireSession began (session timeout 10s)", time.Since(start).Round(time.Millisecond))
	case <-time.After(bound):
		t.Fatalf("victim's ephemeral still there %v after ExpireSession (session timeout 10s)", bound)
	}
	zktest.Eventually(t, 15*time.Second, func() bool { return rec.seq(m, zk.StateExpired, zk.StateHasSession) },
		"victim never learned of the expiry: %v", rec.all())
	// Expiring a session that is gone is not an error.
	expire(t, ns.Servers(), creds)
}
