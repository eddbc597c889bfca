package zksession_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/zkrecipes/zkrecipes/internal/testkit/sessiontest"
	"github.com/zkrecipes/zkrecipes/session"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// TestStandardLeaseEndsAtDeadline: a connection reset followed by silence
// (the proxy refuses every new connection). Under Standard the lease context
// survives the reset and Suspended, and ends (ErrSuspended) at the deadline,
// two thirds of the session timeout after the send time of the newest
// answered request, while the server still has the session (its ephemeral
// node is there); once the proxy lets the client in again, a reconnection to
// the same session gives a new, live lease context.
func TestStandardLeaseEndsAtDeadline(t *testing.T) {
	const timeout = 6 * time.Second
	ns := zktest.NewNamespace(t)
	p := ns.Proxy(t)
	s := sessiontest.ConnectTo(t, p.Servers(), ns.Root, session.WithSessionTimeout(timeout))
	zs := sessiontest.Core(s)
	if got := zs.SessionTimeout(); got != timeout {
		t.Fatalf("negotiated session timeout %v, want %v", got, timeout)
	}
	rec := sessiontest.Record(t, s)
	eph := ns.Path("eph")
	if _, err := s.Conn().Create(eph, nil, zk.FlagEphemeral, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	ep, lease := zs.Epoch(), zs.LeaseContext()

	before := time.Now()
	answered(t, s)
	p.Refuse(true)
	p.Cut()
	cut := time.Now()
	rec.Wait(t, wait, session.Suspended)
	if err := context.Cause(lease); err != nil {
		t.Fatalf("lease ended at the reset, before its deadline: %v", err)
	}
	deadline := cut.Add(timeout * 2 / 3)
	select {
	case <-lease.Done():
	case <-time.After(time.Until(deadline) + 2*time.Second):
		t.Fatalf("lease still held %v after the reset (deadline %v)", time.Since(cut), timeout*2/3)
	}
	ended := time.Since(before)
	if !errors.Is(context.Cause(lease), session.ErrSuspended) {
		t.Fatalf("lease cause %v, want ErrSuspended", context.Cause(lease))
	}
	// Not before the deadline: the newest answered request was sent at
	// `before` or later.
	if ended < timeout*2/3 {
		t.Fatalf("lease ended %v after the last request, before its deadline %v", ended, timeout*2/3)
	}
	// Before the server could expire the session: its node is still there.
	_, st, err := ns.Conn(t).Exists(eph)
	if err != nil || st == nil || st.EphemeralOwner != ep.SessionID() {
		t.Fatalf("the session's node at the lease's end: %v, %v (session 0x%x)", st, err, ep.SessionID())
	}
	if ep.Err() != nil {
		t.Fatalf("epoch ended at the lease deadline: %v", ep.Err())
	}
	if c := zs.LeaseContext(); c.Err() == nil {
		t.Fatal("a lease taken after the deadline, while still disconnected, must be ended")
	}

	p.Refuse(false)
	ev := rec.Wait(t, wait, session.Reconnected)
	if ev.Epoch != ep {
		// Reconnected too late on a busy machine: the session expired.
		t.Logf("the session did not survive the refusal (reconnected at %v)", time.Since(before))
		return
	}
	if c := zs.LeaseContext(); c.Err() != nil || c == lease {
		t.Fatal("a lease taken after the reconnection must be live and new")
	}
}
