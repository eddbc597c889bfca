package leader_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/internal/testkit/sessiontest"
	"github.com/zkrecipes/zkrecipes/leader"
	"github.com/zkrecipes/zkrecipes/recipes"
	"github.com/zkrecipes/zkrecipes/session"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// TestCommitOutcome: a term's guarded write whose answer is lost says
// recipes.ErrUnknownOutcome (and the server did apply it); one made while
// the connection is down waits for it within ctx, returns ctx's error, and
// is never sent.
func TestCommitOutcome(t *testing.T) {
	sessiontest.CheckOutcomes(t, sessiontest.CommitCase("Term.Commit",
		func(t *testing.T, s *session.Session) func(context.Context, ...any) ([]zk.MultiResponse, error) {
			l, err := leader.NewLatch(s, "/lead")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { l.Close() })
			if err := l.Start(); err != nil {
				t.Fatal(err)
			}
			term, err := l.Await(ctxT(t))
			if err != nil {
				t.Fatal(err)
			}
			return term.Commit
		}))
}

// TestCommitWaitEndsWithTerm: a term's guarded write made while the
// connection is down waits for it; the term resigned meanwhile, it returns
// recipes.ErrNotHeld with recipes.ErrReleased, before ctx, without matching
// recipes.ErrUnknownOutcome, and nothing is sent, not even once the
// connection is back.
func TestCommitWaitEndsWithTerm(t *testing.T) {
	ns := zktest.NewNamespace(t)
	s, p := sessiontest.ConnectProxy(t, ns, session.WithSessionTimeout(10*time.Second))
	rec := sessiontest.Record(t, s)
	l, err := leader.NewLatch(s, "/lead")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := l.Start(); err != nil {
		t.Fatal(err)
	}
	term, err := l.Await(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	var multis atomic.Int32
	p.OnRequest(func(r zktest.Request) zktest.Action {
		if r.Op == zktest.OpMulti {
			multis.Add(1)
		}
		return zktest.Forward
	})
	p.Refuse(true)
	p.Cut()
	defer p.Heal()
	rec.Wait(t, 30*time.Second, session.Suspended)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := term.Commit(ctx, &zk.CreateRequest{Path: "/written", Data: []byte("x")})
		done <- err
	}()
	term.Resign()
	err = sessiontest.Recv(t, done, 30*time.Second, "Commit after the term resigned")
	switch {
	case !errors.Is(err, recipes.ErrNotHeld) || !errors.Is(err, recipes.ErrReleased):
		t.Fatalf("Commit waiting when the term ended: %v, want ErrNotHeld and ErrReleased", err)
	case errors.Is(err, recipes.ErrUnknownOutcome):
		t.Fatalf("Commit waiting when the term ended: %v matches ErrUnknownOutcome, but nothing was sent", err)
	case ctx.Err() != nil:
		t.Fatal("Commit returned at its ctx, not at the term's end")
	}
	p.Heal()
	rec.Wait(t, 30*time.Second, session.Reconnected)
	if _, _, err := sessiontest.Core(s).Conn().Exists("/"); err != nil { // behind anything still queued
		t.Fatal(err)
	}
	if ok, _, err := ns.Conn(t).Exists(ns.Path("written")); err != nil || ok || multis.Load() != 0 {
		t.Fatalf("the write: on the server %v (%v), %d transactions seen", ok, err, multis.Load())
	}
}
