package engine

import (
	"context"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/internal/testkit/sessiontest"
	"github.com/zkrecipes/zkrecipes/internal/zksession"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// TestReadGateOpensOnce: the gate of a read pipelined behind a create opens
// exactly once, whichever comes first: the wire writing the create, or the
// create ending without being written (refused before it was sent, or its
// connection gone). A second opening would be a fatal unlock of an unlocked
// mutex; none would leave the read waiting for ever. The read runs once its
// gate is open.
func TestReadGateOpensOnce(t *testing.T) {
	ns := zktest.NewNamespace(t)
	s := sessiontest.Connect(t, ns)
	in, err := New(s, "/gate")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { in.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := in.ensureDir(ctx); err != nil {
		t.Fatal(err)
	}
	open := func(lop *listOp) bool {
		if !lop.sent.TryLock() {
			return false
		}
		lop.sent.Unlock()
		return true
	}
	gated := func(base string) (*listOp, *createOp) {
		lop := &listOp{e: in}
		lop.gate(in.zs, base)
		if open(lop) {
			t.Fatalf("%s: the gate is open before its create", base)
		}
		return lop, &createOp{a: &attempt{e: in}, base: base, gate: lop}
	}

	// The create ends without being written: the create opens the gate,
	// once, and the read then runs.
	lop, cop := gated(in.path + "/_c_unsent-lock-")
	cop.endGate()
	cop.endGate()
	if !open(lop) {
		t.Fatal("the gate of a create that ended unwritten stayed shut")
	}
	ran := make(chan error, 1)
	go func() { ran <- lop.Run(in.zs.Conn()) }()
	select {
	case err := <-ran:
		if err != nil {
			t.Fatalf("the read behind an unwritten create: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("the read behind an unwritten create never ran")
	}

	// The wire writes the create first: the create's end then opens
	// nothing (a second unlock would crash the test binary).
	base := in.path + "/_c_sent-lock-"
	lop, cop = gated(base)
	if _, err := zksession.Call(ctx, in.zs, func(c *zk.Conn) (string, error) {
		return c.Create(base, nil, zk.FlagEphemeralSequential, zk.WorldACL(zk.PermAll))
	}, nil); err != nil {
		t.Fatal(err)
	}
	if !open(lop) {
		t.Fatal("the gate stayed shut after the wire wrote its create")
	}
	cop.endGate()
	if !open(lop) {
		t.Fatal("the gate shut again")
	}
}
