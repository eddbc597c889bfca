package leader_test

import (
	"context"
	"fmt"
	"math/rand"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/internal/testkit/sessiontest"
	"github.com/zkrecipes/zkrecipes/leader"
	"github.com/zkrecipes/zkrecipes/session"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// TestNeverTwoLeaders runs rounds of random faults against three latches on
// a 3-member ensemble, each participant connected through its own fault
// proxy, under the standard loss policy with 1 s sessions. A round injects a
// fault, waits until a leader exists again, and heals. Two leaders means two
// terms whose [start, end] intervals overlap in local time (all participants
// live in this process: one clock), recorded from every event of every
// latch; at every round end at most one latch may say it leads. The one
// exception is an instant session kill, which races by construction (see the
// end of the test): such overlaps are logged and counted, not failed.
//
// ZKRECIPES_SOAK_ROUNDS overrides the number of rounds (default 100);
// ZKRECIPES_SOAK_SEED the random seed. Skipped with -short.
func TestNeverTwoLeaders(t *testing.T) {
	if testing.Short() {
		t.Skip("soak test")
	}
	rounds := 100
	if v, err := strconv.Atoi(os.Getenv("ZKRECIPES_SOAK_ROUNDS")); err == nil && v > 0 {
		rounds = v
	}
	seed := time.Now().UnixNano()
	if v, err := strconv.ParseInt(os.Getenv("ZKRECIPES_SOAK_SEED"), 10, 64); err == nil {
		seed = v
	}
	t.Logf("seed %d (ZKRECIPES_SOAK_SEED), %d rounds", seed, rounds)
	rng := rand.New(rand.NewSource(seed))

	ens := zktest.StartEnsembleT(t, 3)
	inspect := zktest.Conn(t, ens.Servers(), 10*time.Second)
	log := newTermLog(t)
	const n = 3
	var (
		ls      []*leader.Latch
		sess    []*session.Session
		proxies []*zktest.Proxy
	)
	for i := 0; i < n; i++ {
		p := zktest.NewProxyT(t, ens.Servers()...)
		s := sessiontest.ConnectTo(t, p.Servers(), "/soak", session.WithSessionTimeout(time.Second))
		id := fmt.Sprintf("p%d", i)
		l := startLatch(t, s, id)
		log.follow(t, id, l)
		ls, sess, proxies = append(ls, l), append(sess, s), append(proxies, p)
	}

	const leaderWait = 45 * time.Second
	waitOne := func(round int, what string) int {
		t.Helper()
		idx := -1
		zktest.Eventually(t, leaderWait, func() bool {
			ld := leaders(ls)
			if len(ld) > 1 {
				t.Errorf("round %d: %d latches say they lead: %v", round, len(ld), ld)
			}
			if len(ld) == 1 {
				idx = ld[0]
			}
			return len(ld) == 1
		}, "round %d: a leader after %s", round, what)
		return idx
	}
	// checkOwner verifies that the leader's node is owned by its current
	// session (skipped when the node is already gone or the ensemble does not
	// answer).
	ownerChecks := 0
	checkOwner := func(round int, i int) {
		term := ls[i].Term()
		if term == nil {
			return
		}
		_, st, err := inspect.Get(leader.TermPath(term))
		if err != nil || term.Err() != nil {
			return
		}
		ownerChecks++
		if st.EphemeralOwner != leader.TermSessionID(term) {
			t.Errorf("round %d: leader %s's node %s owned by 0x%x, term session 0x%x",
				round, leader.TermID(term), term.Node(), st.EphemeralOwner, leader.TermSessionID(term))
		}
	}

	// kills records the windows of instant session kills, per participant:
	// from just before the kill to the end of the round.
	type killWindow struct {
		who        string
		from, till time.Time
	}
	var kills []killWindow
	faults := map[string]int{}
	changes := map[string]int{}
	var failovers []time.Duration
	maxLeaders := 0
	start := time.Now()
	cur := waitOne(0, "start")
	for round := 1; round <= rounds && !t.Failed(); round++ {
		// Most faults hit the leader; some hit another participant, if its
		// connection is up (faults do not pile up on one participant).
		cur = waitOne(round, "the previous round")
		target := cur
		if pick := rng.Intn(n); rng.Intn(5) == 0 && up(sess[pick]) {
			target = pick
		}
		before := ls[cur].Term()
		ep := sessiontest.Core(sess[target]).Epoch()
		sub := sess[target].Subscribe()
		if target != cur && !upState(sub.Initial().State) {
			sub.Close()
			target = cur
			ep = sessiontest.Core(sess[target]).Epoch()
			sub = sess[target].Subscribe()
		}
		began := time.Now()
		var fault string
		heal := func() {}
		switch x := rng.Intn(100); {
		case x < 30:
			fault = "cut"
			proxies[target].Cut()
		case x < 55:
			fault = "partition"
			proxies[target].Partition()
			heal = func() { proxies[target].Heal() }
			// Past the timeout: the client declares the session lost.
			zktest.Eventually(t, leaderWait, func() bool { return ep.Err() != nil }, "round %d: partitioned session lost", round)
		case x < 85:
			fault = "session kill"
			for _, c := range proxies[target].Sessions() {
				if c.ID == ep.SessionID() {
					ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
					if err := zktest.ExpireSession(ctx, servingFirst(ctx, ens, c.ID), c); err != nil {
						t.Logf("round %d: expire: %v", round, err)
					}
					cancel()
				}
			}
		default:
			fault = "ensemble leader kill"
			target = cur // every client is disconnected
			m, err := ens.Leader()
			if err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
			if err := ens.Member(m).Kill(); err != nil {
				t.Fatalf("round %d: kill member %d: %v", round, m, err)
			}
			heal = func() {
				if err := ens.Member(m).Restart(); err != nil {
					t.Fatalf("round %d: restart member %d: %v", round, m, err)
				}
			}
		}
		// Wait for the fault to take effect: the leader's term ends, or the
		// other participant's connection drops. A cut, or the ensemble
		// leader's kill, may be mended before the lease deadline, and then
		// the term goes on: wait for the connection to drop.
		if target == cur && before != nil && fault != "cut" && fault != "ensemble leader kill" {
			select {
			case <-before.Done():
			case <-time.After(leaderWait):
				t.Fatalf("round %d (%s): the leader's term did not end", round, fault)
			}
		} else {
			deadline := time.After(leaderWait)
		effect:
			for {
				select {
				case ev, ok := <-sub.C():
					if !ok || ev.State == session.Suspended || ev.State == session.Lost {
						break effect
					}
				case <-deadline:
					t.Fatalf("round %d (%s): participant %d's connection did not drop", round, fault, target)
				}
			}
		}
		sub.Close()
		cur = waitOne(round, fault)
		if fault == "session kill" {
			// Under the standard policy the victim is told at its lease
			// deadline or when it reconnects and hears that its session
			// is gone, whichever comes first: the window of the race
			// lasts until the victim knows its session lost.
			zktest.Eventually(t, leaderWait, func() bool { return ep.Err() != nil }, "round %d: killed session not known lost", round)
			kills = append(kills, killWindow{fmt.Sprintf("p%d", target), began, time.Now()})
		}
		heal()
		faults[fault]++
		if term := ls[cur].Term(); term != nil && term != before {
			changes[fault]++
			failovers = append(failovers, term.Started().Sub(began))
		}
		checkOwner(round, cur)
		k := len(leaders(ls))
		if k > maxLeaders {
			maxLeaders = k
		}
		if k > 1 {
			t.Errorf("round %d (%s): %d latches say they lead", round, fault, k)
		}
		if round%10 == 0 {
			t.Logf("round %d/%d after %v: faults %v, %d terms so far", round, rounds, time.Since(start).Round(time.Millisecond), faults, len(log.snapshot()))
		}
	}
	// Let the last events arrive before judging.
	for _, l := range ls {
		l.Close()
	}
	log.wg.Wait()
	terms := log.snapshot()
	sort.Slice(failovers, func(i, j int) bool { return failovers[i] < failovers[j] })
	med := time.Duration(0)
	if len(failovers) > 0 {
		med = failovers[len(failovers)/2]
	}
	t.Logf("%d rounds in %v: faults %v, leader changed after %v; %d terms recorded; at most %d latch(es) leading at a round end; %d owner checks passed; fault to new leader: median %v over %d changes",
		rounds, time.Since(start).Round(time.Millisecond), faults, changes, len(terms), maxLeaders, ownerChecks, med, len(failovers))
	// The smallest gap between the end of a term and the start of the next.
	sort.Slice(terms, func(i, j int) bool { return terms[i].start.Before(terms[j].start) })
	minGap := time.Duration(-1)
	var lastEnd time.Time
	for i, r := range terms {
		if i > 0 {
			if g := r.start.Sub(lastEnd); minGap < 0 || g < minGap {
				minGap = g
			}
		}
		if r.end.After(lastEnd) {
			lastEnd = r.end
		}
	}
	t.Logf("smallest gap between a term's end and the next term's start: %v", minGap)
	// An instant kill is the one fault where the library cannot end a term
	// strictly first: the server closes the victim's connection and deletes
	// its node in one step. To the victim's client the closed connection
	// looks like any reset, which under the standard policy ends nothing
	// until the lease deadline or the reconnection that reports the session
	// gone (the Term's Done documents this). Such an overlap is reported,
	// not failed; any other overlap fails.
	bad, excused := log.overlapsExcept(func(a termRec) bool {
		for _, k := range kills {
			if k.who == a.who && !a.end.Before(k.from) && !a.end.After(k.till) {
				return true
			}
		}
		return false
	})
	for _, o := range bad {
		t.Error(o)
	}
	for _, o := range excused {
		t.Logf("instant-kill race (not a violation: see Term.Done): %s", o)
	}
	if len(bad) == 0 {
		t.Logf("never two leaders: no two of %d terms overlapped, except %d instant-kill race(s)", len(terms), len(excused))
	}
}

func upState(st session.State) bool { return st == session.Connected || st == session.Reconnected }

func up(s *session.Session) bool { return upState(s.State()) }

// servingFirst returns the ensemble's addresses with the member that serves
// session id first (found with the "cons" four-letter word). Killing a
// session through the member its client is connected to closes the client's
// connection at once (the member sees the session reconnect elsewhere), as
// on a standalone server, so the client is suspended before the session's
// nodes go. Through another member the client gets no warning at all: the
// deletion reaches the other participants and the connection's close reaches
// the victim at the same moment, and no client can stop leading first (an
// earlier version of this test saw such terms overlap by about 0.3 ms).
func servingFirst(ctx context.Context, ens *zktest.Ensemble, id int64) []string {
	servers := ens.Servers()
	needle := fmt.Sprintf("sid=0x%x", id)
	for i, addr := range servers {
		out, err := zktest.FourLetterWord(ctx, addr, "cons")
		if err == nil && strings.Contains(out, needle) {
			return append([]string{addr}, append(append([]string(nil), servers[:i]...), servers[i+1:]...)...)
		}
	}
	return servers
}
