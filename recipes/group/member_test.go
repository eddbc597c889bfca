package group_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/internal/testkit/sessiontest"
	"github.com/zkrecipes/zkrecipes/recipes/group"
	"github.com/zkrecipes/zkrecipes/session"
	"github.com/zkrecipes/zkrecipes/zktest"
)

const groupPath = "/groups/workers"

// converged waits until every member's view equals the server's children
// and their data, and that view has the given ids.
func converged(t *testing.T, raw *zk.Conn, ns *zktest.Namespace, ms []*group.Member, want ...string) map[string]string {
	t.Helper()
	var server map[string]string
	zktest.Eventually(t, wait, func() bool {
		server = serverView(t, raw, ns.Path(groupPath))
		if fmt.Sprint(ids(server)) != fmt.Sprint(want) {
			return false
		}
		for _, m := range ms {
			if !sameView(text(m.Members()), server) {
				return false
			}
		}
		return true
	}, "views converge to the server's children %v", want)
	return server
}

// TestMembersConverge: several members, each on its own session, see the
// same group as the server: joins, data changes, a leave, and a child
// created by someone else (every child is a member, as in Curator).
func TestMembersConverge(t *testing.T) {
	ns := zktest.NewNamespace(t)
	raw := ns.Conn(t)
	var ms []*group.Member
	for i := 0; i < 4; i++ {
		s := sessiontest.Connect(t, ns)
		m := startMember(t, s, groupPath, fmt.Sprintf("w%d", i), fmt.Sprintf("data-%d", i))
		ms = append(ms, m)
	}
	for _, m := range ms {
		waitFor(t, "Wait", m.Wait)
	}
	server := converged(t, raw, ns, ms, "w0", "w1", "w2", "w3")
	if server["w2"] != "data-2" {
		t.Fatalf("server data of w2 = %q", server["w2"])
	}

	waitFor(t, "SetData", func(ctx context.Context) error { return ms[1].SetData(ctx, []byte("busy")) })
	server = converged(t, raw, ns, ms, "w0", "w1", "w2", "w3")
	if server["w1"] != "busy" {
		t.Fatalf("server data of w1 = %q, want busy", server["w1"])
	}

	if err := ms[3].Close(); err != nil {
		t.Fatal(err)
	}
	converged(t, raw, ns, ms[:3], "w0", "w1", "w2")

	if _, err := raw.Create(ns.Path(groupPath+"/outsider"), []byte("x"), zk.FlagEphemeral, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	converged(t, raw, ns, ms[:3], "outsider", "w0", "w1", "w2")
	if err := raw.Delete(ns.Path(groupPath+"/outsider"), -1); err != nil {
		t.Fatal(err)
	}
	converged(t, raw, ns, ms[:3], "w0", "w1", "w2")
}

// TestMemberChanges: Changes delivers the view once loaded, then each
// change; it is closed when its ctx ends, and at Close.
func TestMemberChanges(t *testing.T) {
	ns := zktest.NewNamespace(t)
	a := startMember(t, sessiontest.Connect(t, ns), groupPath, "a", "da")
	ctx, cancel := context.WithCancel(ctxT(t))
	defer cancel()
	ch := a.Changes(ctx)
	untilView := func(c <-chan map[string][]byte, want map[string]string) {
		t.Helper()
		deadline := time.NewTimer(wait)
		defer deadline.Stop()
		var last map[string][]byte
		for {
			select {
			case v, ok := <-c:
				if !ok {
					t.Fatalf("Changes closed; last view %v, want %v", text(last), want)
				}
				last = v
				if sameView(text(v), want) {
					return
				}
			case <-deadline.C:
				t.Fatalf("no view %v within %v; last %v", want, wait, text(last))
			}
		}
	}
	untilView(ch, map[string]string{"a": "da"})
	b := startMember(t, sessiontest.Connect(t, ns), groupPath, "b", "db")
	untilView(ch, map[string]string{"a": "da", "b": "db"})
	waitFor(t, "SetData", func(ctx context.Context) error { return b.SetData(ctx, []byte("db2")) })
	untilView(ch, map[string]string{"a": "da", "b": "db2"})
	// A second channel starts with the current view.
	ch2 := a.Changes(ctxT(t))
	untilView(ch2, map[string]string{"a": "da", "b": "db2"})
	b.Close()
	untilView(ch, map[string]string{"a": "da"})

	cancel()
	closedWithin(t, ch, "Changes after its ctx ended")
	a.Close()
	closedWithin(t, ch2, "Changes after Close")
	if _, ok := <-a.Changes(ctxT(t)); ok {
		t.Fatal("Changes after Close delivered a view, want a closed channel")
	}
}

// TestMemberBackAfterExpiry: a member's session expires; its node is back
// on the new session within backBound of Reconnected, and the other
// members' views converge with it in.
func TestMemberBackAfterExpiry(t *testing.T) {
	ns := zktest.NewNamespace(t)
	raw := ns.Conn(t)
	a := startMember(t, sessiontest.Connect(t, ns), groupPath, "a", "da")
	s, p, tap := sessiontest.ConnectProxyTap(t, ns)
	b := startMember(t, s, groupPath, "b", "db")
	waitFor(t, "Wait", a.Wait)
	waitFor(t, "Wait", b.Wait)
	converged(t, raw, ns, []*group.Member{a, b}, "a", "b")
	rec := sessiontest.Record(t, s)
	old := s.SessionID()
	sessiontest.Expire(t, s, tap, ns.Servers()...)
	p.Cut()
	rec.Wait(t, wait, session.Lost)
	ev := rec.Wait(t, wait, session.Reconnected)
	if ev.SessionID == old {
		t.Fatalf("reconnected to the expired session")
	}
	zktest.Eventually(t, time.Until(ev.At.Add(backBound)), func() bool {
		_, st, ok := stat(t, raw, ns.Path(groupPath+"/b"))
		return ok && st.EphemeralOwner == ev.SessionID
	}, "b's node back on the new session within %v of Reconnected", backBound)
	converged(t, raw, ns, []*group.Member{a, b}, "a", "b")
}

// TestMemberCloseWhileJoining: Close while the connection is partitioned
// and the member is joining: Close returns promptly, Wait returns
// session.ErrClosed, Changes channels close, nothing is left on the server.
func TestMemberCloseWhileJoining(t *testing.T) {
	ns := zktest.NewNamespace(t)
	raw := ns.Conn(t)
	s, p := sessiontest.ConnectProxy(t, ns, session.WithSessionTimeout(10*time.Second))
	p.Partition()
	m, err := group.NewMember(s, groupPath, "m", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Start(); err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t)
	ch := m.Changes(ctx)
	errs := make(chan error, 1)
	go func() { errs <- m.Wait(ctx) }()
	// The group has never been read: the view holds only this member.
	if v := text(m.Members()); !sameView(v, map[string]string{"m": ""}) {
		t.Fatalf("Members before the first read: %v, want only m", v)
	}
	start := time.Now()
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > cleanupBound {
		t.Fatalf("Close took %v, want at most %v", d, cleanupBound)
	}
	if err := sessiontest.Recv(t, errs, wait, "Wait returns"); !errorsIs(err, session.ErrClosed) {
		t.Fatalf("Wait: %v, want session.ErrClosed", err)
	}
	closedWithin(t, ch, "Changes after Close")
	rec := sessiontest.Record(t, s)
	p.Heal()
	rec.Wait(t, wait, session.Reconnected)
	if v := serverView(t, raw, ns.Path(groupPath)); len(v) != 0 {
		t.Fatalf("members left on the server: %v", v)
	}
}

// TestMemberViewAcrossPartition: while a member's connection is down its
// view is the last one read; after the reconnect it catches up with what
// changed meanwhile.
func TestMemberViewAcrossPartition(t *testing.T) {
	ns := zktest.NewNamespace(t)
	raw := ns.Conn(t)
	s, p := sessiontest.ConnectProxy(t, ns, session.WithSessionTimeout(10*time.Second))
	a := startMember(t, s, groupPath, "a", "da")
	b := startMember(t, sessiontest.Connect(t, ns), groupPath, "b", "db")
	waitFor(t, "Wait", a.Wait)
	waitFor(t, "Wait", b.Wait)
	before := converged(t, raw, ns, []*group.Member{a, b}, "a", "b")
	rec := sessiontest.Record(t, s)
	p.Partition()
	rec.Wait(t, wait, session.Suspended)
	if _, err := raw.Create(ns.Path(groupPath+"/c"), []byte("dc"), zk.FlagEphemeral, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	zktest.Eventually(t, wait, func() bool { return len(b.Members()) == 3 }, "b sees c")
	if v := text(a.Members()); !sameView(v, before) {
		t.Fatalf("a's view while disconnected: %v, want the last one read, %v", v, before)
	}
	p.Heal()
	rec.Wait(t, wait, session.Reconnected)
	converged(t, raw, ns, []*group.Member{a, b}, "a", "b", "c")
}

// TestMemberWatchCost: a member holds one child watch on the group path and
// one data watch per member (its own node's shared with its Node), in the
// client and on the server, and nothing else.
func TestMemberWatchCost(t *testing.T) {
	ns := zktest.NewNamespace(t)
	raw := ns.Conn(t)
	s, tap := sessiontest.ConnectTap(t, ns)
	a := startMember(t, s, groupPath, "a", "da")
	var ms = []*group.Member{a}
	for _, id := range []string{"b", "c"} {
		ms = append(ms, startMember(t, sessiontest.Connect(t, ns), groupPath, id, "d"+id))
	}
	converged(t, raw, ns, ms, "a", "b", "c")
	dir := ns.Path(groupPath)
	client := map[string]int{dir: 1, dir + "/a": 1, dir + "/b": 1, dir + "/c": 1}
	server := map[string]bool{dir + "/a": true, dir + "/b": true, dir + "/c": true}
	var gotClient map[string]int
	var gotServer map[string]bool
	zktest.Eventually(t, wait, func() bool {
		if _, err := tap.Notifications(); err != nil {
			t.Fatal(err)
		}
		gotClient = tap.Watches()
		// wchc lists the server's data watches only.
		gotServer = sessiontest.Watches(t, ns.Server.Addr(), s.SessionID())
		return fmt.Sprint(gotClient) == fmt.Sprint(client) && fmt.Sprint(gotServer) == fmt.Sprint(server)
	}, "watches of a's session: want %v in the client and data watches %v on the server", client, server)

	// A data change costs a's session one read of the member that changed
	// (two when the event reaches the session's shared watch just as the
	// read is sent: the registry then reads again with a watch of its own);
	// a join, one listing and one read per member (now n = 4).
	cost := func(what string, change func(), seen func() bool, want ...map[int32]int64) {
		t.Helper()
		before := tap.Requests()
		change()
		zktest.Eventually(t, wait, seen, "a sees %s", what)
		after := tap.Requests()
		for op := range after {
			after[op] -= before[op]
			if after[op] == 0 {
				delete(after, op)
			}
		}
		for _, w := range want {
			if fmt.Sprint(after) == fmt.Sprint(w) {
				return
			}
		}
		t.Fatalf("requests of a's session for %s: %v, want one of %v (getChildren2 is %d, getData %d)",
			what, after, want, zktest.OpGetChildren2, zktest.OpGetData)
	}
	cost("b's data change", func() {
		waitFor(t, "SetData", func(ctx context.Context) error { return ms[1].SetData(ctx, []byte("changed")) })
	}, func() bool { return string(a.Members()["b"]) == "changed" },
		map[int32]int64{zktest.OpGetData: 1}, map[int32]int64{zktest.OpGetData: 2})
	cost("d joining", func() {
		startMember(t, sessiontest.Connect(t, ns), groupPath, "d", "dd")
	}, func() bool { return len(a.Members()) == 4 }, map[int32]int64{zktest.OpGetChildren2: 1, zktest.OpGetData: 4})
}

// TestMemberSessionClosed: closing the member's session closes its Changes
// channels and makes Wait return session.ErrClosed; Start twice and after
// Close fail.
func TestMemberSessionClosed(t *testing.T) {
	ns := zktest.NewNamespace(t)
	s := sessiontest.Connect(t, ns)
	m := startMember(t, s, groupPath, "a", "da")
	waitFor(t, "Wait", m.Wait)
	if err := m.Start(); !errorsIs(err, group.ErrStarted) {
		t.Fatalf("second Start: %v, want ErrStarted", err)
	}
	ch := m.Changes(ctxT(t))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	closedWithin(t, ch, "Changes after the session closed")
	zktest.Eventually(t, wait, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		return errorsIs(m.Wait(ctx), session.ErrClosed)
	}, "Wait returns session.ErrClosed")
	m.Close()
	if err := m.Start(); !errorsIs(err, session.ErrClosed) {
		t.Fatalf("Start after Close: %v, want session.ErrClosed", err)
	}
}

// TestMembersConvergeUnderChurn: five members, each on its own session
// through its own proxy, while members change their data, connections are
// cut, members leave and join again, and a third party adds and removes a
// child: at the end every view equals the server's children and data.
func TestMembersConvergeUnderChurn(t *testing.T) {
	ns := zktest.NewNamespace(t)
	raw := ns.Conn(t)
	const n = 5
	sessions := make([]*session.Session, n)
	proxies := make([]*zktest.Proxy, n)
	ms := make([]*group.Member, n)
	for i := range ms {
		sessions[i], proxies[i] = sessiontest.ConnectProxy(t, ns)
		ms[i] = startMember(t, sessions[i], groupPath, fmt.Sprintf("m%d", i), "v0")
	}
	outsider := ns.Path(groupPath + "/outsider")
	for round := 1; round <= 10; round++ {
		i := round % n
		data := fmt.Sprintf("v%d", round)
		waitFor(t, "SetData", func(ctx context.Context) error { return ms[i].SetData(ctx, []byte(data)) })
		proxies[(i+1)%n].Cut()
		j := (i + 2) % n
		ms[j].Close()
		ms[j] = startMember(t, sessions[j], groupPath, fmt.Sprintf("m%d", j), data)
		if round%2 == 1 {
			if _, err := raw.Create(outsider, []byte(data), zk.FlagEphemeral, zk.WorldACL(zk.PermAll)); err != nil {
				t.Fatal(err)
			}
		} else if err := raw.Delete(outsider, -1); err != nil {
			t.Fatal(err)
		}
	}
	server := converged(t, raw, ns, ms, "m0", "m1", "m2", "m3", "m4")
	for i, m := range ms {
		if got := server[m.ID()]; got != string(m.Data()) {
			t.Fatalf("member %d: the server has %q, the member %q", i, got, m.Data())
		}
	}
}

// TestMemberChangesAfterSessionClose: once the member has seen its session
// closed, a Changes call gets a channel that is already closed, not one that
// stays open until its ctx ends.
func TestMemberChangesAfterSessionClose(t *testing.T) {
	ns := zktest.NewNamespace(t)
	s := sessiontest.Connect(t, ns)
	m := startMember(t, s, groupPath, "a", "da")
	waitFor(t, "Wait", m.Wait)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// Only a channel closed at once counts: one subscribed just before the
	// member saw the close holds a view, then is closed with the others.
	zktest.Eventually(t, wait, func() bool {
		ctx, cancel := context.WithCancel(ctxT(t))
		defer cancel()
		select {
		case _, ok := <-m.Changes(ctx):
			return !ok
		default:
			return false
		}
	}, "a Changes call after the session closed returns a closed channel")
	if v := text(m.Members()); !sameView(v, map[string]string{"a": "da"}) {
		t.Fatalf("Members after the session closed: %v, want the last view", v)
	}
}

// TestMemberWaitSessionClosedBeforeRead: the member's node exists but the
// group cannot be read (the group path's ACL lets it create its node, not
// list the group); when the session is closed, a Wait in progress returns
// session.ErrClosed instead of waiting for its ctx.
func TestMemberWaitSessionClosedBeforeRead(t *testing.T) {
	ns := zktest.NewNamespace(t)
	raw := ns.Conn(t)
	dir := ns.Path(groupPath)
	if _, err := raw.Create(ns.Path("/groups"), nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Create(dir, nil, 0, zk.WorldACL(zk.PermCreate|zk.PermDelete)); err != nil {
		t.Fatal(err)
	}
	s := sessiontest.Connect(t, ns)
	m := startMember(t, s, groupPath, "a", "da")
	zktest.Eventually(t, wait, func() bool {
		ok, _, err := raw.Exists(dir + "/a")
		return err == nil && ok
	}, "the member's node created")
	ctx, cancel := context.WithTimeout(ctxT(t), time.Second)
	err := m.Wait(ctx)
	cancel()
	if !errorsIs(err, context.DeadlineExceeded) {
		t.Fatalf("Wait while the group cannot be read: %v, want DeadlineExceeded", err)
	}
	errs := make(chan error, 1)
	wctx, wcancel := context.WithTimeout(ctxT(t), 2*wait)
	defer wcancel()
	go func() { errs <- m.Wait(wctx) }()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := sessiontest.Recv(t, errs, 3*wait, "Wait returns"); !errorsIs(err, session.ErrClosed) {
		t.Fatalf("Wait after the session closed: %v, want session.ErrClosed", err)
	}
}
