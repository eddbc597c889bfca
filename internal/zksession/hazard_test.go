package zksession_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/zkrecipes/zkrecipes/internal/testkit/sessiontest"
	"github.com/zkrecipes/zkrecipes/session"
	"github.com/zkrecipes/zkrecipes/zktest"
)

type createResult struct {
	path string
	err  error
}

// The epoch hazard (HAZARDS.md): with three server addresses, a request that
// go-zookeeper queued during a partition that outlasts the session runs on
// the NEW session after the reconnect and succeeds. Reproduced here with a
// raw create, and shown harmless through CreateEphemeral: the caller gets an
// error and no stray node remains.
func TestEpochHazard(t *testing.T) {
	e := zktest.StartEnsembleT(t, 3)
	var proxies []*zktest.Proxy
	var addrs []string
	for _, srv := range e.Servers() {
		p := zktest.NewProxyT(t, srv)
		proxies = append(proxies, p)
		addrs = append(addrs, p.Addr())
	}
	raw := zktest.Conn(t, e.Servers(), 10*time.Second)
	// A client on each member, to see each member's own view.
	var members []*zk.Conn
	for _, srv := range e.Servers() {
		members = append(members, zktest.Conn(t, []string{srv}, 10*time.Second))
	}
	for _, p := range []string{"/hz", "/hz/locks"} {
		if _, err := raw.Create(p, nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
			t.Fatal(err)
		}
	}
	logOpt, logs := observed(t)
	// The timeout leaves room, between Suspended (⅔ of it) and the local Lost,
	// for go-zookeeper's one-second pause before it retries the first server.
	s := sessiontest.ConnectTo(t, addrs, "/hz", session.WithSessionTimeout(8*time.Second), logOpt)
	rec := sessiontest.Record(t, s)
	ep := sessiontest.Core(s).Epoch()
	ctx := ctxT(t, 2*wait)
	marker, _, err := sessiontest.Core(s).CreateEphemeral(ctx, ep, "/hz/locks/marker", nil, 0)
	if err != nil {
		t.Fatal(err)
	}

	k := -1
	for i, p := range proxies {
		if p.Conns() > 0 {
			k = i
		}
	}
	if k < 0 {
		t.Fatal("no proxy carries the session")
	}
	// go-zookeeper reconnects to the next address, the one after, then (after
	// a pause and after failing every queued request with ErrNoServer) to the
	// address it lost. Refuse the others, so that this round is quick, and
	// silence the one in use.
	for i, p := range proxies {
		if i != k {
			p.Refuse(true)
		}
	}
	proxies[k].Partition()
	rec.Wait(t, wait, session.Suspended)
	zktest.Eventually(t, wait, func() bool { return proxies[k].Conns() == 0 }, "old connection still open")
	zktest.Eventually(t, wait, func() bool { return proxies[k].Conns() >= 1 }, "no handshake on the partitioned proxy")
	// Now go-zookeeper waits on a silent handshake; requests made now stay
	// queued until the next session.
	if err := ep.Err(); err != nil {
		t.Fatalf("epoch ended before the requests could be queued: %v", err)
	}
	rawRes := make(chan createResult, 1)
	go func() {
		p, err := s.Conn().Create("/hz/locks/raw", nil, zk.FlagEphemeral, zk.WorldACL(zk.PermAll))
		rawRes <- createResult{p, err}
	}()
	safeRes := make(chan createResult, 1)
	go func() {
		p, _, err := sessiontest.Core(s).CreateEphemeral(ctx, ep, "/hz/locks/safe", nil, 0)
		safeRes <- createResult{p, err}
	}()

	lost := rec.Wait(t, wait, session.Lost)
	var safe createResult
	select {
	case safe = <-safeRes:
	case <-time.After(wait):
		t.Fatal("CreateEphemeral did not return at Lost")
	}
	if safe.err == nil || !errors.Is(safe.err, session.ErrLost) {
		t.Fatalf("CreateEphemeral during the partition: %q, %v; want ErrLost", safe.path, safe.err)
	}
	t.Logf("CreateEphemeral returned at Lost: %v", safe.err)
	// The server expires the session: its ephemeral goes, on every member.
	// A member that applies the expiry only after the client has come back
	// to it with the old session id closes that connection unanswered
	// (CancelledKeyException in its log); the client then has one address
	// fewer to get "expired" and then a new session from, comes round to
	// the partitioned address and fails the queued raw create with
	// ErrNoServer. So the heal below waits until no member can still do it.
	zktest.Eventually(t, wait, func() bool {
		for _, c := range members {
			if ok, _, err := c.Exists(marker); err != nil || ok {
				return false
			}
		}
		return true
	}, "the members did not all expire the session")
	t.Logf("server expired the session %v after the local Lost", time.Since(lost.At).Round(time.Millisecond))

	// Heal the refusing proxies first and the partitioned one last: healing
	// it closes the silent handshake, and the client at once tries the next
	// addresses; were they still refusing, it would come round to the first
	// address again and fail the queued raw create with ErrNoServer (seen on
	// a loaded machine when the partitioned proxy was not the last one).
	for i, p := range proxies {
		if i != k {
			p.Heal()
		}
	}
	proxies[k].Heal()
	rc := rec.Wait(t, wait, session.Reconnected)
	if rc.SessionID == ep.SessionID() {
		t.Fatalf("same session after expiry")
	}
	if got := fmt.Sprint(rec.States()); got != "[Suspended Lost Reconnected]" {
		t.Fatalf("states %s", got)
	}

	// The hazard: the raw create ran on the new session.
	var r createResult
	select {
	case r = <-rawRes:
	case <-time.After(wait):
		t.Fatal("raw create did not return")
	}
	if r.err != nil {
		t.Fatalf("hazard not reproduced: the queued raw create failed: %v", r.err)
	}
	// raw is connected to any member, maybe one that has not applied the
	// create yet (ZooKeeper promises other clients no more than sequential
	// consistency): Sync makes it catch up with the leader first.
	if _, err := raw.Sync(r.path); err != nil {
		t.Fatal(err)
	}
	_, st, err := raw.Get(r.path)
	if err != nil || st.EphemeralOwner != rc.SessionID {
		t.Fatalf("raw node: %v, owner %v", err, st)
	}
	t.Logf("hazard reproduced: a create issued on session 0x%x ran on session 0x%x", ep.SessionID(), st.EphemeralOwner)

	// Harmless through CreateEphemeral: the node was created on the new
	// session too, then found and deleted.
	zktest.Eventually(t, wait, func() bool {
		return logged(logs, "create ran on another session; node deleted", "node", "/hz/locks/safe")
	}, "CreateEphemeral's node was not undone")
	if _, err := raw.Sync("/hz/locks"); err != nil { // the delete too, as above
		t.Fatal(err)
	}
	if ok, _, err := raw.Exists("/hz/locks/safe"); err != nil || ok {
		t.Fatalf("stray node: %v %v", ok, err)
	}
	children, _, err := raw.Children("/hz/locks")
	if err != nil || fmt.Sprint(children) != "[raw]" {
		t.Fatalf("children %v %v", children, err)
	}
}
