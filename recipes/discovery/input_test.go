package discovery_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/internal/testkit/sessiontest"
	"github.com/zkrecipes/zkrecipes/recipes/discovery"
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
	r := register(t, s, discovery.Instance{Name: "svc", ID: "a"})
	c := newCache(t, s, "svc")
	waitInit(t, c)
	ok := discovery.Instance{Name: "svc", ID: "b"}
	with := func(f func(*discovery.Instance)) discovery.Instance {
		in := ok
		f(&in)
		return in
	}
	reg := func(sess *session.Session, b string, in discovery.Instance, opts ...discovery.Option) func(*testing.T) error {
		return func(t *testing.T) error {
			got, err := discovery.Register(sess, b, in, opts...)
			if got != nil {
				t.Errorf("Register returned a Registration with error %v", err)
				got.Close()
			}
			return err
		}
	}
	newC := func(sess *session.Session, b, name string, opts ...discovery.Option) func(*testing.T) error {
		return func(t *testing.T) error {
			got, err := discovery.NewCache(sess, b, name, opts...)
			if got != nil {
				t.Errorf("NewCache returned a Cache with error %v", err)
				got.Close()
			}
			return err
		}
	}
	newP := func(c *discovery.Cache, opts ...discovery.Option) func(*testing.T) error {
		return func(t *testing.T) error {
			got, err := discovery.NewProvider(c, opts...)
			if got != nil {
				t.Errorf("NewProvider returned a Provider with error %v", err)
			}
			return err
		}
	}
	var nilCtx context.Context
	bad := session.ErrBadArgument
	sessiontest.CheckNilCases(t, raw, ns.Root, []sessiontest.NilCase{
		{Name: "Register nil session", Call: reg(nil, base, ok), Want: bad, Arg: "nil session"},
		{Name: "Register empty base", Call: reg(s, "", ok), Want: bad, Arg: "empty"},
		{Name: "Register relative base", Call: reg(s, "services", ok), Want: bad, Arg: "must start with '/'"},
		{Name: "Register base with trailing slash", Call: reg(s, "/services/", ok), Want: bad, Arg: "trailing"},
		{Name: "Register empty name", Call: reg(s, base, with(func(in *discovery.Instance) { in.Name = "" })), Want: bad, Arg: "service name"},
		{Name: "Register name with slash", Call: reg(s, base, with(func(in *discovery.Instance) { in.Name = "a/b" })), Want: bad, Arg: `"a/b"`},
		{Name: "Register name dot-dot", Call: reg(s, base, with(func(in *discovery.Instance) { in.Name = ".." })), Want: bad, Arg: `".."`},
		{Name: "Register id with slash", Call: reg(s, base, with(func(in *discovery.Instance) { in.ID = "x/y" })), Want: bad, Arg: "instance id"},
		{Name: "Register id dot", Call: reg(s, base, with(func(in *discovery.Instance) { in.ID = "." })), Want: bad, Arg: "instance id"},
		{Name: "Register id NUL", Call: reg(s, base, with(func(in *discovery.Instance) { in.ID = "a\x00" })), Want: bad, Arg: "NUL"},
		{Name: "Register negative port", Call: reg(s, base, with(func(in *discovery.Instance) { in.Port = -1 })), Want: bad, Arg: "port -1"},
		{Name: "Register ssl port too large", Call: reg(s, base, with(func(in *discovery.Instance) { in.SSLPort = 70000 })), Want: bad, Arg: "ssl port 70000"},
		{Name: "Register payload not JSON", Call: reg(s, base, with(func(in *discovery.Instance) { in.Payload = json.RawMessage("{") })), Want: bad, Arg: "payload"},
		{Name: "Register bad uri spec", Call: reg(s, base, with(func(in *discovery.Instance) { in.URISpec = "{scheme" })), Want: bad, Arg: "not closed"},
		{Name: "Register unknown type", Call: reg(s, base, with(func(in *discovery.Instance) { in.Type = 7 })), Want: bad, Arg: "ServiceType(7)"},
		{Name: "Register too large", Call: reg(s, base, with(func(in *discovery.Instance) {
			in.Payload = json.RawMessage(`"` + strings.Repeat("x", 512<<10) + `"`)
		})), Want: bad, Arg: "at most"},
		{Name: "Register nil option", Call: reg(s, base, ok, nil), Want: bad, Arg: "nil option"},
		{Name: "Register nil logger", Call: reg(s, base, ok, discovery.WithLogger(nil)), Want: bad, Arg: "nil logger"},
		{Name: "Register with a provider's option", Call: reg(s, base, ok, discovery.WithStrategy(discovery.Random)), Want: bad, Arg: "WithStrategy does not apply to Register"},
		{Name: "Register with a cache's option", Call: reg(s, base, ok, discovery.WithEvents(false)), Want: bad, Arg: "WithEvents does not apply"},
		{Name: "Registration.Wait nil ctx", Call: func(*testing.T) error { return r.Wait(nilCtx) }, Want: bad, Arg: "nil context"},
		{Name: "Registration.Update nil ctx", Call: func(*testing.T) error { return r.Update(nilCtx, r.Instance()) }, Want: bad, Arg: "nil context"},
		{Name: "Registration.Update other id", Call: func(t *testing.T) error { return r.Update(ctxT(t), ok) }, Want: bad, Arg: "stay"},
		{Name: "NewCache nil session", Call: newC(nil, base, "svc"), Want: bad, Arg: "nil session"},
		{Name: "NewCache bad base", Call: newC(s, "x", "svc"), Want: bad, Arg: "must start with '/'"},
		{Name: "NewCache bad name", Call: newC(s, base, "a/b"), Want: bad, Arg: "service name"},
		{Name: "NewCache empty name", Call: newC(s, base, ""), Want: bad, Arg: "service name"},
		{Name: "NewCache nil option", Call: newC(s, base, "svc", nil), Want: bad, Arg: "nil option"},
		{Name: "NewCache with a provider's option", Call: newC(s, base, "svc", discovery.WithDownPolicy(1, time.Second)), Want: bad, Arg: "WithDownPolicy does not apply"},
		{Name: "NewProvider nil cache", Call: newP(nil), Want: bad, Arg: "nil cache"},
		{Name: "NewProvider nil option", Call: newP(c, nil), Want: bad, Arg: "nil option"},
		{Name: "NewProvider unknown strategy", Call: newP(c, discovery.WithStrategy(9)), Want: bad, Arg: "Strategy(9)"},
		{Name: "NewProvider zero errors", Call: newP(c, discovery.WithDownPolicy(0, time.Second)), Want: bad, Arg: "down policy"},
		{Name: "NewProvider zero timeout", Call: newP(c, discovery.WithDownPolicy(2, 0)), Want: bad, Arg: "down policy"},
		{Name: "NewProvider with a cache's option", Call: newP(c, discovery.WithLogger(nil)), Want: bad, Arg: "WithLogger does not apply"},
		{Name: "Names nil ctx", Call: func(*testing.T) error { _, err := discovery.Names(nilCtx, s, base); return err }, Want: bad, Arg: "nil context"},
		{Name: "Names nil session", Call: func(t *testing.T) error { _, err := discovery.Names(ctxT(t), nil, base); return err }, Want: bad, Arg: "nil session"},
		{Name: "Names bad base", Call: func(t *testing.T) error { _, err := discovery.Names(ctxT(t), s, "/a/../b"); return err }, Want: bad, Arg: "/a/../b"},
		{Name: "Instances nil ctx", Call: func(*testing.T) error { _, err := discovery.Instances(nilCtx, s, base, "svc"); return err }, Want: bad, Arg: "nil context"},
		{Name: "Instances nil session", Call: func(t *testing.T) error { _, err := discovery.Instances(ctxT(t), nil, base, "svc"); return err }, Want: bad, Arg: "nil session"},
		{Name: "Instances bad name", Call: func(t *testing.T) error { _, err := discovery.Instances(ctxT(t), s, base, ".."); return err }, Want: bad, Arg: "service name"},
	})
	// Errors name the recipe and the path once.
	_, err := discovery.Register(s, base, with(func(in *discovery.Instance) { in.Port = -1 }))
	if msg := err.Error(); !strings.HasPrefix(msg, `discovery "/services/svc/b": `) || strings.Count(msg, "/services/svc/b") != 1 {
		t.Errorf("error %q: want it to start with discovery \"/services/svc/b\" and name the path once", msg)
	}
}
