package group_test

import (
	"context"
	"errors"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/zkrecipes/zkrecipes/internal/testkit/sessiontest"
	"github.com/zkrecipes/zkrecipes/recipes/group"
	"github.com/zkrecipes/zkrecipes/session"
	"github.com/zkrecipes/zkrecipes/zktest"
)

const nodePath = "/services/api"

// nameOf is the node name each mode must produce for nodePath (Curator's
// protected names: "_c_" + dashed UUID + "-" + name [+ 10-digit sequence]).
var nameOf = map[group.Mode]*regexp.Regexp{
	group.Ephemeral:                    regexp.MustCompile(`^/services/api$`),
	group.ProtectedEphemeral:           regexp.MustCompile(`^/services/_c_[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}-api$`),
	group.ProtectedEphemeralSequential: regexp.MustCompile(`^/services/_c_[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}-api[0-9]{10}$`),
}

var modes = []group.Mode{group.Ephemeral, group.ProtectedEphemeral, group.ProtectedEphemeralSequential}

// TestNodeModes: in each mode the node is created with the layout of
// Curator's PersistentNode, owned by the session, with the Node's data;
// SetData changes it on the server; Close deletes it.
func TestNodeModes(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode.String(), func(t *testing.T) {
			ns := zktest.NewNamespace(t)
			raw := ns.Conn(t)
			s := sessiontest.Connect(t, ns)
			n := startNode(t, s, nodePath, mode, "v1")
			waitFor(t, "Wait", n.Wait)
			p := n.Path()
			if !nameOf[mode].MatchString(p) {
				t.Fatalf("Path() = %q, want a match of %v", p, nameOf[mode])
			}
			d, st, ok := stat(t, raw, ns.Root+p)
			if !ok || string(d) != "v1" || st.EphemeralOwner != s.SessionID() {
				t.Fatalf("node %s: exists %v, data %q, owner 0x%x; want data v1 owned by 0x%x", p, ok, d, ownerOf(st), s.SessionID())
			}
			waitFor(t, "SetData", func(ctx context.Context) error { return n.SetData(ctx, []byte("v2")) })
			if d, _, _ := stat(t, raw, ns.Root+p); string(d) != "v2" {
				t.Fatalf("after SetData the server has %q, want v2", d)
			}
			if got := string(n.Data()); got != "v2" {
				t.Fatalf("Data() = %q, want v2", got)
			}
			if err := n.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}
			if _, _, ok := stat(t, raw, ns.Root+p); ok {
				t.Fatalf("node %s still exists after Close", p)
			}
			if n.Path() != "" {
				t.Fatalf("Path() after Close = %q, want empty", n.Path())
			}
		})
	}
}

func ownerOf(st *zk.Stat) int64 {
	if st == nil {
		return 0
	}
	return st.EphemeralOwner
}

// TestNodeRecreatedAfterDelete: a third party deletes the node; the Node
// creates it again (a new czxid), with the data set last.
func TestNodeRecreatedAfterDelete(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode.String(), func(t *testing.T) {
			ns := zktest.NewNamespace(t)
			raw := ns.Conn(t)
			s := sessiontest.Connect(t, ns)
			n := startNode(t, s, nodePath, mode, "v1")
			waitFor(t, "Wait", n.Wait)
			waitFor(t, "SetData", func(ctx context.Context) error { return n.SetData(ctx, []byte("v2")) })
			p := n.Path()
			_, st, _ := stat(t, raw, ns.Root+p)
			if err := raw.Delete(ns.Root+p, -1); err != nil {
				t.Fatalf("delete: %v", err)
			}
			var back string
			zktest.Eventually(t, wait, func() bool {
				q := n.Path()
				if q == "" {
					return false
				}
				d, st2, ok := stat(t, raw, ns.Root+q)
				if ok && st2.Czxid != st.Czxid && string(d) == "v2" && st2.EphemeralOwner == s.SessionID() {
					back = q
					return true
				}
				return false
			}, "node created again with data v2")
			if !nameOf[mode].MatchString(back) {
				t.Fatalf("created again as %q, want a match of %v", back, nameOf[mode])
			}
			if mode != group.ProtectedEphemeralSequential && back != p {
				t.Fatalf("created again as %q, want the same name %q", back, p)
			}
			if mode == group.ProtectedEphemeralSequential && back == p {
				t.Fatalf("created again with the same sequence number: %q", back)
			}
			// The protected modes keep their uuid: the old and new names share it.
			if mode != group.Ephemeral && back[:len("/services/_c_")+36] != p[:len("/services/_c_")+36] {
				t.Fatalf("created again as %q: not the uuid of %q", back, p)
			}
			if kids, _, _ := raw.Children(ns.Path("services")); len(kids) != 1 {
				t.Fatalf("children after re-create: %q, want one node", kids)
			}
		})
	}
}

// TestNodeBackAfterExpiry: the Node's session expires; the node is back,
// owned by the new session, within backBound of the Reconnected event, as
// the package documentation states.
func TestNodeBackAfterExpiry(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode.String(), func(t *testing.T) {
			ns := zktest.NewNamespace(t)
			raw := ns.Conn(t)
			s, p, tap := sessiontest.ConnectProxyTap(t, ns)
			n := startNode(t, s, nodePath, mode, "v1")
			waitFor(t, "Wait", n.Wait)
			old := s.SessionID()
			rec := sessiontest.Record(t, s)
			sessiontest.Expire(t, s, tap, ns.Servers()...)
			p.Cut()
			rec.Wait(t, wait, session.Lost)
			ev := rec.Wait(t, wait, session.Reconnected)
			if ev.SessionID == old {
				t.Fatalf("reconnected to the expired session 0x%x", old)
			}
			checkBack(t, raw, ns, n, ev.SessionID, ev.At, backBound, mode)
		})
	}
}

// checkBack waits until n's node exists owned by session sid with data v1,
// at most bound after since, and checks its name.
func checkBack(t *testing.T, raw *zk.Conn, ns *zktest.Namespace, n *group.Node, sid int64, since time.Time, bound time.Duration, mode group.Mode) {
	t.Helper()
	var back string
	zktest.Eventually(t, time.Until(since.Add(bound)), func() bool {
		q := n.Path()
		if q == "" {
			return false
		}
		d, st, ok := stat(t, raw, ns.Root+q)
		if ok && st.EphemeralOwner == sid && string(d) == "v1" {
			back = q
			return true
		}
		return false
	}, "node back on session 0x%x within %v of Reconnected", sid, bound)
	t.Logf("node %s back %v after Reconnected", back, time.Since(since))
	if !nameOf[mode].MatchString(back) {
		t.Fatalf("back as %q, want a match of %v", back, nameOf[mode])
	}
	zktest.Eventually(t, wait, func() bool {
		kids, _, _ := raw.Children(ns.Path("services"))
		return len(kids) == 1
	}, "one node left under /services")
}

// TestNodeBackWhileOldSessionLives: the client gets a new session while the
// server keeps the old one (and its node) until it expires it. The Node
// never claims the old session's node: in the protected modes it deletes it
// (the name is its own) and creates its node at once; with a fixed name it
// waits for the old node to go, at most the session timeout, then creates
// its own.
func TestNodeBackWhileOldSessionLives(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode.String(), func(t *testing.T) {
			ns := zktest.NewNamespace(t)
			raw := ns.Conn(t)
			// In the protected modes the old session lives longer than the
			// check takes, so only the Node's delete can remove its node.
			timeout := 10 * time.Second
			if mode == group.Ephemeral {
				timeout = sessiontest.SessionTimeout
			}
			s, p := sessiontest.ConnectProxy(t, ns, session.WithSessionTimeout(timeout))
			n := startNode(t, s, nodePath, mode, "v1")
			waitFor(t, "Wait", n.Wait)
			old := s.SessionID()
			rec := sessiontest.Record(t, s)
			p.ForceNewSessions(true)
			p.Cut()
			var ev sessiontest.Event
			for ev.SessionID == 0 || ev.SessionID == old {
				ev = rec.Wait(t, wait, session.Reconnected)
			}
			bound := backBound
			if mode == group.Ephemeral {
				bound += timeout
			}
			checkBack(t, raw, ns, n, ev.SessionID, ev.At, bound, mode)
			if mode != group.Ephemeral {
				kids, _, err := raw.Children(ns.Path("services"))
				if err != nil || len(kids) != 1 || time.Since(ev.At) >= timeout {
					t.Fatalf("%v after Reconnected: children %q (%v); want only the new node, before the old session (timeout %v) could expire",
						time.Since(ev.At), kids, err, timeout)
				}
			}
		})
	}
}

// TestNodeAdoptsGhost: the reply to the Node's create is lost (the node
// exists on the server, the client sees a connection error); the Node
// adopts that node rather than create a second one.
func TestNodeAdoptsGhost(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode.String(), func(t *testing.T) {
			ns := zktest.NewNamespace(t)
			raw := ns.Conn(t)
			s, p := sessiontest.ConnectProxy(t, ns)
			// Create the directory first, so that the swallowed create is
			// the node's own.
			if _, err := raw.Create(ns.Path("services"), nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
				t.Fatal(err)
			}
			var swallowed atomic.Int32
			p.OnRequest(func(r zktest.Request) zktest.Action {
				if (r.Op == zktest.OpCreate || r.Op == zktest.OpCreate2) &&
					strings.HasPrefix(r.Path, ns.Path("services")+"/") && swallowed.Add(1) == 1 {
					return zktest.SwallowReply
				}
				return zktest.Forward
			})
			n := startNode(t, s, nodePath, mode, "v1")
			waitFor(t, "Wait", n.Wait)
			if swallowed.Load() == 0 {
				t.Fatal("the proxy saw no create to swallow")
			}
			sid := s.SessionID()
			q := n.Path()
			d, st, ok := stat(t, raw, ns.Root+q)
			if !ok || st.EphemeralOwner != sid || string(d) != "v1" {
				t.Fatalf("node %s: exists %v owner 0x%x data %q; want v1 owned by 0x%x", q, ok, ownerOf(st), d, sid)
			}
			zktest.Eventually(t, wait, func() bool {
				kids, _, _ := raw.Children(ns.Path("services"))
				return len(kids) == 1
			}, "exactly one node under /services (no ghost)")
		})
	}
}

// TestNodeSurvivesShortCut: a connection cut that the session survives does
// not make the Node create its node again: the same node (czxid) stays.
func TestNodeSurvivesShortCut(t *testing.T) {
	ns := zktest.NewNamespace(t)
	raw := ns.Conn(t)
	s, p := sessiontest.ConnectProxy(t, ns)
	n := startNode(t, s, nodePath, group.Ephemeral, "v1")
	waitFor(t, "Wait", n.Wait)
	_, st, _ := stat(t, raw, ns.Root+nodePath)
	rec := sessiontest.Record(t, s)
	p.Cut()
	rec.Wait(t, wait, session.Suspended)
	ev := rec.Wait(t, wait, session.Reconnected)
	if ev.SessionID != st.EphemeralOwner {
		t.Skipf("the session did not survive the cut on this machine (0x%x -> 0x%x)", st.EphemeralOwner, ev.SessionID)
	}
	// A SetData after the reconnect proves the Node's goroutine has looked
	// at the node again since the cut.
	waitFor(t, "SetData", func(ctx context.Context) error { return n.SetData(ctx, []byte("v2")) })
	d, st2, ok := stat(t, raw, ns.Root+nodePath)
	if !ok || st2.Czxid != st.Czxid || string(d) != "v2" {
		t.Fatalf("after the cut: exists %v czxid %d (was %d) data %q; want the same node with v2", ok, czxidOf(st2), st.Czxid, d)
	}
}

func czxidOf(st *zk.Stat) int64 {
	if st == nil {
		return 0
	}
	return st.Czxid
}

// TestNodeWaitsOutForeignNode: another session holds the fixed name. The
// Node neither claims nor writes that node; once it goes, the Node creates
// its own.
func TestNodeWaitsOutForeignNode(t *testing.T) {
	ns := zktest.NewNamespace(t)
	raw := ns.Conn(t)
	other := zktest.Conn(t, ns.Servers(), 0)
	if _, err := raw.Create(ns.Path("services"), nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	if _, err := other.Create(ns.Root+nodePath, []byte("theirs"), zk.FlagEphemeral, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	s := sessiontest.Connect(t, ns)
	n := startNode(t, s, nodePath, group.Ephemeral, "ours")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	err := n.Wait(ctx)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait while another session holds the node: %v, want DeadlineExceeded", err)
	}
	if d, st, _ := stat(t, raw, ns.Root+nodePath); string(d) != "theirs" || st.EphemeralOwner != other.SessionID() {
		t.Fatalf("the other session's node was touched: data %q owner 0x%x", d, ownerOf(st))
	}
	if n.Path() != "" {
		t.Fatalf("Path() = %q while the node is another session's", n.Path())
	}
	other.Close()
	waitFor(t, "Wait", n.Wait)
	d, st, ok := stat(t, raw, ns.Root+nodePath)
	if !ok || string(d) != "ours" || st.EphemeralOwner != s.SessionID() {
		t.Fatalf("after the other session ended: exists %v data %q owner 0x%x", ok, d, ownerOf(st))
	}
}

// TestNodeSetDataAfterForeignWrite: a third party writes the node (its
// version moves); SetData still lands, on the same node.
func TestNodeSetDataAfterForeignWrite(t *testing.T) {
	ns := zktest.NewNamespace(t)
	raw := ns.Conn(t)
	s := sessiontest.Connect(t, ns)
	n := startNode(t, s, nodePath, group.Ephemeral, "v1")
	waitFor(t, "Wait", n.Wait)
	if _, err := raw.Set(ns.Root+nodePath, []byte("meddled"), -1); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "SetData", func(ctx context.Context) error { return n.SetData(ctx, []byte("v2")) })
	if d, _, _ := stat(t, raw, ns.Root+nodePath); string(d) != "v2" {
		t.Fatalf("server data %q, want v2", d)
	}
}

// TestNodeSetDataBeforeStart: data set before Start is the data of the
// first create.
func TestNodeSetDataBeforeStart(t *testing.T) {
	ns := zktest.NewNamespace(t)
	raw := ns.Conn(t)
	s := sessiontest.Connect(t, ns)
	n, err := group.NewNode(s, nodePath, group.Ephemeral, []byte("v1"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	waitFor(t, "SetData", func(ctx context.Context) error { return n.SetData(ctx, []byte("early")) })
	if err := n.Start(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "Wait", n.Wait)
	if d, _, _ := stat(t, raw, ns.Root+nodePath); string(d) != "early" {
		t.Fatalf("server data %q, want early", d)
	}
}

// TestNodeCloseWhileBusy: Close while the connection is partitioned and a
// create, a Wait and a SetData are in flight: Close returns promptly, the
// calls return session.ErrClosed, and once the partition heals nothing is
// left on the server.
func TestNodeCloseWhileBusy(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode.String(), func(t *testing.T) {
			ns := zktest.NewNamespace(t)
			raw := ns.Conn(t)
			s, p := sessiontest.ConnectProxy(t, ns, session.WithSessionTimeout(10*time.Second))
			p.Partition()
			n, err := group.NewNode(s, nodePath, mode, []byte("v1"))
			if err != nil {
				t.Fatal(err)
			}
			if err := n.Start(); err != nil {
				t.Fatal(err)
			}
			ctx := ctxT(t)
			errs := make(chan error, 2)
			go func() { errs <- n.Wait(ctx) }()
			go func() { errs <- n.SetData(ctx, []byte("v2")) }()
			start := time.Now()
			if err := n.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}
			if d := time.Since(start); d > cleanupBound {
				t.Fatalf("Close took %v while partitioned, want at most %v", d, cleanupBound)
			}
			for i := 0; i < 2; i++ {
				if err := sessiontest.Recv(t, errs, wait, "Wait or SetData return"); !errors.Is(err, session.ErrClosed) {
					t.Fatalf("a call in flight at Close returned %v, want session.ErrClosed", err)
				}
			}
			if err := n.Start(); !errors.Is(err, session.ErrClosed) {
				t.Fatalf("Start after Close: %v, want session.ErrClosed", err)
			}
			rec := sessiontest.Record(t, s)
			p.Heal()
			rec.Wait(t, wait, session.Reconnected)
			// The create the partition held failed with the old connection
			// (or, had it landed, the session deletes what it created).
			// Nothing of ours stays.
			zktest.Eventually(t, wait, func() bool {
				kids, _, err := raw.Children(ns.Path("services"))
				return errors.Is(err, zk.ErrNoNode) || err == nil && len(kids) == 0
			}, "no node left under /services")
		})
	}
}

// cleanupBound is how long Close may take: its deletion gets 5 s, and a
// loaded machine some more.
const cleanupBound = 8 * time.Second

// TestNodeStartTwice: a second Start fails with ErrStarted; Wait before
// Start fails with ErrNotStarted.
func TestNodeStartTwice(t *testing.T) {
	ns := zktest.NewNamespace(t)
	s := sessiontest.Connect(t, ns)
	n, err := group.NewNode(s, nodePath, group.Ephemeral, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	if err := n.Wait(ctxT(t)); !errors.Is(err, group.ErrNotStarted) {
		t.Fatalf("Wait before Start: %v, want ErrNotStarted", err)
	}
	if err := n.Start(); err != nil {
		t.Fatal(err)
	}
	if err := n.Start(); !errors.Is(err, group.ErrStarted) || !strings.Contains(err.Error(), nodePath) {
		t.Fatalf("second Start: %v, want ErrStarted naming the path", err)
	}
}

// TestNodeSessionClosed: closing the session stops the Node: Wait returns
// session.ErrClosed.
func TestNodeSessionClosed(t *testing.T) {
	ns := zktest.NewNamespace(t)
	s := sessiontest.Connect(t, ns)
	n := startNode(t, s, nodePath, group.Ephemeral, "v1")
	waitFor(t, "Wait", n.Wait)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	zktest.Eventually(t, wait, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		return errors.Is(n.Wait(ctx), session.ErrClosed)
	}, "Wait returns session.ErrClosed after the session closed")
}

// TestNodeDeletedWhileDisconnected: someone deletes the node while the
// Node's connection is down; when the session reconnects (the same one),
// the Node creates the node again.
func TestNodeDeletedWhileDisconnected(t *testing.T) {
	ns := zktest.NewNamespace(t)
	raw := ns.Conn(t)
	s, p := sessiontest.ConnectProxy(t, ns, session.WithSessionTimeout(10*time.Second))
	n := startNode(t, s, nodePath, group.Ephemeral, "v1")
	waitFor(t, "Wait", n.Wait)
	_, st, _ := stat(t, raw, ns.Root+nodePath)
	rec := sessiontest.Record(t, s)
	p.Partition()
	rec.Wait(t, wait, session.Suspended)
	if err := raw.Delete(ns.Root+nodePath, -1); err != nil {
		t.Fatal(err)
	}
	p.Heal()
	ev := rec.Wait(t, wait, session.Reconnected)
	if ev.SessionID != st.EphemeralOwner {
		t.Fatalf("the session did not survive the partition")
	}
	zktest.Eventually(t, wait, func() bool {
		d, st2, ok := stat(t, raw, ns.Root+nodePath)
		return ok && st2.Czxid != st.Czxid && st2.EphemeralOwner == ev.SessionID && string(d) == "v1"
	}, "node created again after the reconnect")
}

// TestNodeSetDataWaitsForItsOwnNode: the node is deleted and another
// session creates the same name; once the Node has seen that, SetData waits
// for the Node's own node and leaves the other one's data alone.
func TestNodeSetDataWaitsForItsOwnNode(t *testing.T) {
	ns := zktest.NewNamespace(t)
	raw := ns.Conn(t)
	other := zktest.Conn(t, ns.Servers(), 0)
	s := sessiontest.Connect(t, ns)
	n := startNode(t, s, nodePath, group.Ephemeral, "v1")
	waitFor(t, "Wait", n.Wait)
	// Replace our node with another session's in one transaction, so that
	// the Node never sees the name free.
	_, st, _ := stat(t, raw, ns.Root+nodePath)
	if _, err := other.Multi(
		&zk.DeleteRequest{Path: ns.Root + nodePath, Version: st.Version},
		&zk.CreateRequest{Path: ns.Root + nodePath, Data: []byte("theirs"), Acl: zk.WorldACL(zk.PermAll), Flags: zk.FlagEphemeral},
	); err != nil {
		t.Fatal(err)
	}
	zktest.Eventually(t, wait, func() bool { return n.Path() == "" }, "the Node sees its node gone")
	ctx, cancel := context.WithTimeout(ctxT(t), 2*time.Second)
	err := n.SetData(ctx, []byte("v2"))
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("SetData while another session holds the name: %v, want DeadlineExceeded", err)
	}
	if d, st, _ := stat(t, raw, ns.Root+nodePath); string(d) != "theirs" || st.EphemeralOwner != other.SessionID() {
		t.Fatalf("the other session's node holds %q owned by 0x%x, want theirs", d, ownerOf(st))
	}
	other.Close()
	zktest.Eventually(t, wait, func() bool {
		d, st, ok := stat(t, raw, ns.Root+nodePath)
		return ok && string(d) == "v2" && st.EphemeralOwner == s.SessionID()
	}, "the Node's own node back with v2")
}

// TestNodeRefused: ZooKeeper refuses the create for good (the parent's ACL
// lacks CREATE): the Node stops, and Wait returns an error matching
// zk.ErrNoAuth.
func TestNodeRefused(t *testing.T) {
	ns := zktest.NewNamespace(t)
	raw := ns.Conn(t)
	if _, err := raw.Create(ns.Path("locked"), nil, 0, zk.WorldACL(zk.PermRead)); err != nil {
		t.Fatal(err)
	}
	s := sessiontest.Connect(t, ns)
	n := startNode(t, s, "/locked/x", group.Ephemeral, "v1")
	ctx, cancel := context.WithTimeout(ctxT(t), wait)
	defer cancel()
	if err := n.Wait(ctx); !errors.Is(err, zk.ErrNoAuth) || !strings.Contains(err.Error(), "/locked/x") {
		t.Fatalf("Wait: %v, want zk.ErrNoAuth naming /locked/x", err)
	}
	if err := n.SetData(ctx, nil); !errors.Is(err, zk.ErrNoAuth) {
		t.Fatalf("SetData after the Node stopped: %v, want zk.ErrNoAuth", err)
	}
}

// TestNodeCloseWhileDisconnected: Close while the connection is down
// returns within the cleanup bound, and the session's background queue
// deletes the node once the connection is back (the session survives, so
// only that delete can remove it).
func TestNodeCloseWhileDisconnected(t *testing.T) {
	ns := zktest.NewNamespace(t)
	raw := ns.Conn(t)
	s, p := sessiontest.ConnectProxy(t, ns, session.WithSessionTimeout(10*time.Second))
	n := startNode(t, s, nodePath, group.Ephemeral, "v1")
	waitFor(t, "Wait", n.Wait)
	rec := sessiontest.Record(t, s)
	// Refuse and cut rather than partition: the client sees the drop at
	// once, so Close runs well within the session timeout.
	p.Refuse(true)
	p.Cut()
	rec.Wait(t, wait, session.Suspended)
	start := time.Now()
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > cleanupBound {
		t.Fatalf("Close took %v, want at most %v", d, cleanupBound)
	}
	if _, _, ok := stat(t, raw, ns.Root+nodePath); !ok {
		t.Fatal("the node went while the connection was down: the check below would prove nothing")
	}
	p.Heal()
	ev := rec.Wait(t, wait, session.Reconnected)
	zktest.Eventually(t, wait, func() bool {
		_, _, ok := stat(t, raw, ns.Root+nodePath)
		return !ok
	}, "the node deleted after the reconnect")
	if s.SessionID() != ev.SessionID {
		t.Fatal("the session changed: its expiry, not the delete, may have removed the node")
	}
}

// TestNodeCloseLeavesAnotherSessionsNode: while the Node's connection is
// down, someone deletes its node and another session creates its own under
// the same name; the Node has not seen it when Close queues the delete.
// Once the same session is back, the delete leaves the other session's node
// alone.
func TestNodeCloseLeavesAnotherSessionsNode(t *testing.T) {
	ns := zktest.NewNamespace(t)
	raw := ns.Conn(t)
	other := zktest.Conn(t, ns.Servers(), 0)
	core, logs := observer.New(zapcore.DebugLevel)
	s, p := sessiontest.ConnectProxy(t, ns, session.WithSessionTimeout(10*time.Second),
		session.WithLogger(zap.New(core)))
	n := startNode(t, s, nodePath, group.Ephemeral, "v1")
	waitFor(t, "Wait", n.Wait)
	full := ns.Root + nodePath
	rec := sessiontest.Record(t, s)
	p.Refuse(true)
	p.Cut()
	rec.Wait(t, wait, session.Suspended)
	if err := raw.Delete(full, -1); err != nil {
		t.Fatal(err)
	}
	if _, err := other.Create(full, []byte("theirs"), zk.FlagEphemeral, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	if !loggedPath(logs, "guaranteed delete queued", full) {
		t.Fatal("Close queued no delete of the node: the check below would prove nothing")
	}
	p.Heal()
	if ev := rec.Wait(t, wait, session.Reconnected); ev.SessionID != s.SessionID() || ev.SessionID == other.SessionID() {
		t.Fatal("the session did not survive the cut")
	}
	zktest.Eventually(t, wait, func() bool { return loggedPath(logs, "guaranteed delete done", full) },
		"the delete queued at Close finished")
	if d, st, ok := stat(t, raw, full); !ok || string(d) != "theirs" || st.EphemeralOwner != other.SessionID() {
		t.Fatalf("after Close the node exists %v, holds %q owned by 0x%x; want the other session's node", ok, d, ownerOf(st))
	}
}

// loggedPath reports whether logs hold an entry with message msg and the
// field path=p.
func loggedPath(logs *observer.ObservedLogs, msg, p string) bool {
	for _, e := range logs.FilterMessage(msg).All() {
		if v, ok := e.ContextMap()["path"]; ok && v == p {
			return true
		}
	}
	return false
}
