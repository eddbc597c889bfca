package zksession_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/internal/testkit/sessiontest"
	"github.com/zkrecipes/zkrecipes/internal/zksession"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// countingOp counts its Run and Late calls and keeps Late's error.
type countingOp struct {
	runs, lates atomic.Int32
	lateErr     error
}

func (o *countingOp) Run(*zk.Conn) error { o.runs.Add(1); return nil }
func (o *countingOp) Late(err error)     { o.lateErr = err; o.lates.Add(1) }

// TestCallOpNotStartedCallsLate: a CallOp whose ctx has ended before it
// starts never runs its Op, and calls Late once, before it returns, with the
// error it returns, so that a caller waiting for Late to settle the request
// (the engine's create) never waits on a request that was never sent.
func TestCallOpNotStartedCallsLate(t *testing.T) {
	ns := zktest.NewNamespace(t)
	s := sessiontest.Core(sessiontest.Connect(t, ns))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	op := &countingOp{}
	err, ended := zksession.CallOp(ctx, s, op)
	if ended || !errors.Is(err, context.Canceled) {
		t.Fatalf("CallOp on an ended ctx: %v, ended %v; want context.Canceled, not ended", err, ended)
	}
	if r, l := op.runs.Load(), op.lates.Load(); r != 0 || l != 1 || op.lateErr != err {
		t.Fatalf("Run %d times, Late %d times with %v; want 0, 1 with %v", r, l, op.lateErr, err)
	}

	// A CallOp that runs to its end never calls Late.
	op = &countingOp{}
	if err, ended := zksession.CallOp(context.Background(), s, op); err != nil || !ended {
		t.Fatalf("CallOp: %v, ended %v", err, ended)
	}
	if r, l := op.runs.Load(), op.lates.Load(); r != 1 || l != 0 {
		t.Fatalf("Run %d times, Late %d times; want 1, 0", r, l)
	}
}
