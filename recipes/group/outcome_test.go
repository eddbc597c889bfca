package group_test

import (
	"context"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/internal/testkit/sessiontest"
	"github.com/zkrecipes/zkrecipes/recipes/group"
	"github.com/zkrecipes/zkrecipes/session"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// TestSetDataOutcome: a node's or a member's SetData whose write's answer
// is lost says recipes.ErrUnknownOutcome (and the server did apply it); one
// made while the connection is down returns ctx's error within ctx, nothing
// is sent meanwhile, and the data is written once the connection is back.
func TestSetDataOutcome(t *testing.T) {
	setup := func(start func(*testing.T, *session.Session) (node string, set func(context.Context, []byte) error)) func(*testing.T, *zktest.Namespace) sessiontest.OutcomeWrite {
		return func(t *testing.T, ns *zktest.Namespace) sessiontest.OutcomeWrite {
			s, p := sessiontest.ConnectProxy(t, ns, session.WithSessionTimeout(10*time.Second))
			node, set := start(t, s)
			raw := ns.Conn(t)
			full := ns.Path(node)
			return sessiontest.OutcomeWrite{
				Session: s,
				Proxy:   p,
				Request: func(r zktest.Request) bool { return zktest.OpName(r.Op) == "setData" && r.Path == full },
				Call:    func(ctx context.Context) error { return set(ctx, []byte("new")) },
				Applied: func(t *testing.T) bool {
					d, _, ok := stat(t, raw, full)
					return ok && string(d) == "new"
				},
			}
		}
	}
	sessiontest.CheckOutcomes(t,
		sessiontest.OutcomeCase{Name: "Node.SetData", Later: true, Setup: setup(
			func(t *testing.T, s *session.Session) (string, func(context.Context, []byte) error) {
				n := startNode(t, s, "/nodes/a", group.Ephemeral, "old")
				waitFor(t, "Wait", n.Wait)
				return "/nodes/a", n.SetData
			})},
		sessiontest.OutcomeCase{Name: "Member.SetData", Later: true, Setup: setup(
			func(t *testing.T, s *session.Session) (string, func(context.Context, []byte) error) {
				m := startMember(t, s, "/members", "m1", "old")
				waitFor(t, "Wait", m.Wait)
				return "/members/m1", m.SetData
			})},
	)
}
