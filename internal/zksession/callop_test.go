package zksession_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"sync/atomic"
	"testing"
	"time"

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

// raceOp records its Run (a real request) and its Late calls.
type raceOp struct {
	ran   atomic.Bool
	lates atomic.Int32
}

func (o *raceOp) Run(c *zk.Conn) error {
	_, _, err := c.Exists("/")
	o.ran.Store(true)
	return err
}

func (o *raceOp) Late(error) { o.lates.Add(1) }

// TestOpsRacingCancel runs CallOps and StartOps whose ctx is canceled while
// they run, hundreds of times, under the pooled hand-off: a call that says
// its Op ended has seen that Op's own Run finish (a result never comes from
// another request), and once the Session has closed (its workers joined),
// every Op whose call did not end got exactly one Late, and every other
// none.
func TestOpsRacingCancel(t *testing.T) {
	ns := zktest.NewNamespace(t)
	sess := sessiontest.Connect(t, ns)
	s := sessiontest.Core(sess)
	// Cancel after a delay spread over about twice the time a request
	// takes here, so that some calls end first and some are left behind,
	// and some results come just as ctx ends. The spread follows the
	// machine: a batch whose calls all ended (or all were left) halves (or
	// doubles) it for the next.
	var took []time.Duration
	for i := 0; i < 20; i++ {
		t0 := time.Now()
		if _, ended := zksession.CallOp(context.Background(), s, &raceOp{}); !ended {
			t.Fatal("a CallOp without a deadline did not end")
		}
		took = append(took, time.Since(t0))
	}
	slices.Sort(took)
	spread := 2 * took[len(took)/2]
	type outcome struct {
		op    *raceOp
		ended bool
	}
	const batch, minCalls, maxBatches = 200, 800, 12
	var outs []outcome
	var nEnded, nLeft int
	for b := 0; b < maxBatches && (len(outs) < minCalls || nEnded == 0 || nLeft == 0); b++ {
		bEnded, bLeft := 0, 0
		for i := 0; i < batch; i++ {
			started := i%2 == 1
			op := &raceOp{}
			ctx, cancel := context.WithCancel(context.Background())
			timer := time.AfterFunc(time.Duration(rand.Int64N(int64(spread))), cancel) // races the request
			var ended bool
			if started {
				h, err := zksession.StartOp(s, op)
				if err != nil {
					t.Fatal(err)
				}
				_, ended = h.Wait(ctx)
			} else {
				_, ended = zksession.CallOp(ctx, s, op)
			}
			timer.Stop()
			cancel()
			if ended && !op.ran.Load() {
				t.Fatalf("call %d (StartOp %v) ended before its own Run did: a result from another request", len(outs), started)
			}
			outs = append(outs, outcome{op, ended})
			if ended {
				bEnded++
			} else {
				bLeft++
			}
		}
		nEnded, nLeft = nEnded+bEnded, nLeft+bLeft
		switch {
		case bEnded == 0:
			spread *= 2
		case bLeft == 0:
			spread /= 2
		}
	}
	if err := sess.Close(); err != nil {
		t.Fatal(err)
	}
	var ended, left int
	for i, o := range outs {
		want := int32(0)
		if !o.ended {
			want = 1
			left++
		} else {
			ended++
		}
		if got := o.op.lates.Load(); got != want {
			t.Fatalf("op %d (ended %v): Late called %d times, want %d", i, o.ended, got, want)
		}
	}
	t.Logf("%d calls ended, %d left behind (each with one Late); cancel within %v at the end", ended, left, spread)
	if ended == 0 || left == 0 {
		t.Fatalf("the race went one way only (%d ended, %d left behind): the test did not test it", ended, left)
	}
}

// TestStartedWaitOnce: a second Wait on a Started is refused, not a wait on
// a request that went back to the pool.
func TestStartedWaitOnce(t *testing.T) {
	ns := zktest.NewNamespace(t)
	s := sessiontest.Core(sessiontest.Connect(t, ns))
	op := &raceOp{}
	h, err := zksession.StartOp(s, op)
	if err != nil {
		t.Fatal(err)
	}
	if err, ended := h.Wait(context.Background()); err != nil || !ended {
		t.Fatalf("Wait: %v, ended %v", err, ended)
	}
	if err, ended := h.Wait(context.Background()); !errors.Is(err, zksession.ErrBadArgument) || ended {
		t.Fatalf("second Wait: %v, ended %v; want ErrBadArgument", err, ended)
	}
	var zero zksession.Started
	if err, _ := zero.Wait(context.Background()); !errors.Is(err, zksession.ErrBadArgument) {
		t.Fatalf("Wait on a zero Started: %v; want ErrBadArgument", err)
	}
}
