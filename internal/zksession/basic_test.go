package zksession_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/zkrecipes/zkrecipes/internal/testkit/sessiontest"
	"github.com/zkrecipes/zkrecipes/session"
	"github.com/zkrecipes/zkrecipes/zktest"
)

func ctxT(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func TestConnectCreateClose(t *testing.T) {
	ns := zktest.NewNamespace(t)
	s := sessiontest.Connect(t, ns)
	if got := s.State(); got != session.Connected {
		t.Fatalf("state = %v, want Connected", got)
	}
	ep := sessiontest.Core(s).Epoch()
	if ep == nil || ep.SessionID() == 0 || ep.Err() != nil || ep.Seq() != 1 {
		t.Fatalf("bad first epoch %v err=%v", ep, ep.Err())
	}
	if id := s.Conn().SessionID(); id != ep.SessionID() {
		t.Fatalf("epoch session 0x%x, conn session 0x%x", ep.SessionID(), id)
	}
	if got := s.SessionTimeout(); got != sessiontest.SessionTimeout {
		t.Fatalf("negotiated timeout %v, want %v", got, sessiontest.SessionTimeout)
	}
	ctx := ctxT(t, 10*time.Second)
	dir, err := s.Path("/locks/a")
	if err != nil {
		t.Fatal(err)
	}
	if dir != ns.Root+"/locks/a" {
		t.Fatalf("Path = %q", dir)
	}
	if err := sessiontest.Core(s).EnsureContainers(ctx, dir); err != nil {
		t.Fatal(err)
	}
	p, st, err := sessiontest.Core(s).CreateEphemeral(ctx, ep, dir+"/n-", []byte("x"), zk.FlagSequence)
	if err != nil {
		t.Fatal(err)
	}
	if st.EphemeralOwner != ep.SessionID() {
		t.Fatalf("owner 0x%x", st.EphemeralOwner)
	}
	raw := ns.Conn(t)
	if ok, _, err := raw.Exists(p); err != nil || !ok {
		t.Fatalf("exists %s: %v %v", p, ok, err)
	}
	lease := sessiontest.Core(s).LeaseContext()
	if lease.Err() != nil {
		t.Fatal("lease context canceled while connected")
	}
	s.Close()
	s.Close()
	if !errors.Is(context.Cause(lease), session.ErrClosed) {
		t.Fatalf("lease cause %v", context.Cause(lease))
	}
	if !errors.Is(ep.Err(), session.ErrClosed) {
		t.Fatalf("epoch err %v", ep.Err())
	}
	if s.State() != session.Closed {
		t.Fatalf("state %v", s.State())
	}
	zktest.Eventually(t, 5*time.Second, func() bool {
		ok, _, err := raw.Exists(p)
		return err == nil && !ok
	}, "ephemeral %s still there after Close", p)
	if _, _, err := sessiontest.Core(s).CreateEphemeral(ctx, ep, dir+"/m", nil, 0); !errors.Is(err, session.ErrClosed) {
		t.Fatalf("create after close: %v", err)
	}
	if err := sessiontest.Core(s).Retry(ctx, ep, func(*zk.Conn) error { return nil }); !errors.Is(err, session.ErrClosed) {
		t.Fatalf("retry after close: %v", err)
	}
	if _, err := sessiontest.Core(s).WaitConnected(ctx); !errors.Is(err, session.ErrClosed) {
		t.Fatalf("wait after close: %v", err)
	}
}
