package zksession_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/zkrecipes/zkrecipes/internal/testkit/sessiontest"
	"github.com/zkrecipes/zkrecipes/session"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// A short cut: Suspended, then Reconnected with the same session and epoch.
// A reconnection before the lease deadline keeps Standard leases (the same
// lease context goes on) and session-only ones; EndAtDisconnect leases end
// at Suspended, and a lease taken after Reconnected is a new one.
func TestShortCutSameSession(t *testing.T) {
	ns := zktest.NewNamespace(t)
	p := ns.Proxy(t)
	// One server address: go-zookeeper sleeps 1 s before reconnecting; the
	// lease deadline, 4 s after the request answered just before the cut,
	// leaves room for that.
	opt := session.WithSessionTimeout(6 * time.Second)
	s := sessiontest.ConnectTo(t, p.Servers(), ns.Root, opt)
	so := sessiontest.ConnectTo(t, p.Servers(), ns.Root, opt, session.WithLossPolicy(session.SessionOnly))
	sd := sessiontest.ConnectTo(t, p.Servers(), ns.Root, opt, session.WithLossPolicy(session.EndAtDisconnect))
	rec, recSO, recD := sessiontest.Record(t, s), sessiontest.Record(t, so), sessiontest.Record(t, sd)
	ep, epSO, epD := sessiontest.Core(s).Epoch(), sessiontest.Core(so).Epoch(), sessiontest.Core(sd).Epoch()
	lease, leaseSO, leaseD := sessiontest.Core(s).LeaseContext(), sessiontest.Core(so).LeaseContext(), sessiontest.Core(sd).LeaseContext()
	for _, x := range []*session.Session{s, so, sd} {
		answered(t, x)
	}

	p.Cut()
	sus := rec.Wait(t, wait, session.Suspended)
	if sus.Epoch != ep || sus.SessionID != ep.SessionID() {
		t.Fatalf("Suspended for %v, want %v", sus.Epoch, ep)
	}
	if err := context.Cause(lease); err != nil {
		t.Fatalf("standard lease ended at a reset, before its deadline: %v", err)
	}
	recSO.Wait(t, wait, session.Suspended)
	if err := context.Cause(leaseSO); err != nil {
		t.Fatalf("session-only lease canceled at Suspended: %v", err)
	}
	recD.Wait(t, wait, session.Suspended)
	if err := context.Cause(leaseD); !errors.Is(err, session.ErrSuspended) {
		t.Fatalf("end-at-disconnect lease cause at Suspended = %v", err)
	}
	if st := sd.State(); st == session.Suspended {
		if c := sessiontest.Core(sd).LeaseContext(); !errors.Is(context.Cause(c), session.ErrSuspended) {
			t.Fatalf("end-at-disconnect lease taken while suspended: cause %v", context.Cause(c))
		}
	}

	rc := rec.Wait(t, wait, session.Reconnected)
	if rc.Epoch != ep || rc.SessionID != ep.SessionID() || ep.Err() != nil {
		t.Fatalf("Reconnected with %v (err %v), want the same epoch %v", rc.Epoch, ep.Err(), ep)
	}
	if err := context.Cause(lease); err != nil {
		t.Fatalf("standard lease ended by a reset mended before its deadline: %v", err)
	}
	if c := sessiontest.Core(s).LeaseContext(); c != lease {
		t.Fatal("after a reconnection in time, a standard lease taken now must be the same interval's")
	}
	recSO.Wait(t, wait, session.Reconnected)
	if err := context.Cause(leaseSO); err != nil || epSO.Err() != nil {
		t.Fatalf("session-only lease ended by a short cut: %v / %v", err, epSO.Err())
	}
	recD.Wait(t, wait, session.Reconnected)
	for _, r := range []*sessiontest.Recorder{rec, recD} {
		if got := fmt.Sprint(r.States()); got != "[Suspended Reconnected]" {
			t.Fatalf("states %s", got)
		}
	}
	if c := sessiontest.Core(sd).LeaseContext(); c.Err() != nil || c == leaseD {
		t.Fatal("an end-at-disconnect lease taken after Reconnected must be live and new")
	}
	if !errors.Is(context.Cause(leaseD), session.ErrSuspended) || epD.Err() != nil {
		t.Fatal("the old end-at-disconnect lease must stay ended, its epoch live")
	}
	got, err := sessiontest.Core(s).WaitConnected(ctxT(t, time.Second))
	if err != nil || got != ep {
		t.Fatalf("WaitConnected = %v, %v", got, err)
	}
	got, lctx, err := sessiontest.Core(s).WaitLease(ctxT(t, time.Second))
	if err != nil || got != ep || lctx != lease || lctx.Err() != nil {
		t.Fatalf("WaitLease = %v, %v, %v", got, lctx, err)
	}
	got, lctx, err = sessiontest.Core(so).WaitLease(ctxT(t, time.Second))
	if err != nil || got != epSO || lctx != epSO.Context() {
		t.Fatalf("session-only WaitLease = %v, %v, %v", got, lctx, err)
	}
}

// answered makes a request of s and waits for its answer: the newest
// answered request's send time, from which the Standard lease deadline
// counts, is then at most now.
func answered(t *testing.T, s *session.Session) {
	t.Helper()
	if _, _, err := s.Conn().Exists("/"); err != nil {
		t.Fatalf("exists: %v", err)
	}
}

// A partition for three times the session timeout: Lost within the session
// timeout + 20 % while still partitioned; after heal, Reconnected with a new
// session and a new epoch.
func TestPartitionLostThenNewSession(t *testing.T) {
	for _, timeout := range []time.Duration{time.Second, 2 * time.Second} {
		t.Run(timeout.String(), func(t *testing.T) { testPartitionLost(t, timeout) })
	}
}

func testPartitionLost(t *testing.T, requested time.Duration) {
	ns := zktest.NewNamespace(t)
	p := ns.Proxy(t)
	s := sessiontest.ConnectTo(t, p.Servers(), ns.Root, session.WithSessionTimeout(requested))
	so := sessiontest.ConnectTo(t, p.Servers(), ns.Root, session.WithSessionTimeout(requested),
		session.WithLossPolicy(session.SessionOnly))
	rec, recSO := sessiontest.Record(t, s), sessiontest.Record(t, so)
	timeout := s.SessionTimeout()
	ep := sessiontest.Core(s).Epoch()
	leaseSO := sessiontest.Core(so).LeaseContext()
	ctx := ctxT(t, wait)
	dir := ns.Root + "/p"
	if err := sessiontest.Core(s).EnsureContainers(ctx, dir); err != nil {
		t.Fatal(err)
	}
	node, _, err := sessiontest.Core(s).CreateEphemeral(ctx, ep, dir+"/n", nil, 0)
	if err != nil {
		t.Fatal(err)
	}

	start := time.Now()
	p.Partition()
	sus := rec.Wait(t, wait, session.Suspended)
	recSO.Wait(t, wait, session.Suspended)
	if leaseSO.Err() != nil {
		t.Fatal("session-only lease ended at Suspended")
	}
	lost := rec.Wait(t, wait, session.Lost)
	healAt := time.Now() // still partitioned: we heal below
	latency := lost.At.Sub(start)
	t.Logf("negotiated timeout %v: Suspended after %v, Lost after %v (bound %v)",
		timeout, sus.At.Sub(start).Round(time.Millisecond), latency.Round(time.Millisecond), timeout*12/10)
	// The bound is the point: the local timer must declare Lost by the time
	// the server may expire the session. It counts from the last read before
	// the partition (minus a margin), so it is measured from the partition;
	// the 20 % is room for the timer's goroutine on a loaded machine (seen
	// here: Lost 950 ms after a 1 s partition began, with both cores busy).
	if latency > timeout*12/10 {
		t.Errorf("Lost %v after the partition, want within %v", latency, timeout*12/10)
	}
	if !lost.At.After(sus.At) || lost.Epoch != ep || !errors.Is(ep.Err(), session.ErrLost) {
		t.Fatalf("Lost %v (epoch %v, err %v) after Suspended %v", lost.At, lost.Epoch, ep.Err(), sus.At)
	}
	recSO.Wait(t, wait, session.Lost)
	if !errors.Is(context.Cause(leaseSO), session.ErrLost) {
		t.Fatalf("session-only lease cause at Lost = %v", context.Cause(leaseSO))
	}
	if c := sessiontest.Core(s).LeaseContext(); !errors.Is(context.Cause(c), session.ErrLost) {
		t.Fatalf("lease taken while lost: %v", context.Cause(c))
	}
	if c := sessiontest.Core(so).LeaseContext(); !errors.Is(context.Cause(c), session.ErrLost) {
		t.Fatalf("session-only lease taken while lost: %v", context.Cause(c))
	}
	if err := sessiontest.Core(s).Retry(ctx, ep, func(*zk.Conn) error { return nil }); !errors.Is(err, session.ErrLost) {
		t.Fatalf("Retry on a lost epoch: %v", err)
	}
	if _, _, err := sessiontest.Core(s).CreateEphemeral(ctx, ep, dir+"/m", nil, 0); !errors.Is(err, session.ErrLost) {
		t.Fatalf("CreateEphemeral on a lost epoch: %v", err)
	}

	// Hold the partition for three session timeouts in all.
	select {
	case <-time.After(time.Until(start.Add(3 * timeout))):
	case <-ctx.Done():
	}
	if healAt.After(start.Add(3 * timeout)) {
		t.Fatalf("Lost came after the partition should have ended")
	}
	p.Heal()
	rc := rec.Wait(t, wait, session.Reconnected)
	if rc.SessionID == ep.SessionID() || rc.Epoch == ep || rc.Epoch.Seq() != ep.Seq()+1 || rc.Epoch.Err() != nil {
		t.Fatalf("Reconnected with %v, want a new session after %v", rc.Epoch, ep)
	}
	if got := fmt.Sprint(rec.States()); got != "[Suspended Lost Reconnected]" {
		t.Fatalf("states %s", got)
	}
	if sessiontest.Core(s).Epoch() != rc.Epoch || sessiontest.Core(s).LeaseContext().Err() != nil {
		t.Fatal("current epoch / lease after Reconnected")
	}
	recSO.Wait(t, wait, session.Reconnected)
	raw := ns.Conn(t)
	if ok, _, err := raw.Exists(node); err != nil || ok {
		t.Fatalf("ephemeral of the expired session still exists: %v %v", ok, err)
	}
}

// Instant session kill: Lost, then Reconnected with a new id.
func TestInstantExpire(t *testing.T) {
	ns := zktest.NewNamespace(t)
	s, tap := sessiontest.ConnectTap(t, ns)
	rec := sessiontest.Record(t, s)
	ep := sessiontest.Core(s).Epoch()
	lease := sessiontest.Core(s).LeaseContext()
	creds := sessiontest.Expire(t, s, tap)
	if creds.ID != ep.SessionID() {
		t.Fatalf("expired 0x%x, epoch %v", creds.ID, ep)
	}
	lost := rec.Wait(t, wait, session.Lost)
	rc := rec.Wait(t, wait, session.Reconnected)
	if lost.Epoch != ep || rc.SessionID == ep.SessionID() || rc.Epoch.Seq() != 2 {
		t.Fatalf("Lost %v then Reconnected %v", lost.Epoch, rc.Epoch)
	}
	if seen := tap.Sessions(); len(seen) == 0 || seen[len(seen)-1].ID != rc.SessionID || s.Conn().SessionID() != rc.SessionID {
		t.Fatalf("new session 0x%x, tap saw %+v", rc.SessionID, seen)
	}
	if !errors.Is(context.Cause(lease), session.ErrSuspended) && !errors.Is(context.Cause(lease), session.ErrLost) {
		t.Fatalf("lease cause %v", context.Cause(lease))
	}
	t.Logf("states %v", rec.States())
}

// A standalone server killed and restarted: the session survives.
func TestServerRestartKeepsSession(t *testing.T) {
	srv := zktest.StartServerT(t)
	// The client reaches the server through a proxy that refuses it while
	// the server restarts: a standalone server accepts connections before it
	// has loaded its data and then neither answers nor closes them (its close
	// path throws a NullPointerException), and go-zookeeper waits 10 × ⅔ of
	// the session timeout in such a handshake. On a loaded machine a retry
	// lands in that window often enough to fail the test.
	px := zktest.NewProxyT(t, srv.Addr())
	s := sessiontest.ConnectTo(t, px.Servers(), "/restart", session.WithSessionTimeout(10*time.Second))
	rec := sessiontest.Record(t, s)
	ep := sessiontest.Core(s).Epoch()
	ctx := ctxT(t, wait)
	if err := sessiontest.Core(s).EnsureContainers(ctx, "/restart/d"); err != nil {
		t.Fatal(err)
	}
	node, _, err := sessiontest.Core(s).CreateEphemeral(ctx, ep, "/restart/d/n", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Kill(); err != nil {
		t.Fatal(err)
	}
	rec.Wait(t, wait, session.Suspended)
	px.Refuse(true)
	if err := srv.Restart(); err != nil { // returns once the server serves
		t.Fatal(err)
	}
	px.Refuse(false)
	rc := rec.Wait(t, wait, session.Reconnected)
	if rc.Epoch != ep || ep.Err() != nil {
		t.Fatalf("Reconnected with %v (err %v), want %v", rc.Epoch, ep.Err(), ep)
	}
	if got := fmt.Sprint(rec.States()); got != "[Suspended Reconnected]" {
		t.Fatalf("states %s", got)
	}
	err = sessiontest.Core(s).Retry(ctx, ep, func(c *zk.Conn) error {
		_, st, err := c.Get(node)
		if err == nil && st.EphemeralOwner != ep.SessionID() {
			return fmt.Errorf("owner 0x%x", st.EphemeralOwner)
		}
		return err
	})
	if err != nil {
		t.Fatalf("ephemeral after restart: %v", err)
	}
}

// 3-member ensemble, leader killed: Suspended, then Reconnected.
func TestEnsembleLeaderKilled(t *testing.T) {
	e := zktest.StartEnsembleT(t, 3)
	s := sessiontest.ConnectTo(t, e.Servers(), "/ens", session.WithSessionTimeout(8*time.Second))
	rec := sessiontest.Record(t, s)
	ep := sessiontest.Core(s).Epoch()
	leader, err := e.Leader()
	if err != nil {
		t.Fatal(err)
	}
	// Followers drop their clients when they lose the leader, so the client
	// is cut off wherever it is connected.
	if err := e.Member(leader).Kill(); err != nil {
		t.Fatal(err)
	}
	rec.Wait(t, wait, session.Suspended)
	rc := rec.Wait(t, wait, session.Reconnected)
	t.Logf("states %v, epoch %v -> %v", rec.States(), ep, rc.Epoch)
	if rc.Epoch != ep || ep.Err() != nil {
		t.Fatalf("Reconnected with %v, want the same session %v", rc.Epoch, ep)
	}
	ctx := ctxT(t, wait)
	if err := sessiontest.Core(s).EnsureContainers(ctx, "/ens/after"); err != nil {
		t.Fatal(err)
	}
}

// A subscriber sees every transition in order while the proxy flaps the
// connection many times; a subscriber that reads nothing until the end sees
// the same, and neither stalls the session.
func TestSubscribersSeeEveryFlap(t *testing.T) {
	const flaps = 25
	ns := zktest.NewNamespace(t)
	p := ns.Proxy(t)
	s := sessiontest.ConnectTo(t, times3(p.Addr()), ns.Root)
	fast := sessiontest.Record(t, s)
	slow := s.Subscribe()
	defer slow.Close()
	if in := slow.Initial(); in.State != session.Connected || in.SessionID != s.SessionID() {
		t.Fatalf("initial %+v", in)
	}
	ep := sessiontest.Core(s).Epoch()
	for i := 0; i < flaps; i++ {
		p.Cut()
		fast.Wait(t, wait, session.Suspended)
		fast.Wait(t, wait, session.Reconnected)
	}
	var want []session.State
	for i := 0; i < flaps; i++ {
		want = append(want, session.Suspended, session.Reconnected)
	}
	if got := fast.States(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("fast subscriber: %v", got)
	}
	deadline := time.After(wait)
	var got []session.Event
	for len(got) < len(want) {
		select {
		case ev := <-slow.C():
			got = append(got, ev)
		case <-deadline:
			t.Fatalf("slow subscriber got %d of %d events", len(got), len(want))
		}
	}
	if fmt.Sprint(states(got)) != fmt.Sprint(want) {
		t.Fatalf("slow subscriber: %v", states(got))
	}
	fe := fast.Events()
	for i, ev := range got {
		if ev.SessionID != ep.SessionID() || ev.At != fe[i].At || (i > 0 && ev.At.Before(got[i-1].At)) {
			t.Fatalf("event %d: %+v vs %+v", i, ev, fe[i])
		}
	}
	// Closing: a reader sees Closed, then its channel closes.
	closed := make(chan []session.Event, 1)
	go func() {
		var evs []session.Event
		for ev := range slow.C() {
			evs = append(evs, ev)
		}
		closed <- evs
	}()
	s.Close()
	if evs := <-closed; fmt.Sprint(states(evs)) != "[Closed]" {
		t.Fatalf("after Close: %v", states(evs))
	}
	fast.Wait(t, wait, session.Closed)
	if sub := s.Subscribe(); sub.Initial().State != session.Closed {
		t.Fatal("subscribe after close")
	} else if _, ok := <-sub.C(); ok {
		t.Fatal("subscription after close delivers")
	}
}

// Close while the client is reconnecting through a partition returns, ends
// everything, and leaks nothing (zktest.Main checks goroutines at the end).
func TestCloseDuringReconnect(t *testing.T) {
	ns := zktest.NewNamespace(t)
	p := ns.Proxy(t)
	s := sessiontest.ConnectTo(t, p.Servers(), ns.Root, session.WithSessionTimeout(4*time.Second))
	rec := sessiontest.Record(t, s)
	ep := sessiontest.Core(s).Epoch()
	p.Partition()
	rec.Wait(t, wait, session.Suspended)
	// Wait until go-zookeeper is in a handshake with the silent proxy (after
	// its one-second pause), the case where it would otherwise block longest.
	zktest.Eventually(t, wait, func() bool { return p.Conns() == 0 }, "old connection still open")
	zktest.Eventually(t, wait, func() bool { return p.Conns() >= 1 }, "no reconnect attempt")
	waiter := make(chan error, 1)
	go func() {
		_, err := sessiontest.Core(s).WaitConnected(context.Background())
		waiter <- err
	}()
	start := time.Now()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	t.Logf("Close while reconnecting took %v", time.Since(start).Round(time.Millisecond))
	if err := <-waiter; !errors.Is(err, session.ErrClosed) {
		t.Fatalf("WaitConnected: %v", err)
	}
	if !errors.Is(ep.Err(), session.ErrClosed) {
		t.Fatalf("epoch: %v", ep.Err())
	}
	rec.Wait(t, wait, session.Closed)
	select {
	case <-s.Done():
	default:
		t.Fatal("Done not closed")
	}
}
