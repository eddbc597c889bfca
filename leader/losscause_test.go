package leader_test

import (
	"context"
	"errors"
	"testing"

	"github.com/zkrecipes/zkrecipes/internal/testkit/sessiontest"
	"github.com/zkrecipes/zkrecipes/leader"
	"github.com/zkrecipes/zkrecipes/session"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// checkTermLost checks a term that ended at a suspension after its session
// was reported Lost: Err matches session.ErrLost and still
// session.ErrSuspended, while the context's cause stays the suspension.
func checkTermLost(t *testing.T, term *leader.Term) {
	t.Helper()
	if !ended(term) {
		t.Fatal("the term has not ended")
	}
	cause := context.Cause(term.Context())
	if !errors.Is(cause, session.ErrSuspended) {
		t.Fatalf("the term ended with %v, want a suspension first", cause)
	}
	err := term.Err()
	if !errors.Is(err, session.ErrLost) {
		t.Errorf("after Lost, term Err() = %v: does not match session.ErrLost", err)
	}
	if !errors.Is(err, session.ErrSuspended) {
		t.Errorf("after Lost, term Err() = %v: no longer matches session.ErrSuspended", err)
	}
	t.Logf("term Err after Lost: %v", err)
}

// TestTermLossCauseInstantExpiry: end-at-disconnect policy; the leader's
// session is expired on the server at once: its term ends at the
// suspension, and once the session reports Lost, Term.Err matches
// session.ErrLost.
func TestTermLossCauseInstantExpiry(t *testing.T) {
	ns := zktest.NewNamespace(t)
	s, tap := sessiontest.ConnectTap(t, ns, session.WithLossPolicy(session.EndAtDisconnect))
	l := startLatch(t, s, "x")
	term := await(t, l)
	rec := sessiontest.Record(t, s)
	sessiontest.Expire(t, s, tap)
	rec.Wait(t, wait, session.Lost)
	checkTermLost(t, term)
}

// TestTermLossCausePartition: standard policy; the leader is partitioned past
// its session timeout (Suspended, then Lost by the local timer). The work
// of Run sees its term's Err match session.ErrLost once the session is Lost.
func TestTermLossCausePartition(t *testing.T) {
	ns := zktest.NewNamespace(t)
	s, p := sessiontest.ConnectProxy(t, ns)
	terms := make(chan *leader.Term, 1)
	startRun(t, s, "x", func(ctx context.Context) error {
		term, _ := leader.TermFromContext(ctx)
		select {
		case terms <- term:
		default:
		}
		<-ctx.Done()
		return ctx.Err()
	})
	var term *leader.Term
	select {
	case term = <-terms:
	case <-ctxT(t).Done():
		t.Fatal("Run never led")
	}
	rec := sessiontest.Record(t, s)
	p.Partition()
	defer p.Heal()
	rec.Wait(t, wait, session.Suspended)
	// While the session may still be alive, Err does not say it is lost. (No
	// new epoch can begin during the partition: s.Epoch() is the term's.)
	if err := term.Err(); errors.Is(err, session.ErrLost) && sessiontest.Core(s).Epoch().Err() == nil {
		t.Errorf("suspended, not lost: term Err() = %v matches session.ErrLost", err)
	}
	rec.Wait(t, wait, session.Lost)
	checkTermLost(t, term)
}
