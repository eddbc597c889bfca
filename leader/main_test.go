package leader_test

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/internal/testkit/sessiontest"
	"github.com/zkrecipes/zkrecipes/leader"
	"github.com/zkrecipes/zkrecipes/session"
	"github.com/zkrecipes/zkrecipes/zktest"
)

func TestMain(m *testing.M) { zktest.Main(m) }

// electionPath is the election path inside each test's namespace.
const electionPath = "/election"

// wait is the bound of every wait on something that should happen soon.
const wait = 15 * time.Second

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// startLatch creates and starts a latch, closed in t.Cleanup.
func startLatch(t testing.TB, s *session.Session, id string, opts ...leader.Option) *leader.Latch {
	t.Helper()
	l, err := leader.NewLatch(s, electionPath, append([]leader.Option{leader.WithID(id)}, opts...)...)
	if err != nil {
		t.Fatalf("NewLatch: %v", err)
	}
	if err := l.Start(); err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// await waits for l to lead.
func await(t testing.TB, l *leader.Latch) *leader.Term {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	term, err := l.Await(ctx)
	if err != nil {
		t.Fatalf("Await(%s): %v", leader.LatchID(l), err)
	}
	return term
}

// waitDone waits for a term to end.
func waitDone(t testing.TB, term *leader.Term, within time.Duration) {
	t.Helper()
	if ended(term) {
		return
	}
	select {
	case <-term.Done():
	case <-time.After(within):
		t.Fatalf("term %s of %s did not end within %v", term.Node(), leader.TermID(term), within)
	}
}

// waitClosed waits until ch is closed, failing the test after wait.
func waitClosed(t testing.TB, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(wait):
		t.Fatalf("%s: not within %v", what, wait)
	}
}

// ended reports whether term's Done is closed.
func ended(term *leader.Term) bool {
	select {
	case <-term.Done():
		return true
	default:
		return false
	}
}

// leaders returns the indexes of the latches that say they lead.
func leaders(ls []*leader.Latch) []int {
	var out []int
	for i, l := range ls {
		if l.IsLeader() {
			out = append(out, i)
		}
	}
	return out
}

// oneLeader waits until exactly one of ls leads and returns its index.
func oneLeader(t testing.TB, ls []*leader.Latch, except ...int) int {
	t.Helper()
	idx := -1
	zktest.Eventually(t, wait, func() bool {
		ld := leaders(ls)
		if len(ld) != 1 {
			return false
		}
		for _, e := range except {
			if ld[0] == e {
				return false
			}
		}
		idx = ld[0]
		return true
	}, "exactly one leader among %d latches", len(ls))
	return idx
}

// termLog records every term of the latches it follows (through Changes,
// which delivers every event), with the local times at which each began and
// was seen to end.
type termLog struct {
	mu    sync.Mutex
	terms []*termRec
	open  map[*leader.Term]*termRec
	bad   []string
	wg    sync.WaitGroup
}

type termRec struct {
	who   string
	term  *leader.Term
	start time.Time
	end   time.Time // zero while the term lasts
}

func newTermLog(t testing.TB) *termLog {
	lg := &termLog{open: make(map[*leader.Term]*termRec)}
	t.Cleanup(lg.wg.Wait)
	return lg
}

// follow records l's terms until l is closed or the test ends.
func (lg *termLog) follow(t testing.TB, who string, l *leader.Latch) {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	ch := l.Changes(ctx)
	lg.wg.Add(1)
	go func() {
		defer lg.wg.Done()
		for ev := range ch {
			lg.mu.Lock()
			switch {
			case ev.Leader:
				if _, dup := lg.open[ev.Term]; dup {
					lg.bad = append(lg.bad, fmt.Sprintf("%s: term %s began twice", who, ev.Term.Node()))
					break
				}
				r := &termRec{who: who, term: ev.Term, start: ev.Term.Started()}
				lg.open[ev.Term] = r
				lg.terms = append(lg.terms, r)
			case ev.Term != nil:
				r, ok := lg.open[ev.Term]
				if !ok {
					lg.bad = append(lg.bad, fmt.Sprintf("%s: term %s ended without beginning", who, ev.Term.Node()))
					break
				}
				delete(lg.open, ev.Term)
				r.end = ev.At
				if ev.Term.Err() == nil {
					lg.bad = append(lg.bad, fmt.Sprintf("%s: term %s ended with nil Err", who, ev.Term.Node()))
				}
			}
			lg.mu.Unlock()
		}
	}()
}

// snapshot returns a copy of the records.
func (lg *termLog) snapshot() []termRec {
	lg.mu.Lock()
	defer lg.mu.Unlock()
	out := make([]termRec, len(lg.terms))
	for i, r := range lg.terms {
		out[i] = *r
	}
	return out
}

// find returns the record of term.
func (lg *termLog) find(term *leader.Term) (termRec, bool) {
	for _, r := range lg.snapshot() {
		if r.term == term {
			return r, true
		}
	}
	return termRec{}, false
}

// waitPair waits until the log has recorded the end of old and the start of
// nt (the records are written by the follower goroutines, after the events
// the test waited for) and returns both records.
func (lg *termLog) waitPair(t testing.TB, old, nt *leader.Term) (ro, rn termRec) {
	t.Helper()
	zktest.Eventually(t, wait, func() bool {
		var ok1, ok2 bool
		ro, ok1 = lg.find(old)
		rn, ok2 = lg.find(nt)
		return ok1 && ok2 && !ro.end.IsZero()
	}, "terms %s and %s recorded", old.Node(), nt.Node())
	return ro, rn
}

// overlaps returns a description of every pair of terms whose [start, end]
// intervals overlap (an open term extends to now), and protocol problems.
func (lg *termLog) overlaps() []string {
	bad, _ := lg.overlapsExcept(nil)
	return bad
}

// overlapsExcept is overlaps, except that an overlap whose earlier term
// excused(earlier) accepts is returned in excused instead of bad.
func (lg *termLog) overlapsExcept(excuse func(earlier termRec) bool) (bad, excused []string) {
	lg.mu.Lock()
	out := append([]string(nil), lg.bad...)
	lg.mu.Unlock()
	rs := lg.snapshot()
	sort.Slice(rs, func(i, j int) bool { return rs[i].start.Before(rs[j].start) })
	now := time.Now()
	endOf := func(r termRec) time.Time {
		if r.end.IsZero() {
			return now
		}
		return r.end
	}
	for i := range rs {
		for j := i + 1; j < len(rs); j++ {
			a, b := rs[i], rs[j]
			if b.start.Before(endOf(a)) {
				o := fmt.Sprintf("terms overlap: %s %s [%s, %s] and %s %s [%s, %s] (overlap %v)",
					a.who, a.term.Node(), a.start.Format("15:04:05.000000"), fmtEnd(a.end),
					b.who, b.term.Node(), b.start.Format("15:04:05.000000"), fmtEnd(b.end), endOf(a).Sub(b.start))
				if excuse != nil && !a.end.IsZero() && excuse(a) {
					excused = append(excused, o)
				} else {
					out = append(out, o)
				}
			}
		}
	}
	return out, excused
}

func fmtEnd(t time.Time) string {
	if t.IsZero() {
		return "open"
	}
	return t.Format("15:04:05.000000")
}

// checkNoOverlap fails the test if two recorded terms overlapped.
func (lg *termLog) checkNoOverlap(t testing.TB) {
	t.Helper()
	for _, o := range lg.overlaps() {
		t.Error(o)
	}
}

// nodeStat reads a node through a raw inspection connection.
func nodeStat(t testing.TB, conn *zk.Conn, path string) (string, *zk.Stat) {
	t.Helper()
	data, st, err := conn.Get(path)
	if err != nil {
		t.Fatalf("get %s: %v", path, err)
	}
	return string(data), st
}

// children lists the election's children through a raw connection.
func children(t testing.TB, conn *zk.Conn, ns *zktest.Namespace) []string {
	t.Helper()
	kids, _, err := conn.Children(ns.Path(electionPath))
	if errors.Is(err, zk.ErrNoNode) {
		return nil
	}
	if err != nil {
		t.Fatalf("children: %v", err)
	}
	sort.Strings(kids)
	return kids
}

// waitChildren waits until the election has exactly n children on the
// server (participants' nodes are created by goroutines that Start does not
// wait for).
func waitChildren(t testing.TB, conn *zk.Conn, ns *zktest.Namespace, n int) {
	t.Helper()
	var kids []string
	zktest.Eventually(t, wait, func() bool {
		kids = children(t, conn, ns)
		return len(kids) == n
	}, "%d election nodes (last seen %v)", n, &kids)
}

// checkTermNode checks that term's node exists with the participant id as
// data, the term's token as czxid, and the session's current id as owner.
func checkTermNode(t testing.TB, conn *zk.Conn, s *session.Session, term *leader.Term) {
	t.Helper()
	data, st := nodeStat(t, conn, leader.TermPath(term))
	if data != leader.TermID(term) {
		t.Errorf("node %s data %q, want %q", term.Node(), data, leader.TermID(term))
	}
	if st.Czxid != term.Token() {
		t.Errorf("node %s czxid %d, token %d", term.Node(), st.Czxid, term.Token())
	}
	if st.EphemeralOwner != leader.TermSessionID(term) || st.EphemeralOwner != s.SessionID() {
		t.Errorf("node %s owner 0x%x, term session 0x%x, current session 0x%x",
			term.Node(), st.EphemeralOwner, leader.TermSessionID(term), s.SessionID())
	}
	if !strings.Contains(term.Node(), "-latch-") && !strings.Contains(term.Node(), "-lock-") {
		t.Errorf("node name %q", term.Node())
	}
}

var _ = sessiontest.Connect
