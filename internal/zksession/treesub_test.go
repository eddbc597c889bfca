package zksession_test

import (
	"context"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/internal/testkit/sessiontest"
	"github.com/zkrecipes/zkrecipes/internal/zksession"
	"github.com/zkrecipes/zkrecipes/session"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// treeRecorder is a TreeEvents that keeps what it is handed.
type treeRecorder chan zk.Event

func (r treeRecorder) TreeEvent(ev zk.Event) {
	select {
	case r <- ev:
	default: // a test that overflows it fails on a missing event
	}
}

// next returns the next event, failing the test after wait.
func (r treeRecorder) next(t *testing.T) zk.Event {
	t.Helper()
	select {
	case ev := <-r:
		return ev
	case <-time.After(wait):
		t.Fatal("no event")
		return zk.Event{}
	}
}

// A tree subscription gets the events of the server-only watches at and
// below its path (data, child and exists, each of its kind), and none of a
// path that only starts with the same text; go-zookeeper holds none of
// those watches (the session's registrations stay at 0, and a reconnect
// sends no setWatches since go-zookeeper has none to list) while the server
// holds them (wchc); a reconnect drops them, as documented, and a read after
// it sets them again; Session.Watches counts what the subscriber says it
// holds; after Cancel the target is never called.
func TestTreeSubscription(t *testing.T) {
	ns := zktest.NewNamespace(t)
	raw := ns.Conn(t)
	s, proxy, tap := sessiontest.ConnectProxyTap(t, ns, session.WithSessionTimeout(10*time.Second))
	rec := sessiontest.Record(t, s)
	zs := sessiontest.Core(s)
	root, a, sibling, later := ns.Path("t"), ns.Path("t/a"), ns.Path("tx"), ns.Path("t/later")
	for _, p := range []string{root, a, sibling} {
		if _, err := raw.Create(p, []byte("0"), 0, zk.WorldACL(zk.PermAll)); err != nil {
			t.Fatal(err)
		}
	}
	r := make(treeRecorder, 16)
	sub := zs.SubscribeTree(root, r)
	defer sub.Cancel()
	ctx := context.Background()
	arm := func() {
		t.Helper()
		ep, err := zs.WaitConnected(ctx)
		if err != nil {
			t.Fatal(err)
		}
		err = zs.Retry(ctx, ep, func(conn *zk.Conn) error {
			if _, _, err := zs.GetServerW(conn, a); err != nil {
				return err
			}
			if _, _, err := zs.GetServerW(conn, sibling); err != nil {
				return err
			}
			if _, _, err := zs.ChildrenServerW(conn, root); err != nil {
				return err
			}
			_, _, err := zs.ExistsServerW(conn, later)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	arm()
	if n := zs.WatchCount(); n != 0 {
		t.Fatalf("the session holds %d registrations in go-zookeeper", n)
	}
	got := sessiontest.Watches(t, ns.Server.Addr(), s.SessionID())
	for _, p := range []string{a, sibling, later} {
		if !got[p] {
			t.Fatalf("the server holds no data or exists watch on %s for the session: %v", p, got)
		}
	}

	if _, err := raw.Set(sibling, []byte("1"), -1); err != nil { // not below root: no event
		t.Fatal(err)
	}
	if _, err := raw.Set(a, []byte("1"), -1); err != nil {
		t.Fatal(err)
	}
	if ev := r.next(t); ev.Type != zk.EventNodeDataChanged || ev.Path != a {
		t.Fatalf("event %v %s, want NodeDataChanged %s", ev.Type, ev.Path, a)
	}
	if _, err := raw.Create(later, nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	// The exists watch and the parent's child watch fire, in the server's
	// order.
	for _, want := range []zk.Event{{Type: zk.EventNodeCreated, Path: later}, {Type: zk.EventNodeChildrenChanged, Path: root}} {
		if ev := r.next(t); ev.Type != want.Type || ev.Path != want.Path {
			t.Fatalf("event %v %s, want %v %s", ev.Type, ev.Path, want.Type, want.Path)
		}
	}

	// A reconnect: go-zookeeper has no watch to set again, and the server
	// holds none of ours any more until they are read again.
	arm()
	proxy.Cut()
	rec.Wait(t, wait, session.Reconnected)
	for op, n := range tap.Requests() {
		if zktest.OpName(op) == "setWatches" || zktest.OpName(op) == "setWatches2" {
			t.Fatalf("%d %s requests: go-zookeeper held watches", n, zktest.OpName(op))
		}
	}
	if got := sessiontest.Watches(t, ns.Server.Addr(), s.SessionID()); len(got) != 0 {
		t.Fatalf("after a reconnect the server holds %v for the session", got)
	}
	arm()
	if err := raw.Delete(later, -1); err != nil {
		t.Fatal(err)
	}
	for _, want := range []zk.Event{{Type: zk.EventNodeDeleted, Path: later}, {Type: zk.EventNodeChildrenChanged, Path: root}} {
		if ev := r.next(t); ev.Type != want.Type || ev.Path != want.Path {
			t.Fatalf("after the reconnect: event %v %s, want %v %s", ev.Type, ev.Path, want.Type, want.Path)
		}
	}

	// Counted by Session.Watches as the subscriber says; Cancel ends it.
	base := s.Watches()
	sub.SetWatches(7)
	if got := s.Watches(); got != base+7 {
		t.Fatalf("Watches = %d, want %d", got, base+7)
	}
	arm()
	other := make(treeRecorder, 16)
	defer zs.SubscribeTree(root, other).Cancel()
	sub.Cancel()
	sub.Cancel() // idempotent
	if got := s.Watches(); got != base {
		t.Fatalf("Watches after Cancel = %d, want %d", got, base)
	}
	if _, err := raw.Set(a, []byte("2"), -1); err != nil {
		t.Fatal(err)
	}
	if ev := other.next(t); ev.Path != a { // dispatched: the canceled one would have had it too
		t.Fatalf("event %v %s, want one of %s", ev.Type, ev.Path, a)
	}
	select {
	case ev := <-r:
		t.Fatalf("a canceled subscription got %v %s", ev.Type, ev.Path)
	default:
	}
	var _ zksession.TreeEvents = r
}
