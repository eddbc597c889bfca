package zksession_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/zkrecipes/zkrecipes/internal/testkit/sessiontest"
	"github.com/zkrecipes/zkrecipes/internal/zksession"
	"github.com/zkrecipes/zkrecipes/session"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// TestLaggingAnswersEndLeaseBeforeExpiry: a standard lease ends before the
// ensemble can expire the session, also when the answers the client reads
// were held up on the way: the client must count from when it sent what the
// server answered, not from when the answer came.
//
// The client talks to a follower through a proxy whose delay grows to
// 1.2 s each way (the session timeout is 2 s). Then the follower freezes: the leader
// stops hearing of the session and expires it about one timeout after it
// last did, while the answers already on their way keep the connection
// looking alive to a client that counts from its reads (go-zookeeper gives
// up two thirds of the timeout after its last read: 1.2 s + 1.33 s after the
// freeze, later than the expiry). This is the chaos run's "two holders at
// once" after a latency spike followed by a frozen member.
func TestLaggingAnswersEndLeaseBeforeExpiry(t *testing.T) {
	e := zktest.StartEnsembleT(t, 3)
	leader, err := e.Leader()
	if err != nil {
		t.Fatal(err)
	}
	follower := e.Member((leader + 1) % len(e.Servers()))
	defer follower.Thaw()
	p := zktest.NewProxyT(t, follower.Servers()...)
	const timeout = 2 * time.Second
	s := sessiontest.ConnectTo(t, p.Servers(), "", session.WithSessionTimeout(timeout))
	raw := zktest.Conn(t, e.Member(leader).Servers(), 10*time.Second)

	// An ephemeral node shows on the leader when the session expires.
	ctx := ctxT(t, wait)
	node, err := zksession.Call(ctx, sessiontest.Core(s), func(c *zk.Conn) (string, error) {
		return c.Create("/lagging", nil, zk.FlagEphemeral, zk.WorldACL(zk.PermAll))
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ok, _, expired, err := raw.ExistsW(node)
	if err != nil || !ok {
		t.Fatalf("the session's node on the leader: %v, %v", ok, err)
	}
	var leaseEnd atomic.Int64
	lease := sessiontest.Core(s).LeaseContext()
	context.AfterFunc(lease, func() { leaseEnd.Store(time.Now().UnixNano()) })

	// Raise the delay in steps that keep go-zookeeper's reads less than two
	// thirds of the timeout apart (a sudden 1.2 s would leave a gap that
	// suspends the lease by itself), each step followed by a request
	// answered through it, until answers are 2.4 s behind their requests;
	// unless the lease ends first (the fix gives the connection up sooner).
	for lat := 200 * time.Millisecond; lat <= 1200*time.Millisecond && lease.Err() == nil; lat += 200 * time.Millisecond {
		p.SetLatency(lat)
		answered := make(chan error, 1)
		go func() {
			_, err := zksession.Call(ctx, sessiontest.Core(s), func(c *zk.Conn) (bool, error) {
				ok, _, err := c.Exists("/")
				return ok, err
			}, nil)
			answered <- err
		}()
		select {
		case <-answered:
		case <-lease.Done():
		case <-time.After(wait):
			t.Fatal("neither an answer nor the lease's end")
		}
	}
	if err := follower.Freeze(); err != nil {
		t.Fatal(err)
	}
	frozen := time.Now()
	var ev zk.Event
	select {
	case ev = <-expired:
	case <-time.After(wait):
		t.Fatal("the leader never expired the session")
	}
	gone := time.Now()
	if ev.Type != zk.EventNodeDeleted {
		t.Fatalf("watch on the session's node: %v", ev)
	}
	select {
	case <-lease.Done():
	case <-time.After(wait):
		t.Fatal("the lease never ended")
	}
	// AfterFunc runs on its own goroutine: wait for its record.
	zktest.Eventually(t, wait, func() bool { return leaseEnd.Load() != 0 }, "the lease end's time")
	end := time.Unix(0, leaseEnd.Load())
	t.Logf("freeze → expiry seen %v; lease ended %v after the freeze (%v)", gone.Sub(frozen), end.Sub(frozen), context.Cause(lease))
	if !end.Before(gone) {
		t.Fatalf("the lease ended %v after the leader expired the session", end.Sub(gone))
	}
}
