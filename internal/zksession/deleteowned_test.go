package zksession_test

import (
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/internal/testkit/sessiontest"
	"github.com/zkrecipes/zkrecipes/session"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// TestGuaranteedDeleteOwned: a delete checked against the node's czxid and
// owner deletes the node its session created, and leaves alone another
// session's node created under the same name since, whether it was queued
// while connected or while the connection was down.
func TestGuaranteedDeleteOwned(t *testing.T) {
	ns := zktest.NewNamespace(t)
	p := ns.Proxy(t)
	s := sessiontest.ConnectTo(t, times3(p.Addr()), ns.Root, session.WithSessionTimeout(10*time.Second))
	rec := sessiontest.Record(t, s)
	raw := ns.Conn(t)
	ctx := ctxT(t, wait)
	zs := sessiontest.Core(s)
	finished := func(done <-chan struct{}, what string) {
		t.Helper()
		select {
		case <-done:
		case <-time.After(wait):
			t.Fatalf("%s: the delete did not finish", what)
		}
	}
	exists := func(p string) *zk.Stat {
		t.Helper()
		ok, st, err := raw.Exists(p)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			return nil
		}
		return st
	}
	replace := func(p string) *zk.Stat {
		t.Helper()
		if err := raw.Delete(p, -1); err != nil {
			t.Fatal(err)
		}
		if _, err := raw.Create(p, []byte("theirs"), zk.FlagEphemeral, zk.WorldACL(zk.PermAll)); err != nil {
			t.Fatal(err)
		}
		return exists(p)
	}

	// Ours: deleted.
	ep := zs.Epoch()
	node, st, err := zs.CreateEphemeral(ctx, ep, ns.Root+"/mine", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	finished(zs.GuaranteedDeleteOwned(ep, node, st.Czxid), "own node")
	if exists(node) != nil {
		t.Fatal("own node not deleted")
	}

	// Replaced by another session's node while connected: left alone.
	node, st, err = zs.CreateEphemeral(ctx, ep, ns.Root+"/replaced", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	theirs := replace(node)
	finished(zs.GuaranteedDeleteOwned(ep, node, st.Czxid), "replaced node")
	if got := exists(node); got == nil || got.Czxid != theirs.Czxid {
		t.Fatal("another session's node deleted by a delete queued for ours")
	}

	// Replaced while the connection is down, the delete queued meanwhile:
	// left alone once the same session is back.
	node, st, err = zs.CreateEphemeral(ctx, ep, ns.Root+"/cut", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	p.Partition()
	rec.Wait(t, wait, session.Suspended)
	theirs = replace(node)
	done := zs.GuaranteedDeleteOwned(ep, node, st.Czxid)
	p.Heal()
	if rc := rec.Wait(t, wait, session.Reconnected); rc.SessionID != ep.SessionID() {
		t.Fatal("the session did not survive the partition")
	}
	finished(done, "node replaced while disconnected")
	if got := exists(node); got == nil || got.Czxid != theirs.Czxid {
		t.Fatal("another session's node deleted by a delete queued while disconnected")
	}
}
