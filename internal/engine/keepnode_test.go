package engine_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/internal/engine"
	"github.com/zkrecipes/zkrecipes/internal/testkit/sessiontest"
	"github.com/zkrecipes/zkrecipes/session"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// TestKeepNodeUntilRelease: with WithKeepNodeUntilRelease, leases that ended
// at a suspension (EndAtDisconnect) keep their nodes after the connection is back; Release
// deletes one (synchronously with a live ctx, through the session's queue
// with a ctx already ended, without blocking), and Close deletes the node of
// an ended lease nobody released.
func TestKeepNodeUntilRelease(t *testing.T) {
	ns := zktest.NewNamespace(t)
	raw := ns.Conn(t)
	ctx := ctxT(t)
	s, p := sessiontest.ConnectProxy(t, ns, session.WithLossPolicy(session.EndAtDisconnect))
	in, err := engine.New(s, dir, engine.WithKeepNodeUntilRelease(true))
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	d := engine.Standard("lease-", 3)
	var ls []*engine.Lease
	for i := 0; i < 3; i++ {
		l, err := in.TryAcquire(ctx, d, []byte(fmt.Sprint(i)))
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
	}
	rec := sessiontest.Record(t, s)
	p.Cut()
	rec.Wait(t, wait, session.Suspended)
	for i, l := range ls {
		select {
		case <-l.Done():
		default:
			t.Fatalf("lease %d did not end at the suspension", i)
		}
		if !errors.Is(l.Err(), session.ErrSuspended) {
			t.Fatalf("lease %d ended with %v", i, l.Err())
		}
	}
	rec.Wait(t, wait, session.Reconnected)
	// A barrier: a guaranteed delete queued now is done after any the lease
	// monitors might have queued at the suspension (the engine's behaviour
	// without the option).
	marker, err := s.Path("/marker")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Conn().Create(marker, nil, zk.FlagEphemeral, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	sessiontest.Core(s).GuaranteedDelete(sessiontest.Core(s).Epoch(), marker, -1)
	zktest.Eventually(t, wait, func() bool { ok, _, _ := raw.Exists(marker); return !ok }, "the marker was not deleted")
	exists := func(l *engine.Lease) bool {
		ok, _, err := raw.Exists(l.Path())
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	for i, l := range ls {
		if !exists(l) {
			t.Fatalf("the node of ended lease %d was deleted before Release", i)
		}
	}

	if err := ls[0].Release(ctx); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if exists(ls[0]) {
		t.Error("Release of an ended lease left its node")
	}

	done, cancel := context.WithCancel(ctx)
	cancel()
	if err := ls[1].Release(done); err != nil {
		t.Fatalf("Release with an ended ctx: %v", err)
	}
	zktest.Eventually(t, wait, func() bool { return !exists(ls[1]) }, "Release with an ended ctx: the queue did not delete the node")

	in.Close()
	zktest.Eventually(t, wait, func() bool { return !exists(ls[2]) }, "Close left the node of an ended lease")
	if err := ls[2].Release(ctx); err != nil {
		t.Errorf("Release after Close: %v", err)
	}
	if kids := children(t, raw, ns); len(kids) != 0 {
		t.Errorf("nodes left: %v", kids)
	}
}

// TestKeepNodeUntilReleaseFixed: a fixed node that outlived its lease
// (WithKeepNodeUntilRelease; the lease ended at a suspension under
// EndAtDisconnect) is deleted by the lease's goroutine once Release
// is called, and Release returns its result; one nobody released goes at
// Close.
func TestKeepNodeUntilReleaseFixed(t *testing.T) {
	ns := zktest.NewNamespace(t)
	raw := ns.Conn(t)
	ctx := ctxT(t)
	s, p := sessiontest.ConnectProxy(t, ns, session.WithLossPolicy(session.EndAtDisconnect))
	in, err := engine.New(s, dir, engine.WithKeepNodeUntilRelease(true))
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	var ls []*engine.Lease
	for _, name := range []string{"a", "b"} {
		l, err := in.AcquireFixed(ctx, name, "x")
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
	}
	rec := sessiontest.Record(t, s)
	p.Cut()
	rec.Wait(t, wait, session.Suspended)
	rec.Wait(t, wait, session.Reconnected)
	for i, l := range ls {
		if !errors.Is(l.Err(), session.ErrSuspended) {
			t.Fatalf("lease %d: Err %v", i, l.Err())
		}
	}
	if err := ls[0].Release(ctx); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if ok, _, err := raw.Exists(ls[0].Path()); err != nil || ok {
		t.Errorf("after Release of an ended fixed lease: exists %v, %v", ok, err)
	}
	in.Close()
	if ok, _, err := raw.Exists(ls[1].Path()); err != nil || ok {
		t.Errorf("after Close: the ended fixed lease's node exists %v, %v", ok, err)
	}
	if err := ls[1].Release(ctx); err != nil {
		t.Errorf("Release after Close: %v", err)
	}
}
