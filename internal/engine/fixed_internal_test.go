package engine

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/internal/testkit/sessiontest"
	"github.com/zkrecipes/zkrecipes/internal/zksession"
	"github.com/zkrecipes/zkrecipes/session"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// fixedSetup connects a session, creates the recipe directory and returns an
// Engine on it and the full path of the fixed node "n".
func fixedSetup(t *testing.T) (*session.Session, *Engine, string) {
	t.Helper()
	ns := zktest.NewNamespace(t)
	s := sessiontest.Connect(t, ns)
	in, err := New(s, "/fixed")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { in.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := in.ensureDir(ctx); err != nil {
		t.Fatal(err)
	}
	return s, in, in.Path() + "/n"
}

func exists(t *testing.T, c *zk.Conn, p string) bool {
	t.Helper()
	ok, _, err := c.Exists(p)
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

// TestDeleteFixedOp: a fixed node is deleted only while it carries our data
// (and, if asked, our owner), and only while go-zookeeper is connected on the
// session the delete is meant for: a delete that would go out on another
// session is not sent (it could remove the next holder's node of the same
// name, with the same version 0).
func TestDeleteFixedOp(t *testing.T) {
	s, _, node := fixedSetup(t)
	c := s.Conn()
	sid := sessiontest.Core(s).Epoch().SessionID()
	mine, other := []byte("mine"), []byte("other")
	if _, err := c.Create(node, mine, zk.FlagEphemeral, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	if err := deleteFixedOp(sid, node, other, 0)(c); err != nil || !exists(t, c, node) {
		t.Fatalf("other data: %v, node exists %v", err, exists(t, c, node))
	}
	if err := deleteFixedOp(sid, node, mine, sid+1)(c); err != nil || !exists(t, c, node) {
		t.Fatalf("other owner: %v, node exists %v", err, exists(t, c, node))
	}
	// The connection is on sid, not on sid+1: not sent, retryable.
	err := deleteFixedOp(sid+1, node, mine, 0)(c)
	if !errors.Is(err, zk.ErrConnectionClosed) || !zksession.IsConnectionError(err) || !exists(t, c, node) {
		t.Fatalf("wrong session: %v, node exists %v", err, exists(t, c, node))
	}
	if err := deleteFixedOp(sid, node, mine, sid)(c); err != nil || exists(t, c, node) {
		t.Fatalf("ours: %v, node exists %v", err, exists(t, c, node))
	}
	if err := deleteFixedOp(sid, node, mine, sid)(c); err != nil {
		t.Fatalf("missing node: %v", err)
	}
}

// TestSweepFixedByData: the durable cleanup after a create that ran on
// another session (or whose reply was lost) deletes the fixed node only if it
// carries our data, never by name alone.
func TestSweepFixedByData(t *testing.T) {
	s, _, node := fixedSetup(t)
	c := s.Conn()
	ep := sessiontest.Core(s).Epoch()
	wait := func(done <-chan struct{}) {
		t.Helper()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("the queued delete did not finish")
		}
	}
	if _, err := c.Create(node, []byte("next holder"), zk.FlagEphemeral, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	wait(sessiontest.Core(s).GuaranteedDeleteIfData(ep, node, []byte("mine")))
	if !exists(t, c, node) {
		t.Fatal("the sweep deleted another acquire's node")
	}
	// Our data now (written in place: a delete and a create would leave the
	// directory, a container, empty for the server to reap in between).
	if _, err := c.Set(node, []byte("mine"), -1); err != nil {
		t.Fatal(err)
	}
	wait(sessiontest.Core(s).GuaranteedDeleteIfData(ep, node, []byte("mine")))
	if exists(t, c, node) {
		t.Fatal("the sweep left our node")
	}
}

// TestStatSelfFixedData: before granting, the engine reads our fixed node;
// when the name now holds another acquire's node owned by the SAME session
// (two acquirers of one process share it), the owner check alone would
// grant a second holder. The data check fails the attempt with ErrNodeDeleted
// and leaves the other node alone.
func TestStatSelfFixedData(t *testing.T) {
	s, in, node := fixedSetup(t)
	c := s.Conn()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ep, lctx, err := sessiontest.Core(s).WaitLease(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Create(node, []byte(NewUUID()+" other"), zk.FlagEphemeral, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	for _, watch := range []bool{false, true} {
		u := NewUUID()
		a := &attempt{scope: scope{ctx: ctx}, e: in, user: ctx, uuid: u, ep: ep, lctx: lctx,
			fixed: node, node: node, name: "n", data: []byte(u + " me")}
		if err := a.statSelf(watch); !errors.Is(err, ErrNodeDeleted) || a.node != "" || a.czxid != 0 {
			t.Fatalf("watch=%v: statSelf = %v (node %q, token %d), want ErrNodeDeleted and no node", watch, err, a.node, a.czxid)
		}
		if !exists(t, c, node) {
			t.Fatal("the other acquire's node was deleted")
		}
	}
	// Our own data: granted material.
	u := NewUUID()
	data := []byte(u + " me")
	if _, err := c.Set(node, data, -1); err != nil {
		t.Fatal(err)
	}
	a := &attempt{scope: scope{ctx: ctx}, e: in, user: ctx, uuid: u, ep: ep, lctx: lctx, fixed: node, node: node, name: "n", data: data}
	if err := a.statSelf(false); err != nil || a.czxid == 0 {
		t.Fatalf("our node: statSelf = %v, token %d", err, a.czxid)
	}
}
