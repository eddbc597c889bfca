package leader_test

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/internal/testkit/sessiontest"
	"github.com/zkrecipes/zkrecipes/leader"
	"github.com/zkrecipes/zkrecipes/session"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// slowStop is how long the works of these tests take to stop once their
// context has ended (a worker finishing its current job).
const slowStop = 2 * time.Second

// stint is one call of a work function, with times read inside it: start on
// entry, told when it saw its context end, end just before it returned.
type stint struct {
	who               string
	start, told, end  time.Time
	cause             error // context.Cause of work's ctx
	termErr           error // the term's Err when work returned
	sessionID         int64 // the term's session
	finished, wasTold bool
}

// stintLog records the stints of the works it hands out.
type stintLog struct {
	mu     sync.Mutex
	stints []*stint
	more   chan struct{}
	quit   chan struct{} // closed at the end of the test: stop at once
	once   sync.Once
}

// newStintLog returns a log whose works stop without delay once the test
// has ended (so that the cleanup does not wait for them).
func newStintLog(t testing.TB) *stintLog {
	lg := &stintLog{more: make(chan struct{}), quit: make(chan struct{})}
	t.Cleanup(lg.hurry)
	return lg
}

// hurry makes works stop without delay from now on. Register it (t.Cleanup)
// after the participants so that it runs before their cleanup.
func (lg *stintLog) hurry() { lg.once.Do(func() { close(lg.quit) }) }

func (lg *stintLog) changed() {
	close(lg.more)
	lg.more = make(chan struct{})
}

// work returns a work function for participant who that leads until its
// context ends and then needs stop to return.
func (lg *stintLog) work(who string, stop time.Duration) func(context.Context) error {
	return func(ctx context.Context) error {
		s := &stint{who: who, start: time.Now()}
		if term, ok := leader.TermFromContext(ctx); ok {
			s.sessionID = leader.TermSessionID(term)
		}
		lg.mu.Lock()
		lg.stints = append(lg.stints, s)
		lg.changed()
		lg.mu.Unlock()

		<-ctx.Done()
		told := time.Now()
		lg.mu.Lock()
		s.told, s.wasTold, s.cause = told, true, context.Cause(ctx)
		lg.changed()
		lg.mu.Unlock()
		if stop > 0 {
			// The work finishing what it was doing: not a synchronisation.
			tm := time.NewTimer(stop)
			select {
			case <-tm.C:
			case <-lg.quit:
			}
			tm.Stop()
		}
		var termErr error
		if term, ok := leader.TermFromContext(ctx); ok {
			termErr = term.Err()
		}
		end := time.Now()
		lg.mu.Lock()
		s.end, s.finished, s.termErr = end, true, termErr
		lg.changed()
		lg.mu.Unlock()
		return ctx.Err()
	}
}

// snapshot returns copies of the stints so far, in order of start.
func (lg *stintLog) snapshot() []stint {
	lg.mu.Lock()
	defer lg.mu.Unlock()
	out := make([]stint, len(lg.stints))
	for i, s := range lg.stints {
		out[i] = *s
	}
	sort.Slice(out, func(i, j int) bool { return out[i].start.Before(out[j].start) })
	return out
}

// waitFor waits until cond holds on the stints so far and returns them.
func (lg *stintLog) waitFor(t testing.TB, what string, cond func([]stint) bool) []stint {
	t.Helper()
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	for {
		lg.mu.Lock()
		more := lg.more
		lg.mu.Unlock()
		ss := lg.snapshot()
		if cond(ss) {
			return ss
		}
		select {
		case <-more:
		case <-deadline.C:
			t.Fatalf("%s: not within %v; stints %s", what, wait, fmtStints(ss))
		}
	}
}

// overlaps describes every pair of stints where one began before another
// had returned (a stint still running extends to now).
func overlaps(ss []stint) []string {
	now := time.Now()
	var out []string
	for i := range ss {
		end := ss[i].end
		if !ss[i].finished {
			end = now
		}
		for j := i + 1; j < len(ss); j++ {
			if ss[j].start.Before(end) {
				out = append(out, fmt.Sprintf("works overlap by %v: %s %s and %s %s",
					end.Sub(ss[j].start), ss[i].who, fmtStint(ss[i]), ss[j].who, fmtStint(ss[j])))
			}
		}
	}
	return out
}

func fmtStint(s stint) string {
	f := func(t time.Time, ok bool) string {
		if !ok {
			return "-"
		}
		return t.Format("15:04:05.000")
	}
	return fmt.Sprintf("[%s, told %s, %s] (%v)", f(s.start, true), f(s.told, s.wasTold), f(s.end, s.finished), s.cause)
}

func fmtStints(ss []stint) string {
	out := ""
	for _, s := range ss {
		out += fmt.Sprintf("\n  %s %s", s.who, fmtStint(s))
	}
	return out
}

// first returns the first stint of who.
func first(ss []stint, who string) (stint, bool) {
	for _, s := range ss {
		if s.who == who {
			return s, true
		}
	}
	return stint{}, false
}

// participant is how an overlap test runs a participant: Run or a Selector.
type participant func(t *testing.T, s *session.Session, id string, work func(context.Context) error)

func runParticipant(t *testing.T, s *session.Session, id string, work func(context.Context) error) {
	startRun(t, s, id, work)
}

func selectorParticipant(t *testing.T, s *session.Session, id string, work func(context.Context) error) {
	sel := newSelector(t, s, id, work)
	if err := sel.Start(); err != nil {
		t.Fatalf("Start: %v", err)
	}
}

// TestNoOverlapAfterCut: end-at-disconnect policy (under Standard a cut this
// short ends nothing: TestLatchResetKeepsTerm); the leader's connection is cut
// once, briefly (its session survives). Its work is told at Suspended and
// needs slowStop to return; the other participant must not start its work
// before then: the leader's node stays until its work has returned, even
// though the connection is back long before.
func TestNoOverlapAfterCut(t *testing.T) {
	for _, c := range []struct {
		name string
		join participant
	}{{"Run", runParticipant}, {"Selector", selectorParticipant}} {
		t.Run(c.name, func(t *testing.T) {
			ns := zktest.NewNamespace(t)
			ctx := ctxT(t)
			// A timeout that a cut and go-zookeeper's reconnect stay well within.
			timeout := session.WithSessionTimeout(4 * time.Second)
			sa, pa := sessiontest.ConnectProxy(t, ns, timeout, session.WithLossPolicy(session.EndAtDisconnect))
			sb := sessiontest.Connect(t, ns, timeout)
			log := newStintLog(t)
			c.join(t, sa, "a", log.work("a", slowStop))
			log.waitFor(t, "a leads", func(ss []stint) bool { return len(ss) == 1 })
			c.join(t, sb, "b", log.work("b", slowStop))
			t.Cleanup(log.hurry) // before the participants' cleanup
			zktest.Eventually(t, wait, func() bool {
				ps, err := leader.Participants(ctx, sb, electionPath)
				return err == nil && len(ps) == 2 && ps[0].ID == "a" && ps[1].ID == "b"
			}, "b queued behind a")
			rec := sessiontest.Record(t, sa)

			cut := time.Now()
			pa.Cut()
			rec.Wait(t, wait, session.Suspended)
			ss := log.waitFor(t, "b leads", func(ss []stint) bool {
				_, ok := first(ss, "b")
				return ok
			})
			ss = log.waitFor(t, "a's work returned", func(ss []stint) bool {
				a, _ := first(ss, "a")
				return a.finished
			})
			a, _ := first(ss, "a")
			b, _ := first(ss, "b")
			if !errors.Is(a.cause, session.ErrSuspended) {
				t.Errorf("a's work was told %v, want session.ErrSuspended", a.cause)
			}
			// The session survived the cut: this is not the expiry exception.
			if sa.SessionID() != a.sessionID {
				t.Fatalf("a's session changed (0x%x → 0x%x): the cut was not short", a.sessionID, sa.SessionID())
			}
			for _, o := range overlaps(ss) {
				t.Error(o)
			}
			ms := func(d time.Duration) time.Duration { return d.Round(time.Millisecond) }
			t.Logf("after the cut: a told at +%v, a returned at +%v, b started at +%v (%v after a returned)",
				ms(a.told.Sub(cut)), ms(a.end.Sub(cut)), ms(b.start.Sub(cut)), ms(b.start.Sub(a.end)))
		})
	}
}

// TestOverlapSessionOnlyExpiry: session-only policy; the leader is
// partitioned past its session timeout, so its session really expires and
// the server deletes its node with it: that cannot wait for the work. The
// session declares the loss by its local timer before the server can
// expire the session, so a work that returns promptly when told has
// returned before the other participant starts; a work slow to stop was at
// least told before, and overlaps the next one (the documented exception,
// measured here).
func TestOverlapSessionOnlyExpiry(t *testing.T) {
	for _, c := range []struct {
		name string
		stop time.Duration
	}{{"prompt", 0}, {"slow", slowStop}} {
		t.Run(c.name, func(t *testing.T) {
			ns := zktest.NewNamespace(t)
			ctx := ctxT(t)
			so := session.WithLossPolicy(session.SessionOnly)
			sa, pa := sessiontest.ConnectProxy(t, ns, so)
			sb := sessiontest.Connect(t, ns, so)
			log := newStintLog(t)
			startRun(t, sa, "a", log.work("a", c.stop))
			log.waitFor(t, "a leads", func(ss []stint) bool { return len(ss) == 1 })
			startRun(t, sb, "b", log.work("b", c.stop))
			t.Cleanup(log.hurry)
			zktest.Eventually(t, wait, func() bool {
				ps, err := leader.Participants(ctx, sb, electionPath)
				return err == nil && len(ps) == 2 && ps[0].ID == "a" && ps[1].ID == "b"
			}, "b queued behind a")
			rec := sessiontest.Record(t, sa)

			pa.Partition()
			defer pa.Heal()
			rec.Wait(t, wait, session.Lost)
			ss := log.waitFor(t, "b leads and a's work returned", func(ss []stint) bool {
				a, _ := first(ss, "a")
				_, ok := first(ss, "b")
				return ok && a.finished
			})
			a, _ := first(ss, "a")
			b, _ := first(ss, "b")
			if !errors.Is(a.cause, session.ErrLost) {
				t.Errorf("a's work was told %v, want session.ErrLost", a.cause)
			}
			if !a.told.Before(b.start) {
				t.Errorf("b started %v before a was told", a.told.Sub(b.start))
			}
			ov := overlaps(ss)
			switch {
			case c.stop == 0:
				for _, o := range ov {
					t.Error(o)
				}
				t.Logf("a returned %v before b started", b.start.Sub(a.end).Round(time.Millisecond))
			default:
				t.Logf("expired session, slow work: a told %v before b started; %d overlap(s): %v",
					b.start.Sub(a.told).Round(time.Millisecond), len(ov), ov)
			}
		})
	}
}
