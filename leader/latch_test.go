package leader_test

import (
	"context"
	"errors"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/internal/testkit/sessiontest"
	"github.com/zkrecipes/zkrecipes/leader"
	"github.com/zkrecipes/zkrecipes/recipes"
	"github.com/zkrecipes/zkrecipes/session"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// latchNode is Curator's LeaderLatch node name.
var latchNode = regexp.MustCompile(`^_c_[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}-latch-\d{10}$`)

func TestLatchSingle(t *testing.T) {
	ns := zktest.NewNamespace(t)
	s := sessiontest.Connect(t, ns)
	conn := ns.Conn(t)
	l := startLatch(t, s, "solo")
	term := await(t, l)
	if !l.IsLeader() || l.Term() != term {
		t.Fatalf("IsLeader %v Term %v, want the awaited term", l.IsLeader(), l.Term())
	}
	if !latchNode.MatchString(term.Node()) {
		t.Errorf("node name %q is not Curator's LeaderLatch layout", term.Node())
	}
	if want := ns.Root + electionPath + "/" + term.Node(); leader.TermPath(term) != want {
		t.Errorf("Path %q, want %q", leader.TermPath(term), want)
	}
	checkTermNode(t, conn, s, term)
	if got, ok := leader.TermFromContext(term.Context()); !ok || got != term {
		t.Errorf("TermFromContext = %v, %v", got, ok)
	}
	if err := l.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if !ended(term) {
		t.Fatal("term not ended when Close returned")
	}
	if !errors.Is(term.Err(), session.ErrClosed) || !errors.Is(context.Cause(term.Context()), session.ErrClosed) {
		t.Fatalf("term Err %v, want ErrClosed", term.Err())
	}
	if l.IsLeader() || l.Term() != nil {
		t.Fatal("still leader after Close")
	}
	if kids := children(t, conn, ns); len(kids) != 0 {
		t.Fatalf("children after Close: %v", kids)
	}
}

// Three participants; the leader closes; another leads; the old term's Done
// fired first. Repeated until one is left.
func TestLatchFailoverOnClose(t *testing.T) {
	ns := zktest.NewNamespace(t)
	conn := ns.Conn(t)
	log := newTermLog(t)
	var alive []*leader.Latch
	for _, id := range []string{"p0", "p1", "p2"} {
		l := startLatch(t, sessiontest.Connect(t, ns), id)
		log.follow(t, id, l)
		alive = append(alive, l)
	}
	// Start does not block: wait until every participant's node exists on
	// the server before closing anyone, or a late node makes the count below
	// (and the failover order) depend on scheduling.
	waitChildren(t, conn, ns, len(alive))
	for len(alive) > 1 {
		i := oneLeader(t, alive)
		old := alive[i].Term()
		if old == nil {
			t.Fatal("leader without a term")
		}
		if err := alive[i].Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		if !ended(old) {
			t.Fatal("old term's Done not closed when Close returned")
		}
		if !errors.Is(old.Err(), session.ErrClosed) {
			t.Errorf("old term Err %v, want ErrClosed", old.Err())
		}
		alive = append(alive[:i], alive[i+1:]...)
		j := oneLeader(t, alive)
		nt := alive[j].Term()
		if nt == nil || nt == old {
			t.Fatalf("new term %v", nt)
		}
		ro, rn := log.waitPair(t, old, nt)
		if !ro.end.Before(rn.start) {
			t.Errorf("old term ended %v, new term began %v: not in order", ro.end, rn.start)
		}
		if nt.Token() <= old.Token() {
			t.Errorf("fencing token did not grow: %d then %d", old.Token(), nt.Token())
		}
		// Close returns after the closed participant's node is deleted, and
		// the others' nodes all existed before: the count is exact now.
		if kids := children(t, conn, ns); len(kids) != len(alive) || slices.Contains(kids, old.Node()) {
			t.Errorf("%d children for %d participants (closed node %s): %v", len(kids), len(alive), old.Node(), kids)
		}
		t.Logf("%s closed, %s leads %v after the old term ended", leader.TermID(old), leader.TermID(nt), rn.start.Sub(ro.end))
	}
	log.checkNoOverlap(t)
}

func TestLatchParticipants(t *testing.T) {
	ns := zktest.NewNamespace(t)
	s0 := sessiontest.Connect(t, ns)
	ctx := ctxT(t)
	var ls []*leader.Latch
	var sess []*session.Session
	ids := []string{"p0", "p1", "p2 ünïcode"}
	for i, id := range ids {
		s := sessiontest.Connect(t, ns)
		l := startLatch(t, s, id)
		ls, sess = append(ls, l), append(sess, s)
		zktest.Eventually(t, wait, func() bool {
			ps, err := leader.Participants(ctx, s0, electionPath)
			return err == nil && len(ps) == i+1
		}, "participant %s registered", id)
	}
	await(t, ls[0])
	check := func(name string, ps []recipes.Participant, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(ps) != len(ids) {
			t.Fatalf("%s: %d participants: %+v", name, len(ps), ps)
		}
		for i, p := range ps {
			if p.ID != ids[i] || p.Holds != (i == 0) || !latchNode.MatchString(p.Node) {
				t.Errorf("%s: participant %d = %+v, want id %q leader %v", name, i, p, ids[i], i == 0)
			}
		}
	}
	// As each participant's own session reads them.
	for _, s := range sess {
		ps, err := leader.Participants(ctx, s, electionPath)
		check("Participants (participant's session)", ps, err)
		p, _, err := leader.Leader(ctx, s, electionPath)
		if err != nil || p.ID != "p0" || !p.Holds {
			t.Errorf("Leader (participant's session) = %+v, %v", p, err)
		}
	}
	ps, err := leader.Participants(ctx, s0, electionPath)
	check("Participants", ps, err)
	p, _, err := leader.Leader(ctx, s0, electionPath)
	if err != nil || p.ID != "p0" || p.Node != ls[0].Term().Node() {
		t.Errorf("Leader = %+v, %v", p, err)
	}
	// Default id: the local address.
	d, err := leader.NewLatch(s0, electionPath)
	if err != nil {
		t.Fatal(err)
	}
	if leader.LatchID(d) == "" || strings.ContainsAny(leader.LatchID(d), " /") {
		t.Errorf("default id %q", leader.LatchID(d))
	}
	d.Close()
	// An election that does not exist has no participants and no leader.
	ps, err = leader.Participants(ctx, s0, "/nothing/here")
	if err != nil || len(ps) != 0 {
		t.Errorf("Participants of a missing path = %v, %v", ps, err)
	}
	if p, ok, err := leader.Leader(ctx, s0, "/nothing/here"); err != nil || ok || p != (recipes.Participant{}) {
		t.Errorf("Leader of a missing path: %+v, %v, %v; want none", p, ok, err)
	}
}

// bystander is the session timeout of a session whose own timeout a test
// does not exercise (the other participants'; the leader's in a kill, which
// is instant): long enough that a loaded machine that stalls the test
// process for the default 2 s does not suspend or lose it.
var bystander = session.WithSessionTimeout(10 * time.Second)

// killRace bounds how long after another participant began to lead a leader
// whose session was killed through its own member may still learn of it: the
// bound the chaos run's checker gives the same race (servingKillRace).
const killRace = time.Second

// End-at-disconnect policy (under Standard the leader hears of a kill only
// at its lease deadline or when it reconnects: docs/design.md): the leader's
// session is ended on the server at once (zktest.ExpireSession through the member that serves it: an operator's
// kill, not an expiry). The server closes the leader's connection, so its
// term ends with session.ErrSuspended, then matches session.ErrLost; another
// participant leads; the killed one re-enters with a new session. That the
// killed leader's term ends first is not promised: the connection closes
// only about a round trip before the server deletes the node (see Term.Done
// and docs/design.md), a lead that a starved machine can overtake. So the
// order is logged, and a lost race must be a close one: the old term ends
// within killRace of the new one's start. TestLatchSessionExpired checks the
// strict order, which a real expiry does promise.
func TestLatchSessionKilled(t *testing.T) {
	ns := zktest.NewNamespace(t)
	conn := ns.Conn(t)
	log := newTermLog(t)
	var (
		ls    []*leader.Latch
		sess  []*session.Session
		taps  []*zktest.Tap
		names = []string{"k0", "k1", "k2"}
	)
	for _, id := range names {
		s, tap := sessiontest.ConnectTap(t, ns, bystander, session.WithLossPolicy(session.EndAtDisconnect))
		l := startLatch(t, s, id)
		log.follow(t, id, l)
		ls, sess, taps = append(ls, l), append(sess, s), append(taps, tap)
	}
	waitChildren(t, conn, ns, 3)
	i := oneLeader(t, ls)
	old := ls[i].Term()
	oldSession := sess[i].SessionID()
	rec := sessiontest.Record(t, sess[i])
	killed := time.Now()
	sessiontest.Expire(t, sess[i], taps[i])
	j := oneLeader(t, ls, i)
	nt := ls[j].Term()
	waitDone(t, old, wait)
	ro, rn := log.waitPair(t, old, nt)
	t.Logf("kill → old term ended %v after it (%v), %s led %v after it; old term ended first: %v",
		ro.end.Sub(killed), old.Err(), leader.TermID(nt), rn.start.Sub(killed), ro.end.Before(rn.start))
	if late := ro.end.Sub(rn.start); !ro.end.Before(rn.start) && late > killRace {
		t.Fatalf("killed leader's term ended %v after %s began to lead, more than the race allows (%v)", late, leader.TermID(nt), killRace)
	}
	// The term ends when the server closes the connection, not only once the
	// client has reconnected and heard "expired".
	if cause := context.Cause(old.Context()); !errors.Is(cause, session.ErrSuspended) {
		t.Fatalf("killed leader's term ended with %v, want session.ErrSuspended", cause)
	}
	rec.Wait(t, wait, session.Lost)
	if err := old.Err(); !errors.Is(err, session.ErrLost) {
		t.Fatalf("old term Err once its session is known lost = %v, want session.ErrLost", err)
	}
	// The killed participant comes back with a new session, at the back.
	zktest.Eventually(t, wait, func() bool {
		ps, err := leader.Participants(context.Background(), sess[j], electionPath)
		return err == nil && len(ps) == 3 && ps[2].ID == names[i]
	}, "killed participant re-entered")
	if id := sess[i].SessionID(); id == oldSession {
		t.Errorf("session id unchanged after kill")
	}
	// The one overlap allowed is the race just bounded.
	bad, excused := log.overlapsExcept(func(a termRec) bool { return a.term == old })
	for _, o := range bad {
		t.Error(o)
	}
	for _, o := range excused {
		t.Logf("instant-kill race (within %v, see Term.Done): %s", killRace, o)
	}
}

// Standard policy: the leader's session really expires. Its connection is
// partitioned past the session timeout (the default 2 s; the other
// participants are bystanders), so the server expires the session, a full
// timeout after it last heard from the leader, and deletes its node; the
// leader suspends after ⅔ of the timeout. Its term must have ended before
// another participant leads: when one is seen leading the old term must
// have ended, and the old term's recorded end (stamped after its Done
// closed) must come before the new term's start (stamped after it won), or
// the test fails. Once healed, the old leader learns that its session is
// gone and re-enters with a new one.
func TestLatchSessionExpired(t *testing.T) {
	ns := zktest.NewNamespace(t)
	conn := ns.Conn(t)
	log := newTermLog(t)
	s0, proxy := sessiontest.ConnectProxy(t, ns)
	rec := sessiontest.Record(t, s0)
	l0 := startLatch(t, s0, "q0")
	log.follow(t, "q0", l0)
	old := await(t, l0)
	sid := s0.SessionID()
	ls := []*leader.Latch{l0}
	var others []*session.Session
	for _, id := range []string{"q1", "q2"} {
		s := sessiontest.Connect(t, ns, bystander)
		l := startLatch(t, s, id)
		log.follow(t, id, l)
		ls, others = append(ls, l), append(others, s)
	}
	waitChildren(t, conn, ns, 3)
	start := time.Now()
	proxy.Partition()
	defer proxy.Heal()
	// Wait for any other participant to lead (not for exactly one leader,
	// which the old leader would count as until its term ends).
	var nt *leader.Term
	zktest.Eventually(t, wait, func() bool {
		for _, l := range ls[1:] {
			if nt = l.Term(); nt != nil {
				return true
			}
		}
		return false
	}, "another participant leads")
	if !ended(old) {
		t.Fatalf("%s leads while the partitioned leader's term goes on", leader.TermID(nt))
	}
	if !errors.Is(old.Err(), session.ErrSuspended) {
		t.Fatalf("old term Err %v, want ErrSuspended", old.Err())
	}
	ro, rn := log.waitPair(t, old, nt)
	t.Logf("partition → old term ended %v after it (%v), %s led %v after it", ro.end.Sub(start), old.Err(), leader.TermID(nt), rn.start.Sub(start))
	if !ro.end.Before(rn.start) {
		t.Fatalf("partitioned leader's term ended %v after %s began to lead", ro.end.Sub(rn.start), leader.TermID(nt))
	}
	// The old leader is cut off: only the server's expiry of its session can
	// have deleted its node.
	if ok, _, err := conn.Exists(leader.TermPath(old)); err != nil || ok {
		t.Fatalf("old leader's node after %s led: exists %v, %v", leader.TermID(nt), ok, err)
	}
	proxy.Heal()
	rec.Wait(t, wait, session.Lost)
	if err := old.Err(); !errors.Is(err, session.ErrLost) || !errors.Is(err, session.ErrSuspended) {
		t.Fatalf("old term Err once its session is known lost = %v, want session.ErrSuspended and session.ErrLost", err)
	}
	rec.Wait(t, wait, session.Reconnected)
	if s0.SessionID() == sid {
		t.Fatalf("the old leader reconnected to its expired session 0x%x", sid)
	}
	zktest.Eventually(t, wait, func() bool {
		ps, err := leader.Participants(context.Background(), others[0], electionPath)
		return err == nil && len(ps) == 3 && ps[2].ID == "q0"
	}, "partitioned participant re-entered at the back")
	log.checkNoOverlap(t)
}

// Standard policy: the leader is partitioned past the session timeout; its
// term ends (Suspended) before another participant leads.
func TestLatchPartitioned(t *testing.T) {
	ns := zktest.NewNamespace(t)
	log := newTermLog(t)
	var (
		ls      []*leader.Latch
		sess    []*session.Session
		proxies []*zktest.Proxy
		names   = []string{"q0", "q1", "q2"}
	)
	for _, id := range names {
		s, p := sessiontest.ConnectProxy(t, ns, session.WithSessionTimeout(time.Second))
		l := startLatch(t, s, id)
		log.follow(t, id, l)
		ls, sess, proxies = append(ls, l), append(sess, s), append(proxies, p)
	}
	i := oneLeader(t, ls)
	old := ls[i].Term()
	proxies[i].Partition()
	waitDone(t, old, wait)
	if !errors.Is(old.Err(), session.ErrSuspended) {
		t.Errorf("old term Err %v, want ErrSuspended", old.Err())
	}
	j := oneLeader(t, ls, i)
	nt := ls[j].Term()
	ro, rn := log.waitPair(t, old, nt)
	if !ro.end.Before(rn.start) {
		t.Errorf("partitioned leader's term ended %v, after the new term began %v", ro.end, rn.start)
	}
	t.Logf("partitioned leader stopped %v before %s led", rn.start.Sub(ro.end), leader.TermID(nt))
	proxies[i].Heal()
	zktest.Eventually(t, wait, func() bool {
		ps, err := leader.Participants(context.Background(), sess[j], electionPath)
		return err == nil && len(ps) == 3
	}, "partitioned participant re-entered")
	log.checkNoOverlap(t)
}

// Standard policy: a connection reset whose reconnection comes before the
// lease deadline keeps the term, its node and the leadership: the other
// participant never leads.
func TestLatchResetKeepsTerm(t *testing.T) {
	ns := zktest.NewNamespace(t)
	conn := ns.Conn(t)
	log := newTermLog(t)
	sa, pa := sessiontest.ConnectProxy(t, ns, session.WithSessionTimeout(sessiontest.LeaseTimeout))
	a := startLatch(t, sa, "a")
	log.follow(t, "a", a)
	ta := await(t, a)
	b := startLatch(t, sessiontest.Connect(t, ns), "b")
	log.follow(t, "b", b)
	zktest.Eventually(t, wait, func() bool { return len(children(t, conn, ns)) == 2 }, "2 nodes")
	sessiontest.Reset(t, sa, pa)
	if err := ta.Err(); err != nil || a.Term() != ta || !a.IsLeader() {
		t.Fatalf("a reset mended before the lease deadline ended the term: %v", err)
	}
	checkTermNode(t, conn, sa, ta)
	if b.IsLeader() {
		t.Fatal("b leads beside a")
	}
	log.checkNoOverlap(t)
}

// Standard policy: a connection reset followed by silence ends the term at
// the lease deadline, while the server still has the session (the term's
// node is there, owned by it); the other participant leads only after.
func TestLatchResetThenSilenceEndsTerm(t *testing.T) {
	ns := zktest.NewNamespace(t)
	conn := ns.Conn(t)
	log := newTermLog(t)
	sa, pa := sessiontest.ConnectProxy(t, ns, session.WithSessionTimeout(sessiontest.LeaseTimeout))
	a := startLatch(t, sa, "a")
	log.follow(t, "a", a)
	ta := await(t, a)
	b := startLatch(t, sessiontest.Connect(t, ns), "b")
	log.follow(t, "b", b)
	zktest.Eventually(t, wait, func() bool { return len(children(t, conn, ns)) == 2 }, "2 nodes")
	sid := sa.SessionID()
	sl := sessiontest.ResetThenSilence(t, sa, pa)
	if err := ta.Err(); err != nil {
		t.Fatalf("the term ended at the reset, before its deadline: %v", err)
	}
	sl.WaitEnded(t, ta.Done(), "the term")
	if _, st, err := conn.Exists(leader.TermPath(ta)); err != nil || st == nil || st.EphemeralOwner != sid {
		t.Fatalf("the session's node when its term ended: %v %v: the server expired the session first", st, err)
	}
	if !errors.Is(ta.Err(), session.ErrSuspended) {
		t.Fatalf("term Err %v, want ErrSuspended", ta.Err())
	}
	tb := await(t, b)
	ro, rn := log.waitPair(t, ta, tb)
	if !ro.end.Before(rn.start) {
		t.Errorf("a's term ended %v, b's began %v", ro.end, rn.start)
	}
	sl.End(t)
	log.checkNoOverlap(t)
}

// End-at-disconnect policy: a short cut ends the term at Suspended; the
// participant deletes its node when the connection is back and re-enters at
// the back, so the other participant leads.
func TestLatchCutEndsTermAtSuspended(t *testing.T) {
	ns := zktest.NewNamespace(t)
	conn := ns.Conn(t)
	log := newTermLog(t)
	sa, pa := sessiontest.ConnectProxy(t, ns, session.WithLossPolicy(session.EndAtDisconnect))
	a := startLatch(t, sa, "a")
	log.follow(t, "a", a)
	ta := await(t, a)
	sb := sessiontest.Connect(t, ns)
	b := startLatch(t, sb, "b")
	log.follow(t, "b", b)
	zktest.Eventually(t, wait, func() bool { return len(children(t, conn, ns)) == 2 }, "2 nodes")
	oldNode := ta.Node()
	rec := sessiontest.Record(t, sa)
	pa.Cut()
	waitDone(t, ta, wait)
	if !errors.Is(ta.Err(), session.ErrSuspended) {
		t.Fatalf("term Err %v, want ErrSuspended", ta.Err())
	}
	rec.Wait(t, wait, session.Suspended)
	tb := await(t, b)
	rec.Wait(t, wait, session.Reconnected)
	zktest.Eventually(t, wait, func() bool {
		ps, err := leader.Participants(context.Background(), sb, electionPath)
		return err == nil && len(ps) == 2 && ps[0].ID == "b" && ps[1].ID == "a" && ps[1].Node != oldNode
	}, "a re-entered at the back with a new node")
	if a.IsLeader() {
		t.Error("a leads after the cut")
	}
	if sa.SessionID() != leader.TermSessionID(ta) {
		t.Error("a short cut changed the session")
	}
	ro, rn := log.waitPair(t, ta, tb)
	if !ro.end.Before(rn.start) {
		t.Errorf("a's term ended %v, b's began %v", ro.end, rn.start)
	}
	log.checkNoOverlap(t)
}

// Session-only policy: a short cut keeps the term. (The session timeout is
// long enough for go-zookeeper's reconnect, which takes about a second.)
func TestLatchSessionOnlyRidesOutCut(t *testing.T) {
	ns := zktest.NewNamespace(t)
	conn := ns.Conn(t)
	s, p := sessiontest.ConnectProxy(t, ns, session.WithLossPolicy(session.SessionOnly), session.WithSessionTimeout(4*time.Second))
	l := startLatch(t, s, "so")
	term := await(t, l)
	rec := sessiontest.Record(t, s)
	p.Cut()
	rec.Wait(t, wait, session.Suspended)
	rec.Wait(t, wait, session.Reconnected)
	if term.Err() != nil || l.Term() != term {
		t.Fatalf("a short cut ended the session-only term: %v", term.Err())
	}
	checkTermNode(t, conn, s, term)
}

// Session-only policy: a partition past the session timeout ends the term
// with ErrLost; after the heal the latch leads again on a new session with a
// new node.
func TestLatchSessionOnlyLost(t *testing.T) {
	ns := zktest.NewNamespace(t)
	conn := ns.Conn(t)
	s, p := sessiontest.ConnectProxy(t, ns, session.WithLossPolicy(session.SessionOnly), session.WithSessionTimeout(time.Second))
	l := startLatch(t, s, "so")
	term := await(t, l)
	p.Partition()
	waitDone(t, term, wait)
	if !errors.Is(term.Err(), session.ErrLost) {
		t.Fatalf("term Err %v, want ErrLost", term.Err())
	}
	p.Heal()
	t2 := await(t, l)
	if t2 == term || leader.TermSessionID(t2) == leader.TermSessionID(term) || t2.Node() == term.Node() {
		t.Fatalf("new term %s (session 0x%x), old %s (0x%x)", t2.Node(), leader.TermSessionID(t2), term.Node(), leader.TermSessionID(term))
	}
	checkTermNode(t, conn, s, t2)
}

// A third party deletes the leader's node: the term ends with ErrNodeDeleted,
// the other participant leads, and the first one re-enters.
func TestLatchThirdPartyDelete(t *testing.T) {
	ns := zktest.NewNamespace(t)
	conn := ns.Conn(t)
	a := startLatch(t, sessiontest.Connect(t, ns), "a")
	ta := await(t, a)
	sb := sessiontest.Connect(t, ns)
	b := startLatch(t, sb, "b")
	zktest.Eventually(t, wait, func() bool { return len(children(t, conn, ns)) == 2 }, "2 nodes")
	if err := conn.Delete(leader.TermPath(ta), -1); err != nil {
		t.Fatal(err)
	}
	waitDone(t, ta, wait)
	if !errors.Is(ta.Err(), recipes.ErrNodeDeleted) {
		t.Fatalf("term Err %v, want ErrNodeDeleted", ta.Err())
	}
	await(t, b)
	zktest.Eventually(t, wait, func() bool {
		ps, err := leader.Participants(context.Background(), sb, electionPath)
		return err == nil && len(ps) == 2 && ps[0].ID == "b" && ps[1].ID == "a"
	}, "a re-entered")
}

func TestLatchCloseWhileWaiting(t *testing.T) {
	ns := zktest.NewNamespace(t)
	conn := ns.Conn(t)
	a := startLatch(t, sessiontest.Connect(t, ns), "a")
	ta := await(t, a)
	b := startLatch(t, sessiontest.Connect(t, ns), "b")
	zktest.Eventually(t, wait, func() bool { return len(children(t, conn, ns)) == 2 }, "2 nodes")

	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := b.Await(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Await = %v, want DeadlineExceeded", err)
	}
	awaitErr := make(chan error, 1)
	go func() {
		_, err := b.Await(context.Background())
		awaitErr <- err
	}()
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-awaitErr:
		if !errors.Is(err, session.ErrClosed) {
			t.Errorf("Await after Close = %v, want ErrClosed", err)
		}
	case <-time.After(wait):
		t.Fatal("Await did not return after Close")
	}
	// The waiter's node goes through the session's guaranteed-delete queue
	// (Close waits for it only briefly): wait for it.
	var kids []string
	zktest.Eventually(t, wait, func() bool {
		kids = children(t, conn, ns)
		return len(kids) == 1 && kids[0] == ta.Node()
	}, "children after closing the waiter: %v, want only the leader's %s", &kids, ta.Node())
	if ta.Err() != nil || !a.IsLeader() {
		t.Fatalf("leader disturbed: %v", ta.Err())
	}
}

func TestLatchChanges(t *testing.T) {
	ns := zktest.NewNamespace(t)
	s := sessiontest.Connect(t, ns)
	l, err := leader.NewLatch(s, electionPath, leader.WithID("c"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ch := l.Changes(context.Background())
	gone, cancel := context.WithCancel(context.Background())
	ch2 := l.Changes(gone)
	next := func(ch <-chan leader.Event) (leader.Event, bool) {
		t.Helper()
		select {
		case ev, ok := <-ch:
			return ev, ok
		case <-time.After(wait):
			t.Fatal("no event")
		}
		return leader.Event{}, false
	}
	if ev, ok := next(ch); !ok || ev.Leader || ev.Term != nil {
		t.Fatalf("first event %+v %v, want not leading", ev, ok)
	}
	if err := l.Start(); err != nil {
		t.Fatal(err)
	}
	term := await(t, l)
	if ev, ok := next(ch); !ok || !ev.Leader || ev.Term != term {
		t.Fatalf("second event %+v, want the start of %s", ev, term.Node())
	}
	// A subscriber joining now sees the current term first.
	ch3 := l.Changes(context.Background())
	if ev, ok := next(ch3); !ok || !ev.Leader || ev.Term != term {
		t.Fatalf("late subscriber's first event %+v", ev)
	}
	cancel()
	for range ch2 { // closed once its ctx ended
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if ev, ok := next(ch); !ok || ev.Leader || ev.Term != term || !errors.Is(ev.Term.Err(), session.ErrClosed) {
		t.Fatalf("last event %+v, want the end of %s", ev, term.Node())
	}
	if _, ok := next(ch); ok {
		t.Fatal("channel not closed after Close")
	}
	// ch3 was not read after its first event: its buffer holds the end of
	// the term, then it is closed.
	if ev, ok := next(ch3); !ok || ev.Leader || ev.Term != term {
		t.Fatalf("ch3 after Close: %+v %v", ev, ok)
	}
	if _, ok := next(ch3); ok {
		t.Fatal("ch3 not closed after Close")
	}
	// After Close: one event, then closed.
	ch4 := l.Changes(context.Background())
	if ev, ok := next(ch4); !ok || ev.Leader {
		t.Fatalf("Changes after Close: %+v %v", ev, ok)
	}
	if _, ok := next(ch4); ok {
		t.Fatal("Changes after Close not closed")
	}
}

// Closing the session ends the term with session.ErrClosed and stops the
// latch; Close still works.
func TestLatchSessionClosed(t *testing.T) {
	ns := zktest.NewNamespace(t)
	s := sessiontest.Connect(t, ns)
	l := startLatch(t, s, "x")
	term := await(t, l)
	s.Close()
	waitDone(t, term, wait)
	if !errors.Is(term.Err(), session.ErrClosed) {
		t.Errorf("term Err %v, want session.ErrClosed", term.Err())
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if _, err := l.Await(ctx); !errors.Is(err, session.ErrClosed) {
		t.Errorf("Await after session Close = %v, want session.ErrClosed", err)
	}
	if err := l.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
}

func TestLatchBadInput(t *testing.T) {
	ns := zktest.NewNamespace(t)
	s := sessiontest.Connect(t, ns)
	conn := ns.Conn(t)
	if _, err := leader.NewLatch(nil, electionPath); !errors.Is(err, session.ErrBadArgument) {
		t.Errorf("nil session: %v", err)
	}
	for _, p := range []string{"", "x", "/a/", "/a//b", "/a/./b", "/a/../b", "/a\x00b", "/"} {
		if _, err := leader.NewLatch(s, p); !errors.Is(err, session.ErrBadArgument) {
			t.Errorf("path %q: %v, want ErrBadArgument", p, err)
		}
	}
	for name, opt := range map[string]leader.Option{
		"empty id":    leader.WithID(""),
		"bad utf8":    leader.WithID("\xff"),
		"nul in id":   leader.WithID("a\x00b"),
		"id too long": leader.WithID(strings.Repeat("x", 2<<20)),
		"nil logger":  leader.WithLogger(nil),
		"requeue":     leader.WithRequeue(true),
		"nil option":  nil,
	} {
		_, err := leader.NewLatch(s, electionPath, opt)
		if !errors.Is(err, session.ErrBadArgument) {
			t.Errorf("%s: %v, want ErrBadArgument", name, err)
		} else if !strings.HasPrefix(err.Error(), "leader ") {
			t.Errorf("%s: message %q does not start with the package name", name, err)
		}
	}
	l, err := leader.NewLatch(s, electionPath, leader.WithID("b"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Await(context.Background()); !errors.Is(err, leader.ErrNotStarted) {
		t.Errorf("Await before Start: %v", err)
	}
	if err := l.Start(); err != nil {
		t.Fatal(err)
	}
	if err := l.Start(); !errors.Is(err, leader.ErrStarted) {
		t.Errorf("second Start: %v", err)
	}
	await(t, l)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if err := l.Start(); !errors.Is(err, session.ErrClosed) {
		t.Errorf("Start after Close: %v", err)
	}
	if _, err := l.Await(context.Background()); !errors.Is(err, session.ErrClosed) {
		t.Errorf("Await after Close: %v", err)
	}
	// Close returns once the latch's node is deleted: the election has no
	// participant left.
	if ps, err := leader.Participants(context.Background(), s, electionPath); err != nil || len(ps) != 0 {
		t.Errorf("Participants after Close: %+v, %v", ps, err)
	}
	// A latch closed before Start never touched ZooKeeper.
	l2, err := leader.NewLatch(s, "/never")
	if err != nil {
		t.Fatal(err)
	}
	if err := l2.Close(); err != nil {
		t.Fatal(err)
	}
	if kids := children(t, conn, ns); len(kids) != 0 {
		t.Errorf("nodes left behind: %v", kids)
	}
	if ok, _, _ := conn.Exists(ns.Path("never")); ok {
		t.Error("a latch that never started created its path")
	}
}

// A subscriber that does not read loses nothing: events beyond the channel's
// buffer wait in order; one that never reads does not hold Close up for long.
func TestLatchChangesOverflow(t *testing.T) {
	ns := zktest.NewNamespace(t)
	conn := ns.Conn(t)
	l := startLatch(t, sessiontest.Connect(t, ns), "o")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	reader := l.Changes(ctx)
	idle := l.Changes(context.Background()) // never read before Close
	term := await(t, l)
	const cycles = 40 // 80 events: more than the buffer
	terms := []*leader.Term{term}
	for i := 0; i < cycles; i++ {
		if err := conn.Delete(leader.TermPath(term), -1); err != nil {
			t.Fatal(err)
		}
		waitDone(t, term, wait)
		zktest.Eventually(t, wait, func() bool {
			nt := l.Term()
			if nt != nil && nt != term {
				term = nt
				return true
			}
			return false
		}, "cycle %d: leads again", i)
		terms = append(terms, term)
	}
	// Read until the start of the last term: the first event may be "not
	// leading" (subscribed before the first term) or the first term itself.
	var evs []leader.Event
	for len(evs) == 0 || evs[len(evs)-1].Term != terms[cycles] {
		select {
		case ev := <-reader:
			evs = append(evs, ev)
		case <-time.After(wait):
			t.Fatalf("only %d events", len(evs))
		}
	}
	if !evs[0].Leader {
		evs = evs[1:]
	}
	if len(evs) != 2*cycles+1 {
		t.Fatalf("%d events for %d terms", len(evs), cycles+1)
	}
	for i, ev := range evs {
		want := terms[i/2]
		if ev.Leader != (i%2 == 0) || ev.Term != want {
			t.Fatalf("event %d = {Leader:%v Term:%s}, want {Leader:%v Term:%s}", i, ev.Leader, ev.Term.Node(), i%2 == 0, want.Node())
		}
	}
	start := time.Now()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	// The bound is the point here: Close waits subscriberGrace (200 ms) for
	// a subscriber that does not read, not for ever. 5 s leaves a loaded
	// machine room for the node's delete and the goroutines' exits.
	d := time.Since(start)
	t.Logf("Close took %v with a subscriber that does not read", d)
	if d > 5*time.Second {
		t.Errorf("Close took %v with a subscriber that does not read", d)
	}
	n := 0
	for range idle {
		n++
	}
	t.Logf("the idle subscriber got %d events after Close", n)
}
