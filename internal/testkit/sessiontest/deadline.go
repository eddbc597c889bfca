package sessiontest

import (
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/session"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// The tests of the Standard loss policy's lease deadline: a lease survives a
// connection reset whose reconnection comes before the deadline (two thirds
// of the session timeout after the send time of the newest answered
// request), and ends at the deadline when the connection stays down.

// LeaseTimeout is the session timeout those tests ask for: a reconnection
// through one proxy address (go-zookeeper waits a second before it dials the
// same address again) comes well before the deadline, 4 s after the request
// answered just before the reset, and the server cannot expire the session
// until 2 s after the deadline.
const LeaseTimeout = 6 * time.Second

// DeadlineSlack is how late after its deadline a lease may end in those
// tests (scheduling on a busy machine); well under the third of
// LeaseTimeout left before the server may expire the session.
const DeadlineSlack = time.Second

// Answered sends a request on s and waits for its answer: from then on the
// Standard lease deadline is at least two thirds of the session timeout
// after the time Answered returns, which it returns (taken before the
// request was sent).
func Answered(t testing.TB, s *session.Session) time.Time {
	t.Helper()
	before := time.Now()
	if _, _, err := s.Conn().Exists("/"); err != nil {
		t.Fatalf("sessiontest: exists: %v", err)
	}
	return before
}

// Reset resets s's connection through p (Proxy.Cut) right after a request
// of s was answered, and waits until the same session is back
// (Reconnected): with LeaseTimeout that comes well before the lease
// deadline. It fails the test if the session changed.
func Reset(t testing.TB, s *session.Session, p *zktest.Proxy) {
	t.Helper()
	rec := Record(t, s)
	defer rec.Stop()
	sid := s.SessionID()
	Answered(t, s)
	p.Cut()
	rec.Wait(t, ConnectTimeout, session.Suspended)
	if ev := rec.Wait(t, ConnectTimeout, session.Reconnected); ev.SessionID != sid {
		t.Fatalf("sessiontest: reconnected to session 0x%x, want the same 0x%x", ev.SessionID, sid)
	}
}

// Silence is a connection reset followed by silence: the proxy refuses
// every new connection until End.
type Silence struct {
	p   *zktest.Proxy
	rec *Recorder
	sid int64
	// Before is a time before the newest answered request was sent, Cut
	// when the connection was reset: the lease deadline lies between
	// Before and Cut plus two thirds of the session timeout.
	Before, Cut time.Time
	timeout     time.Duration
}

// ResetThenSilence resets s's connection through p right after a request of
// s was answered, keeps p refusing new connections, and waits for
// Suspended. Call End to let the client in again (t.Cleanup does too).
func ResetThenSilence(t testing.TB, s *session.Session, p *zktest.Proxy) *Silence {
	t.Helper()
	sl := &Silence{p: p, rec: Record(t, s), sid: s.SessionID(), timeout: s.SessionTimeout()}
	sl.Before = Answered(t, s)
	p.Refuse(true)
	p.Cut()
	sl.Cut = time.Now()
	t.Cleanup(func() { p.Refuse(false) })
	sl.rec.Wait(t, ConnectTimeout, session.Suspended)
	return sl
}

// Deadline returns the latest the lease deadline can be.
func (sl *Silence) Deadline() time.Time { return sl.Cut.Add(sl.timeout * 2 / 3) }

// WaitEnded waits for done (a lease's Done channel) to close, and fails the
// test unless it closes at the lease deadline: not before Before plus two
// thirds of the session timeout, and not more than DeadlineSlack after
// Deadline. It returns when done was seen closed.
func (sl *Silence) WaitEnded(t testing.TB, done <-chan struct{}, what string) time.Time {
	t.Helper()
	limit := time.NewTimer(time.Until(sl.Deadline()) + DeadlineSlack)
	defer limit.Stop()
	select {
	case <-done:
	case <-limit.C:
		t.Fatalf("sessiontest: %s still held %v after the reset, past its deadline (%v after the last answered request) and the slack",
			what, time.Since(sl.Cut).Round(time.Millisecond), sl.timeout*2/3)
	}
	at := time.Now()
	if early := sl.Before.Add(sl.timeout * 2 / 3); at.Before(early) {
		t.Fatalf("sessiontest: %s ended %v after the reset, before its deadline", what, at.Sub(sl.Cut).Round(time.Millisecond))
	}
	return at
}

// End lets the client in again and waits until it is back: Reconnected, to
// the same session when it came in time (true), else after Lost to a new
// one (false).
func (sl *Silence) End(t testing.TB) (same bool) {
	t.Helper()
	sl.p.Refuse(false)
	ev := sl.rec.Wait(t, ConnectTimeout, session.Reconnected)
	sl.rec.Stop()
	return ev.SessionID == sl.sid
}
