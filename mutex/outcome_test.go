package mutex_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/internal/testkit/sessiontest"
	"github.com/zkrecipes/zkrecipes/mutex"
	"github.com/zkrecipes/zkrecipes/recipes"
	"github.com/zkrecipes/zkrecipes/session"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// TestCommitOutcome: a guarded write whose answer is lost says
// recipes.ErrUnknownOutcome (and the server did apply it); one made while
// the connection is down waits for it within ctx, returns ctx's error, and
// is never sent.
func TestCommitOutcome(t *testing.T) {
	sessiontest.CheckOutcomes(t, sessiontest.CommitCase("Lease.Commit",
		func(t *testing.T, s *session.Session) func(context.Context, ...any) ([]zk.MultiResponse, error) {
			m, err := mutex.New(s, lockPath)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { m.Close() })
			l, err := m.Lock(ctxT(t))
			if err != nil {
				t.Fatal(err)
			}
			return l.Commit
		}))
}

// TestCommitWaitEndsWithLease: a guarded write made while the connection is
// down waits for it; when the lease ends meanwhile (Standard: at its
// deadline) it returns recipes.ErrNotHeld with the lease's cause, before
// ctx, without matching recipes.ErrUnknownOutcome, and nothing was sent.
func TestCommitWaitEndsWithLease(t *testing.T) {
	ns := zktest.NewNamespace(t)
	s, p := sessiontest.ConnectProxy(t, ns, session.WithSessionTimeout(3*time.Second))
	rec := sessiontest.Record(t, s)
	m, err := mutex.New(s, lockPath)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	l, err := m.Lock(ctxT(t))
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
	rec.Wait(t, wait, session.Suspended)
	if l.Err() != nil {
		t.Fatalf("the lease ended at the disconnect (%v): the test needs it to outlive it", l.Err())
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err = l.Commit(ctx, &zk.CreateRequest{Path: "/written", Data: []byte("x")})
	switch {
	case !errors.Is(err, recipes.ErrNotHeld) || !errors.Is(err, session.ErrSuspended):
		t.Fatalf("Commit waiting when the lease ended: %v, want ErrNotHeld and ErrSuspended", err)
	case errors.Is(err, recipes.ErrUnknownOutcome):
		t.Fatalf("Commit waiting when the lease ended: %v matches ErrUnknownOutcome, but nothing was sent", err)
	case ctx.Err() != nil:
		t.Fatal("Commit returned at its ctx, not at the lease's end")
	case multis.Load() != 0:
		t.Fatal("the transaction was sent")
	}
	if ok, _, err := ns.Conn(t).Exists(ns.Path("written")); err != nil || ok {
		t.Fatalf("the server holds the write (%v, %v)", ok, err)
	}
}
