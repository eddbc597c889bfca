package zksession_test

import (
	"testing"

	"github.com/go-zookeeper/zk"

	"time"

	"github.com/zkrecipes/zkrecipes/internal/testkit/sessiontest"
	"github.com/zkrecipes/zkrecipes/session"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// TestGuaranteedDeleteOfLeftSession: the client is handed a new session
// while the server still keeps the old one (here held alive by another
// connection; in the chaos run a member answered "expired" seconds before
// the ensemble deleted the session's nodes). A guaranteed delete queued for
// the old session's node deletes it from the new session, while it is still
// the old session's, instead of leaving it to the old session's expiry.
func TestGuaranteedDeleteOfLeftSession(t *testing.T) {
	ns := zktest.NewNamespace(t)
	p := ns.Proxy(t)
	logOpt, logs := observed(t)
	s := sessiontest.ConnectTo(t, times3(p.Addr()), ns.Root, logOpt)
	rec := sessiontest.Record(t, s)
	raw := ns.Conn(t)
	ctx := ctxT(t, wait)
	ep := sessiontest.Core(s).Epoch()
	node, _, err := sessiontest.Core(s).CreateEphemeral(ctx, ep, ns.Root+"/n", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	p.ForceNewSessions(true)
	// The old session moves to this connection (the server closes the
	// client's) and stays alive until release.
	release := sessiontest.Hold(t, s, p, ns.Servers())
	rec.Wait(t, wait, session.Suspended)
	done := sessiontest.Core(s).GuaranteedDelete(ep, node, -1)
	rc := rec.Wait(t, wait, session.Reconnected)
	if rc.SessionID == ep.SessionID() {
		t.Fatal("the client kept its session")
	}
	select {
	case <-done:
	case <-time.After(wait):
		t.Fatal("the delete of the old session's node did not finish")
	}
	ok, _, err := raw.Exists(node)
	if err != nil || ok {
		t.Fatalf("old session's node after the delete: exists %v, %v", ok, err)
	}
	if !logged(logs, "deleted a node of a session this client had left, before the server expired that session", "path", node) {
		t.Fatal("no log of the delete")
	}
	// The same path, now another session's node: a delete queued for the
	// old session leaves it alone (it checks the owner).
	other := ns.Conn(t)
	if _, err := other.Create(node, nil, zk.FlagEphemeral, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-sessiontest.Core(s).GuaranteedDelete(ep, node, -1):
	case <-time.After(wait):
		t.Fatal("the delete of another session's node did not finish")
	}
	if ok, _, err := raw.Exists(node); err != nil || !ok {
		t.Fatalf("another session's node deleted by a delete queued for the old session: exists %v, %v", ok, err)
	}
	release()
}
