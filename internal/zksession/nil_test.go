package zksession_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/internal/testkit/sessiontest"
	"github.com/zkrecipes/zkrecipes/internal/zksession"
	"github.com/zkrecipes/zkrecipes/session"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// nilCtx is a nil context.Context, as a careless caller passes it.
var nilCtx context.Context

// TestNilInputs: every entry point of the session package refuses a nil
// context, a nil function and a nil epoch with an error matching its
// bad-argument sentinel, before it starts anything.
func TestNilInputs(t *testing.T) {
	ns := zktest.NewNamespace(t)
	raw := ns.Conn(t)
	s := sessiontest.Connect(t, ns)
	ctx := ctxT(t, wait)
	ep := sessiontest.Core(s).Epoch()
	node := ns.Root + "/n"
	op := func(*zk.Conn) error { return nil }

	sessiontest.CheckNilCases(t, raw, ns.Root, []sessiontest.NilCase{
		{Name: "Connect nil ctx", Call: func(t *testing.T) error {
			s, err := session.Connect(nilCtx, ns.Servers())
			if s != nil {
				t.Errorf("Connect returned a session")
				s.Close()
			}
			return err
		}, Want: session.ErrBadArgument, Arg: "nil context"},
		{Name: "Connect retry factory returning nil", Call: func(t *testing.T) error {
			s, err := session.Connect(ctx, ns.Servers(),
				session.WithRetry(func() backoff.BackOff { return nil }))
			if s != nil {
				t.Errorf("Connect returned a session")
				s.Close()
			}
			return err
		}, Want: session.ErrBadArgument, Arg: "retry"},
		{Name: "WaitConnected nil ctx", Call: func(t *testing.T) error {
			ep, err := sessiontest.Core(s).WaitConnected(nilCtx)
			if ep != nil {
				t.Errorf("WaitConnected returned an epoch")
			}
			return err
		}, Want: session.ErrBadArgument, Arg: "nil context"},
		{Name: "WaitLease nil ctx", Call: func(t *testing.T) error {
			ep, lease, err := sessiontest.Core(s).WaitLease(nilCtx)
			if ep != nil || lease != nil {
				t.Errorf("WaitLease returned %v, %v", ep, lease)
			}
			return err
		}, Want: session.ErrBadArgument, Arg: "nil context"},
		{Name: "Retry nil ctx", Call: func(*testing.T) error {
			return sessiontest.Core(s).Retry(nilCtx, ep, op)
		}, Want: session.ErrBadArgument, Arg: "nil context"},
		{Name: "Retry nil op", Call: func(*testing.T) error {
			return sessiontest.Core(s).Retry(ctx, ep, nil)
		}, Want: session.ErrBadArgument, Arg: "nil op"},
		{Name: "Retry nil epoch", Call: func(*testing.T) error {
			return sessiontest.Core(s).Retry(ctx, nil, op)
		}, Want: zksession.ErrBadEpoch, Arg: "nil epoch"},
		{Name: "EnsureContainers nil ctx", Call: func(*testing.T) error {
			return sessiontest.Core(s).EnsureContainers(nilCtx, node)
		}, Want: session.ErrBadArgument, Arg: "nil context"},
		{Name: "EnsureContainers empty path", Call: func(*testing.T) error {
			return sessiontest.Core(s).EnsureContainers(ctx, "")
		}, Want: session.ErrBadArgument, Arg: "empty"},
		{Name: "CreateEphemeral nil ctx", Call: func(t *testing.T) error {
			p, st, err := sessiontest.Core(s).CreateEphemeral(nilCtx, ep, node, nil, 0)
			if p != "" || st != nil {
				t.Errorf("CreateEphemeral returned %q, %v", p, st)
			}
			return err
		}, Want: session.ErrBadArgument, Arg: "nil context"},
		{Name: "CreateEphemeral nil epoch", Call: func(*testing.T) error {
			_, _, err := sessiontest.Core(s).CreateEphemeral(ctx, nil, node, nil, 0)
			return err
		}, Want: zksession.ErrBadEpoch, Arg: "nil epoch"},
		{Name: "CreateEphemeral empty path", Call: func(*testing.T) error {
			_, _, err := sessiontest.Core(s).CreateEphemeral(ctx, ep, "", nil, 0)
			return err
		}, Want: session.ErrBadArgument, Arg: "empty"},
		{Name: "Path empty", Call: func(*testing.T) error {
			_, err := s.Path("")
			return err
		}, Want: session.ErrBadArgument, Arg: "empty"},
	})
}

// TestNilEpoch: a nil *Epoch behaves as an epoch that has ended: Lost is
// closed, Err and the cause of Context match ErrBadEpoch; the numbers are 0.
func TestNilEpoch(t *testing.T) {
	var ep *zksession.Epoch
	p, err := sessiontest.CatchPanic(func() error {
		select {
		case <-ep.Lost():
		default:
			t.Error("Lost of a nil epoch is not closed")
		}
		if err := ep.Err(); !errors.Is(err, zksession.ErrBadEpoch) || !strings.Contains(err.Error(), "nil epoch") {
			t.Errorf("Err = %v, want ErrBadEpoch naming the nil epoch", err)
		}
		ctx := ep.Context()
		if ctx.Err() == nil || !errors.Is(context.Cause(ctx), zksession.ErrBadEpoch) {
			t.Errorf("Context: err %v, cause %v", ctx.Err(), context.Cause(ctx))
		}
		if ep.SessionID() != 0 || ep.Seq() != 0 {
			t.Errorf("SessionID %d, Seq %d", ep.SessionID(), ep.Seq())
		}
		if s := ep.String(); !strings.Contains(s, "nil") {
			t.Errorf("String = %q", s)
		}
		return nil
	})
	if p != nil || err != nil {
		t.Fatalf("panic: %v", p)
	}
	// A session refuses it as before.
	ns := zktest.NewNamespace(t)
	s := sessiontest.Connect(t, ns)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := sessiontest.Core(s).Retry(ctx, ep, func(*zk.Conn) error { return nil }); !errors.Is(err, zksession.ErrBadEpoch) {
		t.Fatalf("Retry(nil epoch) = %v", err)
	}
}
