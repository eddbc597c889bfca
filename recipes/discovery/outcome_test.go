package discovery_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/internal/testkit/sessiontest"
	"github.com/zkrecipes/zkrecipes/recipes"
	"github.com/zkrecipes/zkrecipes/recipes/discovery"
	"github.com/zkrecipes/zkrecipes/session"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// TestUpdateOutcome: an Update whose write went out but whose answer has
// not come when ctx ends says recipes.ErrUnknownOutcome with ctx's error
// (and the server applies it); one made while the connection is down says
// ctx's error alone; either way the data is written once the connection is
// back.
func TestUpdateOutcome(t *testing.T) {
	for _, typ := range []discovery.ServiceType{discovery.Dynamic, discovery.Static} {
		t.Run(typ.String(), func(t *testing.T) {
			ns := zktest.NewNamespace(t)
			raw := ns.Conn(t)
			s, p := sessiontest.ConnectProxy(t, ns, session.WithSessionTimeout(10*time.Second))
			r := register(t, s, discovery.Instance{Name: "svc", ID: "a", Port: 1, Type: typ})
			holds := func(port int) func() bool {
				return func() bool {
					d, _, err := raw.Get(ns.Path("services/svc/a"))
					var in discovery.Instance
					return err == nil && json.Unmarshal(d, &in) == nil && in.Port == port
				}
			}
			update := func(port int, d time.Duration) error {
				in := r.Instance()
				in.Port = port
				ctx, cancel := context.WithTimeout(ctxT(t), d)
				defer cancel()
				return r.Update(ctx, in)
			}

			// The answer swallowed: the server applies the write, the client
			// sees its connection close, and ctx ends before it is back.
			var swallowed atomic.Bool
			states := sessiontest.Record(t, s)
			full := ns.Path("services/svc/a")
			p.OnRequest(func(r zktest.Request) zktest.Action {
				if zktest.OpName(r.Op) == "setData" && r.Path == full && swallowed.CompareAndSwap(false, true) {
					return zktest.SwallowReply
				}
				return zktest.Forward
			})
			err := update(2, 300*time.Millisecond)
			if !errors.Is(err, recipes.ErrUnknownOutcome) || !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("Update whose answer was lost: %v (swallowed: %v), want recipes.ErrUnknownOutcome and ctx's error", err, swallowed.Load())
			}
			zktest.Eventually(t, wait, holds(2), "the write applied")
			p.OnRequest(nil)
			states.Wait(t, wait, session.Reconnected) // after the swallow closed the connection

			// The connection down all along: nothing went out.
			rec := sessiontest.Record(t, s)
			p.Refuse(true)
			p.Cut()
			rec.Wait(t, wait, session.Suspended)
			err = update(3, 300*time.Millisecond)
			if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, recipes.ErrUnknownOutcome) {
				t.Fatalf("Update while disconnected: %v, want ctx's error alone", err)
			}
			p.Refuse(false)
			rec.Wait(t, wait, session.Reconnected)
			zktest.Eventually(t, wait, holds(3), "the data written once the connection is back")
			waitFor(t, "Wait", r.Wait)
		})
	}
}
