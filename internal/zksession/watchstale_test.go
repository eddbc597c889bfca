package zksession_test

import (
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/internal/testkit/sessiontest"
	"github.com/zkrecipes/zkrecipes/session"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// TestSharedWatchNotStale checks that GetW never hands a caller a shared
// watch whose event predates the caller's read. A node is watched, deleted
// and created again under the same name (as a fixed-name lock node is)
// while the notice of the delete is still on its way (the proxy delays it);
// a GetW issued then reads the new node, and its watch must not fire with
// the old node's NodeDeleted.
func TestSharedWatchNotStale(t *testing.T) {
	ns := zktest.NewNamespace(t)
	s, p := sessiontest.ConnectProxy(t, ns, session.WithSessionTimeout(10*time.Second))
	raw := ns.Conn(t)
	node, err := s.Path("/fixed")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Create(node, []byte("one"), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	_, _, w1, err := sessiontest.Core(s).GetW(node)
	if err != nil {
		t.Fatal(err)
	}
	p.SetLatency(300 * time.Millisecond)
	if err := raw.Delete(node, -1); err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Create(node, []byte("two"), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	_, st, err := raw.Exists(node)
	if err != nil {
		t.Fatal(err)
	}
	// The delete's notice is now delayed in the proxy; this GetW finds the
	// first registration not fired yet, and its read is answered after the
	// notice arrives.
	data, st2, w2, err := sessiontest.Core(s).GetW(node)
	if err != nil {
		t.Fatal(err)
	}
	p.SetLatency(0)
	if string(data) != "two" || st2.Czxid != st.Czxid {
		t.Fatalf("read %q (czxid %d), want the new node %q (czxid %d)", data, st2.Czxid, "two", st.Czxid)
	}
	select {
	case ev, ok := <-w1.Events():
		if got := w1.Event(ev, ok); got.Type != zk.EventNodeDeleted {
			t.Errorf("first watch fired with %v, want NodeDeleted", got.Type)
		}
	case <-time.After(wait):
		t.Fatal("the first watch did not fire")
	}
	select {
	case ev, ok := <-w2.Events():
		t.Fatalf("the watch returned with the new node fired with %v: an event older than its read", w2.Event(ev, ok).Type)
	default:
	}
	// It still fires at the new node's next change.
	if _, err := raw.Set(node, []byte("three"), -1); err != nil {
		t.Fatal(err)
	}
	select {
	case ev, ok := <-w2.Events():
		if got := w2.Event(ev, ok); got.Type != zk.EventNodeDataChanged {
			t.Errorf("second watch fired with %v, want NodeDataChanged", got.Type)
		}
	case <-time.After(wait):
		t.Fatal("the second watch did not fire at the new node's change")
	}
}
