package barrier_test

import (
	"context"
	"errors"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/internal/testkit/sessiontest"
	"github.com/zkrecipes/zkrecipes/recipes"
	"github.com/zkrecipes/zkrecipes/recipes/barrier"
	"github.com/zkrecipes/zkrecipes/session"
	"github.com/zkrecipes/zkrecipes/zktest"
)

var memberNode = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

// Three members: the first two wait in Enter until the third enters; their
// nodes are ephemeral UUIDs and "ready" appears; a member that leaves first
// has its node deleted at once and waits until the last has left; then
// nothing is left, "ready" included, and the barrier works again.
func TestDoubleEnterAndLeave(t *testing.T) {
	ns := zktest.NewNamespace(t)
	raw := ns.Conn(t)
	ctx := ctxT(t)
	var ds []*barrier.DoubleBarrier
	for i := 0; i < 3; i++ {
		ds = append(ds, newDouble(t, sessiontest.Connect(t, ns), 3, barrier.WithID("member")))
	}
	for round := 0; round < 2; round++ {
		e0 := async(func() error { return ds[0].Enter(ctx) })
		e1 := async(func() error { return ds[1].Enter(ctx) })
		waitMembers(t, raw, ns, 2)
		pending(t, "Enter", e0, e1)
		for _, k := range kids(t, raw, ns) {
			data, st, err := raw.Get(ns.Path(bpath + "/" + k))
			if !memberNode.MatchString(k) || err != nil || st.EphemeralOwner == 0 || string(data) != "member" {
				t.Fatalf("member node %q (%+v, %v): want an ephemeral UUID", k, st, err)
			}
		}
		if err := ds[2].Enter(ctx); err != nil {
			t.Fatal(err)
		}
		returned(t, "Enter", e0, e1)
		if ok, _, _ := raw.Exists(ns.Path(bpath + "/ready")); !ok {
			t.Fatal("no ready node after the barrier opened")
		}
		if err := ds[0].Enter(ctx); err != nil { // entered already: at once
			t.Fatal(err)
		}
		l0 := async(func() error { return ds[0].Leave(ctx) })
		waitMembers(t, raw, ns, 2)
		l1 := async(func() error { return ds[1].Leave(ctx) })
		waitMembers(t, raw, ns, 1)
		pending(t, "Leave", l0, l1)
		if err := ds[2].Leave(ctx); err != nil {
			t.Fatal(err)
		}
		returned(t, "Leave", l0, l1)
		if k := kids(t, raw, ns); len(k) != 0 {
			t.Fatalf("round %d left %v", round, k)
		}
	}
	zktest.Eventually(t, wait, func() bool {
		ok, _, err := raw.Exists(ns.Path(bpath))
		return err == nil && !ok
	}, "the server reaps the empty directory, a container")
}

// A member whose session is lost while the others wait in Enter is no
// longer counted: its Enter fails with ErrLost and its node goes; the
// barrier opens only when enough live members have entered.
func TestDoubleMemberLostInEnter(t *testing.T) {
	ns := zktest.NewNamespace(t)
	raw := ns.Conn(t)
	ctx := ctxT(t)
	sa, p := sessiontest.ConnectProxy(t, ns)
	rec := sessiontest.Record(t, sa)
	a := newDouble(t, sa, 3)
	b := newDouble(t, sessiontest.Connect(t, ns), 3)
	ea := async(func() error { return a.Enter(ctx) })
	eb := async(func() error { return b.Enter(ctx) })
	waitMembers(t, raw, ns, 2)
	p.Partition()
	rec.Wait(t, wait, session.Lost)
	if err := sessiontest.Recv(t, ea, wait, "the lost member's Enter"); !errors.Is(err, session.ErrLost) {
		t.Fatalf("the lost member's Enter = %v, want ErrLost", err)
	}
	waitMembers(t, raw, ns, 1) // the server expired its session
	c := newDouble(t, sessiontest.Connect(t, ns), 3)
	ec := async(func() error { return c.Enter(ctx) })
	waitMembers(t, raw, ns, 2)
	pending(t, "Enter", eb, ec)
	p.Heal()
	if err := a.Enter(ctx); err != nil { // joins again on its new session: the third
		t.Fatal(err)
	}
	returned(t, "Enter", eb, ec)
}

// A member whose session is lost while the others wait in Leave has left:
// its node goes with its session and the others' Leave returns.
func TestDoubleMemberLostInLeave(t *testing.T) {
	ns := zktest.NewNamespace(t)
	raw := ns.Conn(t)
	ctx := ctxT(t)
	sa, p := sessiontest.ConnectProxy(t, ns)
	rec := sessiontest.Record(t, sa)
	a := newDouble(t, sa, 2)
	b := newDouble(t, sessiontest.Connect(t, ns), 2)
	ea := async(func() error { return a.Enter(ctx) })
	if err := b.Enter(ctx); err != nil {
		t.Fatal(err)
	}
	if err := sessiontest.Recv(t, ea, wait, "Enter"); err != nil {
		t.Fatal(err)
	}
	lb := async(func() error { return b.Leave(ctx) })
	waitMembers(t, raw, ns, 1)
	pending(t, "Leave", lb)
	p.Partition()
	rec.Wait(t, wait, session.Lost)
	if err := sessiontest.Recv(t, lb, wait, "Leave after the other member's loss"); err != nil {
		t.Fatal(err)
	}
	p.Heal()
	if err := a.Leave(ctx); err != nil { // nothing left to wait for
		t.Fatal(err)
	}
	if k := kids(t, raw, ns); len(k) != 0 {
		t.Fatalf("left %v", k)
	}
}

// A connection cut shorter than the session timeout, while a member waits
// in Enter, keeps its node and its wait: the barrier opens for it.
func TestDoubleCutDuringEnter(t *testing.T) {
	ns := zktest.NewNamespace(t)
	raw := ns.Conn(t)
	ctx := ctxT(t)
	sa, p := sessiontest.ConnectProxy(t, ns)
	rec := sessiontest.Record(t, sa)
	a := newDouble(t, sa, 2)
	ea := async(func() error { return a.Enter(ctx) })
	waitMembers(t, raw, ns, 1)
	p.Cut()
	rec.Wait(t, wait, session.Suspended)
	rec.Wait(t, wait, session.Reconnected)
	pending(t, "Enter", ea)
	if err := newDouble(t, sessiontest.Connect(t, ns), 2).Enter(ctx); err != nil {
		t.Fatal(err)
	}
	if err := sessiontest.Recv(t, ea, wait, "Enter after the cut"); err != nil {
		t.Fatal(err)
	}
}

// An Enter canceled by ctx, or ended by Close, deletes its member node
// before it returns; a closed member's later calls fail with ErrClosed, and
// Close of an entered member deletes its node.
func TestDoubleCancelAndClose(t *testing.T) {
	ns := zktest.NewNamespace(t)
	raw := ns.Conn(t)
	ctx := ctxT(t)
	s := sessiontest.Connect(t, ns)
	a := newDouble(t, s, 2)
	cctx, cancel := context.WithCancel(ctx)
	ea := async(func() error { return a.Enter(cctx) })
	waitMembers(t, raw, ns, 1)
	cancel()
	if err := sessiontest.Recv(t, ea, wait, "Enter at cancel"); !errors.Is(err, context.Canceled) {
		t.Fatalf("Enter at cancel = %v", err)
	}
	waitMembers(t, raw, ns, 0) // deleted within the grace, or just after
	ea = async(func() error { return a.Enter(ctx) })
	waitMembers(t, raw, ns, 1)
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if err := sessiontest.Recv(t, ea, wait, "Enter at Close"); !errors.Is(err, session.ErrClosed) {
		t.Fatalf("Enter at Close = %v", err)
	}
	waitMembers(t, raw, ns, 0)
	if err := a.Leave(ctx); !errors.Is(err, session.ErrClosed) {
		t.Fatalf("Leave after Close = %v", err)
	}
	b := newDouble(t, s, 1)
	if err := b.Enter(ctx); err != nil {
		t.Fatal(err)
	}
	waitMembers(t, raw, ns, 1)
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if n := members(t, raw, ns); n != 0 {
		t.Fatalf("%d member nodes after Close of an entered member", n)
	}
	// Leave waiting for another member ends at Close too.
	c := newDouble(t, s, 1)
	d := newDouble(t, sessiontest.Connect(t, ns), 1)
	if err := c.Enter(ctx); err != nil {
		t.Fatal(err)
	}
	if err := d.Enter(ctx); err != nil {
		t.Fatal(err)
	}
	lc := async(func() error { return c.Leave(ctx) })
	waitMembers(t, raw, ns, 1)
	c.Close()
	if err := sessiontest.Recv(t, lc, wait, "Leave at Close"); !errors.Is(err, session.ErrClosed) {
		t.Fatalf("Leave at Close = %v", err)
	}
}

// The member node's create has its reply swallowed: Enter adopts the node
// it made (owned by its session) and does not make a second one.
func TestDoubleGhostCreate(t *testing.T) {
	ns := zktest.NewNamespace(t)
	raw := ns.Conn(t)
	ctx := ctxT(t)
	s, p := sessiontest.ConnectProxy(t, ns, session.WithLossPolicy(session.SessionOnly))
	var hit atomic.Int32
	dir := ns.Path(bpath) + "/"
	p.OnRequest(func(r zktest.Request) zktest.Action {
		if r.Op == zktest.OpCreate && len(r.Path) > len(dir) && r.Path[:len(dir)] == dir && r.Path != dir+"ready" && hit.Add(1) == 1 {
			return zktest.SwallowReply
		}
		return zktest.Forward
	})
	a := newDouble(t, s, 2)
	ea := async(func() error { return a.Enter(ctx) })
	waitMembers(t, raw, ns, 1)
	if err := newDouble(t, sessiontest.Connect(t, ns), 2).Enter(ctx); err != nil {
		t.Fatal(err)
	}
	if err := sessiontest.Recv(t, ea, wait, "Enter"); err != nil {
		t.Fatal(err)
	}
	if hit.Load() == 0 {
		t.Fatal("the create was never seen")
	}
	owners := map[int64]int{}
	for _, k := range kids(t, raw, ns) {
		if k == "ready" {
			continue
		}
		_, st, err := raw.Get(ns.Path(bpath + "/" + k))
		if err != nil {
			t.Fatal(err)
		}
		owners[st.EphemeralOwner]++
	}
	if owners[s.SessionID()] != 1 || len(owners) != 2 {
		t.Fatalf("member nodes by owner %v; want one of ours (%x)", owners, s.SessionID())
	}
}

// A member node deleted by someone else ends the member's Enter with
// ErrNodeDeleted.
func TestDoubleNodeDeleted(t *testing.T) {
	ns := zktest.NewNamespace(t)
	raw := ns.Conn(t)
	ctx := ctxT(t)
	a := newDouble(t, sessiontest.Connect(t, ns), 2)
	ea := async(func() error { return a.Enter(ctx) })
	waitMembers(t, raw, ns, 1)
	if err := raw.Delete(ns.Path(bpath+"/"+kids(t, raw, ns)[0]), -1); err != nil {
		t.Fatal(err)
	}
	if err := sessiontest.Recv(t, ea, wait, "Enter"); !errors.Is(err, recipes.ErrNodeDeleted) {
		t.Fatalf("Enter = %v, want ErrNodeDeleted", err)
	}
}

// A member's own session is lost while it waits in Leave: Leave goes on on
// the new session and returns once the others have left. A member that
// never entered only waits in Leave. More members than the threshold may
// enter.
func TestDoubleLeaveAcrossOwnLoss(t *testing.T) {
	ns := zktest.NewNamespace(t)
	raw := ns.Conn(t)
	ctx := ctxT(t)
	sa, p := sessiontest.ConnectProxy(t, ns)
	rec := sessiontest.Record(t, sa)
	a := newDouble(t, sa, 1)
	b := newDouble(t, sessiontest.Connect(t, ns), 1)
	for _, d := range []*barrier.DoubleBarrier{a, b} { // a threshold of 1: both enter
		if err := d.Enter(ctx); err != nil {
			t.Fatal(err)
		}
	}
	waitMembers(t, raw, ns, 2)
	la := async(func() error { return a.Leave(ctx) })
	waitMembers(t, raw, ns, 1)
	outsider := newDouble(t, sessiontest.Connect(t, ns), 1)
	lo := async(func() error { return outsider.Leave(ctx) })
	p.Partition()
	rec.Wait(t, wait, session.Lost)
	pending(t, "Leave", la, lo)
	p.Heal()
	rec.Wait(t, wait, session.Reconnected)
	pending(t, "Leave", la, lo)
	if err := b.Leave(ctx); err != nil {
		t.Fatal(err)
	}
	returned(t, "Leave", la, lo)
}

// A member's calls run one at a time: a Leave called while its Enter waits
// starts only after the Enter has returned (here: canceled), so it never
// deletes the node of a pending Enter.
func TestDoubleCallsInTurn(t *testing.T) {
	ns := zktest.NewNamespace(t)
	raw := ns.Conn(t)
	ctx := ctxT(t)
	a := newDouble(t, sessiontest.Connect(t, ns), 3)
	cctx, cancel := context.WithCancel(ctx)
	ea := async(func() error { return a.Enter(cctx) })
	waitMembers(t, raw, ns, 1)
	la := async(func() error { return a.Leave(ctx) })
	other := newDouble(t, sessiontest.Connect(t, ns), 3)
	eo := async(func() error { return other.Enter(ctx) })
	waitMembers(t, raw, ns, 2)
	pending(t, "Leave", la)
	cancel()
	if err := sessiontest.Recv(t, ea, wait, "Enter at cancel"); !errors.Is(err, context.Canceled) {
		t.Fatalf("Enter = %v", err)
	}
	pending(t, "Leave (waits for the other member)", la)
	other.Close()
	if err := sessiontest.Recv(t, eo, wait, "Enter at Close"); !errors.Is(err, session.ErrClosed) {
		t.Fatalf("Enter = %v", err)
	}
	if err := sessiontest.Recv(t, la, wait, "Leave"); err != nil {
		t.Fatal(err)
	}
}

// A member whose Leave ends (ctx, or Close) while its connection is
// partitioned, before its node is deleted, still leaves: once the
// connection is back the session deletes the node, and the other member's
// Leave returns without this one calling Leave again.
func TestDoubleLeaveEndsWhileCut(t *testing.T) {
	t.Run("ctx", func(t *testing.T) { testLeaveEndsWhileCut(t, false) })
	t.Run("close", func(t *testing.T) { testLeaveEndsWhileCut(t, true) })
}

func testLeaveEndsWhileCut(t *testing.T, closeIt bool) {
	ns := zktest.NewNamespace(t)
	raw := ns.Conn(t)
	ctx := ctxT(t)
	s, p := sessiontest.ConnectProxy(t, ns, session.WithSessionTimeout(20*time.Second))
	a := newDouble(t, s, 2)
	b := newDouble(t, sessiontest.Connect(t, ns), 2)
	ea := async(func() error { return a.Enter(ctx) })
	if err := b.Enter(ctx); err != nil {
		t.Fatal(err)
	}
	if err := sessiontest.Recv(t, ea, wait, "Enter"); err != nil {
		t.Fatal(err)
	}
	// The member's delete is dropped, and the connection stays down.
	dir := ns.Path(bpath) + "/"
	cut := make(chan struct{})
	var hit atomic.Int32
	p.OnRequest(func(r zktest.Request) zktest.Action {
		if zktest.OpName(r.Op) == "delete" && strings.HasPrefix(r.Path, dir) && hit.Add(1) == 1 {
			p.Partition()
			close(cut)
			return zktest.DropRequest
		}
		return zktest.Forward
	})
	defer p.Heal()
	if closeIt {
		la := async(func() error { return a.Leave(ctx) })
		sessiontest.Recv(t, cut, wait, "the member's delete")
		pending(t, "Leave while partitioned", la)
		if err := a.Close(); err != nil {
			t.Fatal(err)
		}
		if err := sessiontest.Recv(t, la, wait, "Leave at Close"); !errors.Is(err, session.ErrClosed) {
			t.Fatalf("Leave at Close = %v, want ErrClosed", err)
		}
	} else {
		short, cancel := context.WithTimeout(ctx, 2*time.Second)
		err := a.Leave(short)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Leave while partitioned = %v, want DeadlineExceeded", err)
		}
		select {
		case <-cut:
		default:
			t.Fatal("the member's delete was never seen")
		}
	}
	p.Heal()
	if err := sessiontest.Recv(t, async(func() error { return b.Leave(ctx) }), wait, "the other member's Leave"); err != nil {
		t.Fatal(err)
	}
	if n := members(t, raw, ns); n != 0 {
		t.Fatalf("%d member nodes after both left (%v)", n, kids(t, raw, ns))
	}
	if !closeIt {
		if err := a.Leave(ctx); err != nil { // left already: only waits
			t.Fatalf("Leave again: %v", err)
		}
	}
}
