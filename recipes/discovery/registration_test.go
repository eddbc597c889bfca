package discovery_test

import (
	"context"
	"encoding/json"
	"errors"
	"regexp"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/internal/testkit/sessiontest"
	"github.com/zkrecipes/zkrecipes/recipes/cache"
	"github.com/zkrecipes/zkrecipes/recipes/discovery"
	"github.com/zkrecipes/zkrecipes/session"
	"github.com/zkrecipes/zkrecipes/zktest"
)

var uuidRE = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

// TestRegisterNormalPath: an instance with the defaults (a random UUID, the
// current time) is an ephemeral node of the session at
// <base>/<name>/<id> holding its JSON; the queries find it; Close deletes
// it.
func TestRegisterNormalPath(t *testing.T) {
	ns := zktest.NewNamespace(t)
	raw := ns.Conn(t)
	s := sessiontest.Connect(t, ns)
	before := time.Now().Add(-time.Millisecond)
	r := register(t, s, discovery.Instance{Name: "billing", Address: "10.0.0.7", Port: 8080,
		Payload: discovery.SpringInstance{ID: "billing:8080", Name: "billing"}.Payload(), URISpec: "{scheme}://{address}:{port}"})
	in := r.Instance()
	if !uuidRE.MatchString(in.ID) {
		t.Fatalf("default id %q, want a random UUID", in.ID)
	}
	if in.RegistrationTime.Before(before) || in.RegistrationTime.After(time.Now()) {
		t.Fatalf("default registration time %v, want about now", in.RegistrationTime)
	}
	if got, want := r.Path(), base+"/billing/"+in.ID; got != want {
		t.Fatalf("Path %q, want %q", got, want)
	}
	d, st, err := raw.Get(ns.Path("services/billing/" + in.ID))
	if err != nil {
		t.Fatal(err)
	}
	if st.EphemeralOwner != s.SessionID() {
		t.Fatalf("owner 0x%x, want the session 0x%x", st.EphemeralOwner, s.SessionID())
	}
	var got discovery.Instance
	if err := json.Unmarshal(d, &got); err != nil || !equalInstance(got, in) {
		t.Fatalf("node holds %s (%v), want %+v", d, err, in)
	}
	names, err := discovery.Names(ctxT(t), s, base)
	if err != nil || len(names) != 1 || names[0] != "billing" {
		t.Fatalf("Names: %v %v", names, err)
	}
	list, err := discovery.Instances(ctxT(t), s, base, "billing")
	if err != nil || len(list) != 1 || !equalInstance(list[0], in) {
		t.Fatalf("Instances: %+v %v", list, err)
	}
	if list[0].URI() != "http://10.0.0.7:8080" {
		t.Fatalf("URI %q", list[0].URI())
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if _, ok := exists(t, raw, ns.Path("services/billing/"+in.ID)); ok {
		t.Fatal("the node is still there after Close")
	}
	if r.Path() != "" {
		t.Fatalf("Path after Close: %q", r.Path())
	}
	if err := r.Wait(ctxT(t)); !errors.Is(err, session.ErrClosed) {
		t.Fatalf("Wait after Close: %v, want session.ErrClosed", err)
	}
	if err := r.Update(ctxT(t), in); !errors.Is(err, session.ErrClosed) {
		t.Fatalf("Update after Close: %v, want session.ErrClosed", err)
	}
	if err := r.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	list, err = discovery.Instances(ctxT(t), s, base, "nothing")
	if err != nil || len(list) != 0 {
		t.Fatalf("Instances of a missing service: %v %v", list, err)
	}
	names, err = discovery.Names(ctxT(t), s, "/nowhere")
	if err != nil || len(names) != 0 {
		t.Fatalf("Names of a missing base: %v %v", names, err)
	}
}

// TestRegisterTypes: each service type's node, as Curator creates it (a
// DynamicSequential instance's name protected, so a lost create is found),
// and Close deletes each.
func TestRegisterTypes(t *testing.T) {
	ns := zktest.NewNamespace(t)
	raw := ns.Conn(t)
	s := sessiontest.Connect(t, ns)
	for _, tc := range []struct {
		typ       discovery.ServiceType
		id        string
		node      *regexp.Regexp
		ephemeral bool
	}{
		{discovery.Dynamic, "i1", regexp.MustCompile(`^/services/svc/i1$`), true},
		{discovery.DynamicSequential, "i2", regexp.MustCompile(`^/services/svc/_c_[0-9a-f-]{36}-i2[0-9]{10}$`), true},
		{discovery.Static, "i3", regexp.MustCompile(`^/services/svc/i3$`), false},
		{discovery.Permanent, "i4", regexp.MustCompile(`^/services/svc/i4$`), false},
	} {
		id := tc.id
		r := register(t, s, discovery.Instance{Name: "svc", ID: id, Type: tc.typ, Port: 1})
		p := r.Path()
		if !tc.node.MatchString(p) {
			t.Fatalf("%v: node %q, want a match of %v", tc.typ, p, tc.node)
		}
		d, st, err := raw.Get(ns.Root + p)
		if err != nil {
			t.Fatalf("%v: %v", tc.typ, err)
		}
		if got := st.EphemeralOwner != 0; got != tc.ephemeral {
			t.Fatalf("%v: ephemeral %v, want %v", tc.typ, got, tc.ephemeral)
		}
		var in discovery.Instance
		if err := json.Unmarshal(d, &in); err != nil || in.Type != tc.typ || in.ID != id {
			t.Fatalf("%v: node holds %s", tc.typ, d)
		}
		r.Close()
		if _, ok := exists(t, raw, ns.Root+p); ok {
			t.Fatalf("%v: node left after Close", tc.typ)
		}
	}
}

// TestSeveralSessions: instances of one service registered by several
// sessions are all listed, by the query and by a cache on another session;
// each leaves with its Close.
func TestSeveralSessions(t *testing.T) {
	ns := zktest.NewNamespace(t)
	watcher := sessiontest.Connect(t, ns)
	c := newCache(t, watcher, "api")
	rec := record(c.Events())
	rec.waitInit(t)
	var regs []*discovery.Registration
	for i := 0; i < 4; i++ {
		s := sessiontest.Connect(t, ns)
		regs = append(regs, register(t, s, discovery.Instance{Name: "api", Address: "10.0.0.1", Port: 9000 + i}))
	}
	list, err := discovery.Instances(ctxT(t), watcher, base, "api")
	if err != nil || len(list) != 4 {
		t.Fatalf("Instances: %d %v", len(list), err)
	}
	rec.WaitFor(t, wait, "4 Added", func(evs []recorded) bool { return countType(evs, cache.Added) == 4 })
	if got := len(c.Instances()); got != 4 {
		t.Fatalf("cache holds %d", got)
	}
	for i, r := range regs {
		r.Close()
		rec.WaitFor(t, wait, "Removed", func(evs []recorded) bool { return countType(evs, cache.Removed) == i+1 })
	}
	if got := len(c.Instances()); got != 0 {
		t.Fatalf("cache holds %d after every Close", got)
	}
}

// TestUpdate: Update writes the new data to the node, keeps the
// registration time, and a cache sees one Updated; the name, id and type
// stay.
func TestUpdate(t *testing.T) {
	for _, typ := range []discovery.ServiceType{discovery.Dynamic, discovery.Static} {
		t.Run(typ.String(), func(t *testing.T) {
			ns := zktest.NewNamespace(t)
			raw := ns.Conn(t)
			s := sessiontest.Connect(t, ns)
			c := newCache(t, sessiontest.Connect(t, ns), "svc")
			rec := record(c.Events())
			r := register(t, s, discovery.Instance{Name: "svc", ID: "a", Port: 1, Type: typ})
			rec.WaitFor(t, wait, "Added", func(evs []recorded) bool { return countType(evs, cache.Added) == 1 })
			in := r.Instance()
			up := in
			up.RegistrationTime = time.Time{}
			up.Port, up.Payload, up.Disabled = 2, json.RawMessage(`{"v":2}`), true
			waitFor(t, "Update", func(ctx context.Context) error { return r.Update(ctx, up) })
			d, _, err := raw.Get(ns.Path("services/svc/a"))
			if err != nil {
				t.Fatal(err)
			}
			var got discovery.Instance
			if err := json.Unmarshal(d, &got); err != nil || got.Port != 2 || !got.Disabled || string(got.Payload) != `{"v":2}` ||
				!got.RegistrationTime.Equal(in.RegistrationTime) {
				t.Fatalf("after Update the node holds %s", d)
			}
			evs := rec.WaitFor(t, wait, "Updated", func(evs []recorded) bool { return countType(evs, cache.Updated) == 1 })
			if last := evs[len(evs)-1]; last.Type != cache.Updated || last.Instance.Port != 2 {
				t.Fatalf("events %s", fmtEvents(evs))
			}
			if ri := r.Instance(); ri.Port != 2 || !ri.RegistrationTime.Equal(in.RegistrationTime) {
				t.Fatalf("Instance after Update: %+v", ri)
			}
			for _, bad := range []discovery.Instance{
				{Name: "other", ID: "a", Type: typ},
				{Name: "svc", ID: "b", Type: typ},
				{Name: "svc", ID: "a", Type: typ + 1},
				{Name: "svc", ID: "a", Type: typ, Port: -1},
			} {
				if err := r.Update(ctxT(t), bad); !errors.Is(err, session.ErrBadArgument) {
					t.Fatalf("Update with %+v: %v, want session.ErrBadArgument", bad, err)
				}
			}
			//lint:ignore SA1012 a nil ctx is the case under test
			if err := r.Update(nil, up); !errors.Is(err, session.ErrBadArgument) { //nolint:staticcheck
				t.Fatalf("Update(nil): %v", err)
			}
		})
	}
}

// TestThirdPartyDelete: an instance's node deleted by someone else is
// created again at once, for every type.
func TestThirdPartyDelete(t *testing.T) {
	for _, typ := range []discovery.ServiceType{discovery.Dynamic, discovery.DynamicSequential, discovery.Static, discovery.Permanent} {
		t.Run(typ.String(), func(t *testing.T) {
			ns := zktest.NewNamespace(t)
			raw := ns.Conn(t)
			s := sessiontest.Connect(t, ns)
			r := register(t, s, discovery.Instance{Name: "svc", ID: "x", Type: typ})
			p := r.Path()
			_, st, err := raw.Get(ns.Root + p)
			if err != nil {
				t.Fatal(err)
			}
			if err := raw.Delete(ns.Root+p, -1); err != nil {
				t.Fatal(err)
			}
			zktest.Eventually(t, wait, func() bool {
				q := r.Path()
				if q == "" {
					return false
				}
				st2, ok := exists(t, raw, ns.Root+q)
				return ok && st2.Czxid != st.Czxid
			}, "the node created again")
			list, err := discovery.Instances(ctxT(t), s, base, "svc")
			if err != nil || len(list) != 1 || list[0].ID != "x" {
				t.Fatalf("after the delete: %+v %v", list, err)
			}
		})
	}
}

// TestShortPartitionNoEvents: a Dynamic instance whose session is
// partitioned for less than its timeout keeps its node, and a cache on
// another session sees nothing at all: no Removed, no Added. An Update
// after the partition is the only event.
func TestShortPartitionNoEvents(t *testing.T) {
	ns := zktest.NewNamespace(t)
	raw := ns.Conn(t)
	s, p := sessiontest.ConnectProxy(t, ns, session.WithSessionTimeout(sessiontest.LeaseTimeout))
	c := newCache(t, sessiontest.Connect(t, ns), "svc")
	rec := record(c.Events())
	r := register(t, s, discovery.Instance{Name: "svc", ID: "a", Port: 1})
	evs := rec.WaitFor(t, wait, "Added", func(evs []recorded) bool { return countType(evs, cache.Added) == 1 })
	mark := len(evs)
	st, _ := exists(t, raw, ns.Path("services/svc/a"))
	states := sessiontest.Record(t, s)
	p.Partition()
	states.Wait(t, wait, session.Suspended)
	p.Heal()
	ev := states.Wait(t, wait, session.Reconnected)
	if ev.SessionID != st.EphemeralOwner {
		t.Skipf("the session did not survive the partition on this machine (0x%x -> 0x%x)", st.EphemeralOwner, ev.SessionID)
	}
	up := r.Instance()
	up.Port = 2
	waitFor(t, "Update", func(ctx context.Context) error { return r.Update(ctx, up) })
	evs = rec.WaitFor(t, wait, "Updated", func(evs []recorded) bool { return countType(evs[mark:], cache.Updated) == 1 })
	if got := evs[mark:]; len(got) != 1 {
		t.Fatalf("events at the watcher since the partition: %s; want one Updated", fmtEvents(got))
	}
	st2, ok := exists(t, raw, ns.Path("services/svc/a"))
	if !ok || st2.Czxid != st.Czxid {
		t.Fatal("the node was created again across a partition the session survived")
	}
}

// TestBackAfterExpiry: after its session expired, a Dynamic instance is
// back on the new session within backBound of Reconnected, and a cache on
// another session has it again.
func TestBackAfterExpiry(t *testing.T) {
	for _, typ := range []discovery.ServiceType{discovery.Dynamic, discovery.DynamicSequential} {
		t.Run(typ.String(), func(t *testing.T) {
			ns := zktest.NewNamespace(t)
			raw := ns.Conn(t)
			s, p, tap := sessiontest.ConnectProxyTap(t, ns)
			c := newCache(t, sessiontest.Connect(t, ns), "svc")
			r := register(t, s, discovery.Instance{Name: "svc", ID: "a", Port: 1, Type: typ})
			old := s.SessionID()
			rec := sessiontest.Record(t, s)
			sessiontest.Expire(t, s, tap, ns.Servers()...)
			p.Cut()
			rec.Wait(t, wait, session.Lost)
			ev := rec.Wait(t, wait, session.Reconnected)
			if ev.SessionID == old {
				t.Fatalf("reconnected to the expired session 0x%x", old)
			}
			zktest.Eventually(t, time.Until(ev.At.Add(backBound)), func() bool {
				q := r.Path()
				if q == "" {
					return false
				}
				st, ok := exists(t, raw, ns.Root+q)
				return ok && st.EphemeralOwner == ev.SessionID
			}, "the instance back on session 0x%x within %v of Reconnected", ev.SessionID, backBound)
			t.Logf("back %v after Reconnected", time.Since(ev.At))
			zktest.Eventually(t, convergeBound, func() bool {
				return sameInstances(c.Instances(), serverInstances(t, raw, ns.Path("services"), "svc")) == "" && len(c.Instances()) == 1
			}, "the cache has the instance again")
		})
	}
}

// TestPersistentSurvivesExpiry: a Static instance's node outlives its
// session, and its registration keeps it (the same node) on the next one.
func TestPersistentSurvivesExpiry(t *testing.T) {
	ns := zktest.NewNamespace(t)
	raw := ns.Conn(t)
	s, p, tap := sessiontest.ConnectProxyTap(t, ns)
	r := register(t, s, discovery.Instance{Name: "svc", ID: "a", Type: discovery.Static})
	st, _ := exists(t, raw, ns.Path("services/svc/a"))
	rec := sessiontest.Record(t, s)
	sessiontest.Expire(t, s, tap, ns.Servers()...)
	p.Cut()
	rec.Wait(t, wait, session.Lost)
	rec.Wait(t, wait, session.Reconnected)
	up := r.Instance()
	up.Port = 7
	waitFor(t, "Update", func(ctx context.Context) error { return r.Update(ctx, up) })
	st2, ok := exists(t, raw, ns.Path("services/svc/a"))
	if !ok || st2.Czxid != st.Czxid {
		t.Fatalf("the persistent node was replaced across the expiry")
	}
}

// TestWaitsOutAnotherSessionsNode: a Dynamic instance whose id another
// session's node holds is created once that node is gone, never written
// into it.
func TestWaitsOutAnotherSessionsNode(t *testing.T) {
	ns := zktest.NewNamespace(t)
	raw := ns.Conn(t)
	s := sessiontest.Connect(t, ns)
	other := sessiontest.Connect(t, ns)
	first := register(t, other, discovery.Instance{Name: "svc", ID: "dup", Port: 1})
	registerBehind(t, raw, s, discovery.Instance{Name: "svc", ID: "dup", Port: 2}, first, "another session", ns.Path("services/svc/dup"))
	_, st, err := raw.Get(ns.Path("services/svc/dup"))
	if err != nil || st.EphemeralOwner != s.SessionID() {
		t.Fatalf("after the other left: %v %v", st, err)
	}
}

// TestCloseWhileBusy: Close while the session cannot reach the server:
// Wait and Update in flight return session.ErrClosed, Close is bounded,
// and nothing of the registration is left once the connection is back.
func TestCloseWhileBusy(t *testing.T) {
	for _, typ := range []discovery.ServiceType{discovery.Dynamic, discovery.Static} {
		t.Run(typ.String(), func(t *testing.T) {
			ns := zktest.NewNamespace(t)
			raw := ns.Conn(t)
			s, p := sessiontest.ConnectProxy(t, ns, session.WithSessionTimeout(10*time.Second))
			p.Partition()
			r, err := discovery.Register(s, base, discovery.Instance{Name: "svc", ID: "a", Type: typ})
			if err != nil {
				t.Fatal(err)
			}
			ctx := ctxT(t)
			errs := make(chan error, 2)
			go func() { errs <- r.Wait(ctx) }()
			go func() {
				in := r.Instance()
				in.Port = 5
				errs <- r.Update(ctx, in)
			}()
			start := time.Now()
			if err := r.Close(); err != nil {
				t.Fatal(err)
			}
			if d := time.Since(start); d > 6*time.Second {
				t.Fatalf("Close took %v while partitioned", d)
			}
			for i := 0; i < 2; i++ {
				if err := sessiontest.Recv(t, errs, wait, "Wait or Update return"); !errors.Is(err, session.ErrClosed) {
					t.Fatalf("a call in flight at Close returned %v, want session.ErrClosed", err)
				}
			}
			rec := sessiontest.Record(t, s)
			p.Heal()
			rec.Wait(t, wait, session.Reconnected)
			zktest.Eventually(t, wait, func() bool {
				kids, _, err := raw.Children(ns.Path("services/svc"))
				return errors.Is(err, zk.ErrNoNode) || err == nil && len(kids) == 0
			}, "nothing left under /services/svc")
		})
	}
}

// TestSessionClosed: closing the session stops a registration (Wait
// returns session.ErrClosed) and a cache (Events closes; a provider on it
// answers session.ErrClosed).
func TestSessionClosed(t *testing.T) {
	ns := zktest.NewNamespace(t)
	s := sessiontest.Connect(t, ns)
	r := register(t, s, discovery.Instance{Name: "svc", ID: "a"})
	c := newCache(t, s, "svc")
	rec := record(c.Events())
	rec.waitInit(t)
	pr, err := discovery.NewProvider(c)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pr.Pick(); err != nil {
		t.Fatalf("Pick: %v", err)
	}
	s.Close()
	select {
	case <-rec.Closed():
	case <-time.After(wait):
		t.Fatal("Events not closed after the session closed")
	}
	if _, err := pr.Pick(); !errors.Is(err, session.ErrClosed) {
		t.Fatalf("Pick after the session closed: %v", err)
	}
	zktest.Eventually(t, wait, func() bool {
		return errors.Is(r.Wait(ctxT(t)), session.ErrClosed)
	}, "Wait returns session.ErrClosed")
}

// TestLateCreateAfterClose: a Static instance's create that reaches the
// server after Close (its answer late) deletes the node it made: no
// persistent instance outlives its Registration.
func TestLateCreateAfterClose(t *testing.T) {
	ns := zktest.NewNamespace(t)
	raw := ns.Conn(t)
	s, p := sessiontest.ConnectProxy(t, ns, session.WithSessionTimeout(10*time.Second))
	zs := sessiontest.Core(s)
	// The parents first, so that the instance's create is the one delayed.
	register(t, s, discovery.Instance{Name: "svc", ID: "other", Type: discovery.Static})
	sent := zs.WritesSent()
	p.SetLatency(500 * time.Millisecond)
	r, err := discovery.Register(s, base, discovery.Instance{Name: "svc", ID: "late", Type: discovery.Static})
	if err != nil {
		t.Fatal(err)
	}
	zktest.Eventually(t, wait, func() bool { return zs.WritesSent() != sent }, "the create sent")
	r.Close()
	full := ns.Path("services/svc/late")
	zktest.Eventually(t, wait, func() bool { _, ok := exists(t, raw, full); return ok }, "the late create applied")
	p.SetLatency(0)
	zktest.Eventually(t, wait, func() bool { _, ok := exists(t, raw, full); return !ok }, "the late create's node deleted")
}

// TestStaticWaitsOutEphemeral: a Static instance whose id is another
// session's ephemeral node (a Dynamic instance) never writes into it; it is
// created, persistent, once that node is gone.
func TestStaticWaitsOutEphemeral(t *testing.T) {
	ns := zktest.NewNamespace(t)
	raw := ns.Conn(t)
	dyn := register(t, sessiontest.Connect(t, ns), discovery.Instance{Name: "svc", ID: "x", Port: 1})
	registerBehind(t, raw, sessiontest.Connect(t, ns), discovery.Instance{Name: "svc", ID: "x", Port: 2, Type: discovery.Static}, dyn, "a Dynamic instance", ns.Path("services/svc/x"))
	d, st, err := raw.Get(ns.Path("services/svc/x"))
	var in discovery.Instance
	if err != nil || st.EphemeralOwner != 0 || json.Unmarshal(d, &in) != nil || in.Port != 2 {
		t.Fatalf("after the Dynamic instance left: %s %+v %v", d, st, err)
	}
}
