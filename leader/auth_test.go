package leader_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/internal/testkit/sessiontest"
	"github.com/zkrecipes/zkrecipes/leader"
	"github.com/zkrecipes/zkrecipes/session"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// protectElection creates the election path with a digest ACL, from a
// session that holds the credentials, and returns that session. The path and
// whatever is left under it are deleted in t.Cleanup (the harness's own
// client could not remove them).
func protectElection(t *testing.T, ns *zktest.Namespace) *session.Session {
	t.Helper()
	acl := zk.DigestACL(zk.PermAll, "alice", "secret")
	owner := sessiontest.Connect(t, ns, session.WithDigestAuth("alice", "secret"), session.WithACL(acl))
	full, err := owner.Path(electionPath)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := owner.Conn().Create(full, nil, 0, acl); err != nil {
		t.Fatalf("create %s: %v", full, err)
	}
	t.Cleanup(func() {
		kids, _, _ := owner.Conn().Children(full)
		for _, k := range kids {
			_ = owner.Conn().Delete(full+"/"+k, -1)
		}
		_ = owner.Conn().Delete(full, -1)
	})
	return owner
}

// A participant whose credentials the election path's ACL refuses gets an
// error wrapping zk.ErrNoAuth at once, instead of retrying forever: from
// Latch.Await, Latch.Err, Selector.Err and Run. Changes channels close. A
// participant with the credentials leads.
func TestElectionNoAuth(t *testing.T) {
	ns := zktest.NewNamespace(t)
	owner := protectElection(t, ns)
	ctx := ctxT(t)

	t.Run("latch", func(t *testing.T) {
		l, err := leader.NewLatch(sessiontest.Connect(t, ns), electionPath, leader.WithID("intruder"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		chCtx, cancel := context.WithCancel(ctx)
		defer cancel()
		changes := l.Changes(chCtx) // before Start
		if err := l.Start(); err != nil {
			t.Fatal(err)
		}
		actx, acancel := context.WithTimeout(ctx, wait)
		defer acancel()
		_, err = l.Await(actx)
		if !errors.Is(err, zk.ErrNoAuth) {
			t.Fatalf("Await = %v, want zk.ErrNoAuth", err)
		}
		t.Logf("Await: %v", err)
		if err := l.Err(); !errors.Is(err, zk.ErrNoAuth) {
			t.Errorf("Err = %v, want zk.ErrNoAuth", err)
		}
		if l.IsLeader() {
			t.Error("IsLeader after the election stopped")
		}
		for _, ch := range []<-chan leader.Event{changes, l.Changes(chCtx)} {
			drainClosed(t, ch)
		}
		if err := l.Close(); err != nil {
			t.Errorf("Close = %v", err)
		}
		if err := l.Err(); !errors.Is(err, zk.ErrNoAuth) {
			t.Errorf("Err after Close = %v, want the error that stopped the election", err)
		}
	})

	t.Run("selector", func(t *testing.T) {
		sel := newSelector(t, sessiontest.Connect(t, ns), "intruder", func(context.Context) error {
			t.Error("callback ran without credentials")
			return nil
		})
		if err := sel.Err(); err != nil {
			t.Errorf("Err before Start = %v", err)
		}
		if err := sel.Start(); err != nil {
			t.Fatal(err)
		}
		select {
		case <-sel.Done():
		case <-time.After(wait):
			t.Fatal("Done not closed")
		}
		if err := sel.Err(); !errors.Is(err, zk.ErrNoAuth) {
			t.Errorf("Err = %v, want zk.ErrNoAuth", err)
		}
		if _, err := sel.Requeue(); !errors.Is(err, zk.ErrNoAuth) {
			t.Errorf("Requeue = %v, want zk.ErrNoAuth", err)
		}
		if err := sel.Close(); err != nil {
			t.Errorf("Close = %v", err)
		}
		if err := sel.Err(); !errors.Is(err, zk.ErrNoAuth) {
			t.Errorf("Err after Close = %v, want the error that stopped the election", err)
		}
	})

	t.Run("run", func(t *testing.T) {
		rctx, cancel := context.WithTimeout(ctx, wait)
		defer cancel()
		err := leader.Run(rctx, sessiontest.Connect(t, ns), electionPath, func(context.Context) error {
			t.Error("work ran without credentials")
			return nil
		}, leader.WithID("intruder"))
		if !errors.Is(err, zk.ErrNoAuth) || rctx.Err() != nil {
			t.Fatalf("Run = %v (ctx %v), want zk.ErrNoAuth before ctx ends", err, rctx.Err())
		}
	})

	t.Run("with credentials", func(t *testing.T) {
		s := sessiontest.Connect(t, ns, session.WithDigestAuth("alice", "secret"),
			session.WithACL(zk.DigestACL(zk.PermAll, "alice", "secret")))
		l := startLatch(t, s, "alice")
		term := await(t, l)
		checkTermNode(t, owner.Conn(), s, term)
		if err := l.Err(); err != nil {
			t.Errorf("Err while leading = %v", err)
		}
		l.Close()
		if err := l.Err(); !errors.Is(err, session.ErrClosed) {
			t.Errorf("Err after Close = %v, want ErrClosed", err)
		}
	})
}

// drainClosed reads ch until it is closed, failing the test if that takes
// longer than wait.
func drainClosed(t testing.TB, ch <-chan leader.Event) {
	t.Helper()
	deadline := time.After(wait)
	for {
		select {
		case ev, open := <-ch:
			if !open {
				return
			}
			if ev.Leader {
				t.Errorf("event %+v after the election stopped", ev)
			}
		case <-deadline:
			t.Fatal("Changes channel not closed after the election stopped")
		}
	}
}
