package group_test

import (
	"context"
	"strings"
	"testing"

	"github.com/zkrecipes/zkrecipes/internal/testkit/sessiontest"
	"github.com/zkrecipes/zkrecipes/recipes/group"
	"github.com/zkrecipes/zkrecipes/session"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// TestBadInput: nil and otherwise bad arguments give an error matching
// session.ErrBadArgument that names the argument, no panic, no goroutine
// left and no znode created.
func TestBadInput(t *testing.T) {
	ns := zktest.NewNamespace(t)
	raw := ns.Conn(t)
	s := sessiontest.Connect(t, ns)
	n := startNode(t, s, nodePath, group.Ephemeral, "v1")
	waitFor(t, "Wait", n.Wait)
	m := startMember(t, s, "/group", "a", "")
	waitFor(t, "Member.Wait", m.Wait)
	big := make([]byte, 512<<10+1)
	newNode := func(sess *session.Session, p string, mode group.Mode, data []byte, opts ...group.Option) func(*testing.T) error {
		return func(t *testing.T) error {
			got, err := group.NewNode(sess, p, mode, data, opts...)
			if got != nil {
				t.Errorf("NewNode returned a Node with error %v", err)
			}
			return err
		}
	}
	newMember := func(sess *session.Session, p, id string, opts ...group.Option) func(*testing.T) error {
		return func(t *testing.T) error {
			got, err := group.NewMember(sess, p, id, nil, opts...)
			if got != nil {
				t.Errorf("NewMember returned a Member with error %v", err)
			}
			return err
		}
	}
	var nilCtx context.Context
	bad := session.ErrBadArgument
	sessiontest.CheckNilCases(t, raw, ns.Root, []sessiontest.NilCase{
		{Name: "NewNode nil session", Call: newNode(nil, "/x", group.Ephemeral, nil), Want: bad, Arg: "nil session"},
		{Name: "NewNode empty path", Call: newNode(s, "", group.Ephemeral, nil), Want: bad, Arg: "empty"},
		{Name: "NewNode relative path", Call: newNode(s, "x", group.Ephemeral, nil), Want: bad, Arg: "must start with '/'"},
		{Name: "NewNode trailing slash", Call: newNode(s, "/x/", group.Ephemeral, nil), Want: bad, Arg: "trailing"},
		{Name: "NewNode NUL", Call: newNode(s, "/x\x00", group.Ephemeral, nil), Want: bad, Arg: "NUL"},
		{Name: "NewNode zero mode", Call: newNode(s, "/x", 0, nil), Want: bad, Arg: "mode"},
		{Name: "NewNode unknown mode", Call: newNode(s, "/x", 99, nil), Want: bad, Arg: "Mode(99)"},
		{Name: "NewNode data too large", Call: newNode(s, "/x", group.Ephemeral, big), Want: bad, Arg: "data of"},
		{Name: "NewNode nil option", Call: newNode(s, "/x", group.Ephemeral, nil, nil), Want: bad, Arg: "nil option"},
		{Name: "NewNode nil logger", Call: newNode(s, "/x", group.Ephemeral, nil, group.WithLogger(nil)), Want: bad, Arg: "nil logger"},
		{Name: "Node.Wait nil ctx", Call: func(*testing.T) error { return n.Wait(nilCtx) }, Want: bad, Arg: "nil context"},
		{Name: "Node.SetData nil ctx", Call: func(*testing.T) error { return n.SetData(nilCtx, nil) }, Want: bad, Arg: "nil context"},
		{Name: "Node.SetData too large", Call: func(t *testing.T) error { return n.SetData(ctxT(t), big) }, Want: bad, Arg: "data of"},
		{Name: "NewMember nil session", Call: newMember(nil, "/g", "a"), Want: bad, Arg: "nil session"},
		{Name: "NewMember bad path", Call: newMember(s, "g", "a"), Want: bad, Arg: "must start with '/'"},
		{Name: "NewMember empty id", Call: newMember(s, "/g", ""), Want: bad, Arg: "member id"},
		{Name: "NewMember id with slash", Call: newMember(s, "/g", "a/b"), Want: bad, Arg: `"a/b"`},
		{Name: "NewMember id dot-dot", Call: newMember(s, "/g", ".."), Want: bad, Arg: `".."`},
		{Name: "NewMember id NUL", Call: newMember(s, "/g", "a\x00"), Want: bad, Arg: "NUL"},
		{Name: "NewMember nil option", Call: newMember(s, "/g", "a", nil), Want: bad, Arg: "nil option"},
		{Name: "Member.Wait nil ctx", Call: func(*testing.T) error { return m.Wait(nilCtx) }, Want: bad, Arg: "nil context"},
		{Name: "Member.SetData nil ctx", Call: func(*testing.T) error { return m.SetData(nilCtx, nil) }, Want: bad, Arg: "nil context"},
	})
	// Changes with a nil ctx: a closed channel, no panic.
	if _, ok := <-m.Changes(nilCtx); ok {
		t.Error("Changes(nil) delivered a view, want a closed channel")
	}
	// Errors name the recipe and the path once.
	_, err := group.NewNode(s, "/x/", group.Ephemeral, nil)
	if msg := err.Error(); strings.Count(msg, "/x/") != 1 || !strings.HasPrefix(msg, `group "/x/"`) {
		t.Errorf("error %q: want it to start with group \"/x/\" and name the path once", msg)
	}
}
