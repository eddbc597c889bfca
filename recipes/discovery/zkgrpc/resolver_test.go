package zkgrpc_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"go.uber.org/zap"
	"google.golang.org/grpc/attributes"
	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/balancer/base"
	"google.golang.org/grpc/resolver"

	"github.com/zkrecipes/zkrecipes/internal/testkit/sessiontest"
	"github.com/zkrecipes/zkrecipes/recipes/discovery"
	"github.com/zkrecipes/zkrecipes/recipes/discovery/zkgrpc"
	"github.com/zkrecipes/zkrecipes/session"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// spring returns a Spring Cloud Zookeeper payload with metadata md.
func spring(svc string, md map[string]string) json.RawMessage {
	return discovery.SpringInstance{ID: svc + "-1", Name: svc, Metadata: md}.Payload()
}

// TestWhichInstances: disabled instances, a Spring instance out of service,
// instances without the port asked for and a second instance of an address
// are left out; the TLS port is
// given when asked for; an instance enabled later is added.
func TestWhichInstances(t *testing.T) {
	ns := zktest.NewNamespace(t)
	sess := sessiontest.Connect(t, ns)
	in := func(id string, port, sslPort int, disabled bool) discovery.Instance {
		return discovery.Instance{Name: "svc", ID: id, Address: "127.0.0.1", Port: port, SSLPort: sslPort, Disabled: disabled}
	}
	register(t, sess, in("a", 1001, 0, false))
	register(t, sess, in("b", 1002, 2002, false))
	dReg := register(t, sess, in("d", 1004, 2004, true))
	register(t, sess, in("e", 1001, 0, false))                              // a's address: left out
	register(t, sess, in("f", 0, 2006, false))                              // TLS only
	register(t, sess, discovery.Instance{Name: "svc", ID: "g", Port: 1007}) // no address
	register(t, sess, discovery.Instance{Name: "svc", ID: "h", Address: "127.0.0.1", Port: 1008,
		Payload: spring("svc", map[string]string{discovery.SpringStatusKey: "OUT_OF_SERVICE"})}) // out of service

	_, plain := build(t, newBuilder(t, sess), target("svc"))
	st := plain.waitState(t, "the plain ports", func(resolver.State) bool { return true })
	if got, want := strings.Join(addrs(st), " "), "127.0.0.1:1001 127.0.0.1:1002"; got != want {
		t.Errorf("plain ports: %s; want %s (in node order)", got, want)
	}
	if inst, ok := zkgrpc.Instance(st.Endpoints[0].Attributes); !ok || inst.ID != "a" {
		t.Errorf("the endpoint of 127.0.0.1:1001 stands for %+v, %v; want instance a", inst, ok)
	}
	_, tls := build(t, newBuilder(t, sess, zkgrpc.WithSSLPort(true)), target("svc"))
	tls.waitState(t, "the TLS ports", hasAddrs("127.0.0.1:2002", "127.0.0.1:2006"))

	d := in("d", 1004, 2004, false)
	ctx, cancel := contextWithWait()
	defer cancel()
	if err := dReg.Update(ctx, d); err != nil {
		t.Fatal(err)
	}
	plain.waitState(t, "d enabled", hasAddrs("127.0.0.1:1001", "127.0.0.1:1002", "127.0.0.1:1004"))
	tls.waitState(t, "d enabled", hasAddrs("127.0.0.1:2002", "127.0.0.1:2004", "127.0.0.1:2006"))
}

// TestAttributes: each endpoint (and each address of State.Addresses, in its
// balancer attributes) carries its instance, and its Spring metadata when
// its payload is Spring's; a change of an instance's data gives a new state,
// a write that changes nothing does not.
func TestAttributes(t *testing.T) {
	ns := zktest.NewNamespace(t)
	sess := sessiontest.Connect(t, ns)
	a := discovery.Instance{Name: "svc", ID: "a", Address: "127.0.0.1", Port: 1001, Payload: spring("svc", map[string]string{"zone": "a"})}
	b := discovery.Instance{Name: "svc", ID: "b", Address: "127.0.0.1", Port: 1002, Payload: json.RawMessage(`{"weight":3}`)}
	c := discovery.Instance{Name: "svc", ID: "c", Address: "127.0.0.1", Port: 1003}
	aReg := register(t, sess, a)
	register(t, sess, b)
	register(t, sess, c)

	_, rec := build(t, newBuilder(t, sess), target("svc"))
	st := rec.waitState(t, "three endpoints", func(st resolver.State) bool { return len(st.Endpoints) == 3 })
	if len(st.Addresses) != 3 {
		t.Fatalf("State.Addresses: %v; want the three addresses too", st.Addresses)
	}
	for i, want := range []discovery.Instance{a, b, c} {
		for _, attrs := range []*attributes.Attributes{st.Endpoints[i].Attributes, st.Addresses[i].BalancerAttributes} {
			got, ok := zkgrpc.Instance(attrs)
			if !ok || got.ID != want.ID || got.Name != want.Name || got.Address != want.Address || got.Port != want.Port {
				t.Errorf("endpoint %d: instance %+v, %v; want %+v", i, got, ok, want)
			}
		}
		if st.Addresses[i].ServerName != "" || st.Endpoints[i].Addresses[0].ServerName != "" {
			t.Errorf("address %d has a ServerName: TLS would verify what ZooKeeper says", i)
		}
		if st.Addresses[i].Attributes != nil || st.Endpoints[i].Addresses[0].Attributes != nil {
			t.Errorf("address %d has attributes %v: they would make gRPC reconnect at every change of the instance", i, st.Addresses[i].Attributes)
		}
	}
	md, ok := zkgrpc.SpringMetadata(st.Endpoints[0].Attributes)
	if !ok || !maps.Equal(md, map[string]string{"zone": "a"}) {
		t.Errorf("a's Spring metadata: %v, %v; want zone=a", md, ok)
	}
	md["zone"] = "changed" // the caller's copy
	if md, _ := zkgrpc.SpringMetadata(st.Endpoints[0].Attributes); md["zone"] != "a" {
		t.Errorf("SpringMetadata's map is shared with the attributes")
	}
	if _, ok := zkgrpc.SpringMetadata(st.Endpoints[2].Attributes); ok {
		t.Errorf("c has no payload, but SpringMetadata says it has Spring's")
	}
	if _, ok := zkgrpc.Instance(attributes.New("other", 1)); ok {
		t.Errorf("Instance found an instance in attributes no resolver set")
	}
	if _, ok := zkgrpc.SpringMetadata(nil); ok {
		t.Errorf("SpringMetadata found metadata in nil attributes")
	}

	// The same data written again: no new state. Then a change: one.
	n, _ := rec.counts()
	ctx, cancel := contextWithWait()
	defer cancel()
	if err := aReg.Update(ctx, aReg.Instance()); err != nil {
		t.Fatal(err)
	}
	a2 := aReg.Instance()
	a2.Payload = spring("svc", map[string]string{"zone": "b"})
	if err := aReg.Update(ctx, a2); err != nil {
		t.Fatal(err)
	}
	st = rec.waitState(t, "a in zone b", func(st resolver.State) bool {
		md, _ := zkgrpc.SpringMetadata(st.Endpoints[0].Attributes)
		return md["zone"] == "b"
	})
	if m, _ := rec.counts(); m != n+1 {
		t.Errorf("%d new states for a write that changed nothing and one that changed a's payload; want 1", m-n)
	}
	if got := addrs(st); len(got) != 3 {
		t.Errorf("addresses after a's change: %v", got)
	}
}

// zoneBalancer is a balancer written as a user would, with grpc's base
// package: its picker picks only the backends whose Spring metadata says
// zone "a".
const zoneBalancer = "zkgrpc_test_zone_a"

func init() {
	balancer.Register(base.NewBalancerBuilder(zoneBalancer, zonePickerBuilder{}, base.Config{}))
}

type zonePickerBuilder struct{}

func (zonePickerBuilder) Build(info base.PickerBuildInfo) balancer.Picker {
	var scs []balancer.SubConn
	for sc, sci := range info.ReadySCs {
		if md, ok := zkgrpc.SpringMetadata(sci.Address.BalancerAttributes); ok && md["zone"] == "a" {
			scs = append(scs, sc)
		}
	}
	if len(scs) == 0 {
		return base.NewErrPicker(balancer.ErrNoSubConnAvailable)
	}
	return &zonePicker{scs: scs}
}

type zonePicker struct {
	scs []balancer.SubConn
	n   atomic.Uint32
}

func (p *zonePicker) Pick(balancer.PickInfo) (balancer.PickResult, error) {
	return balancer.PickResult{SubConn: p.scs[int(p.n.Add(1))%len(p.scs)]}, nil
}

// TestBalancerSeesAttributes: a balancer picks by the instances' Spring
// metadata.
func TestBalancerSeesAttributes(t *testing.T) {
	ns := zktest.NewNamespace(t)
	sess := sessiontest.Connect(t, ns)
	for _, z := range []struct{ name, zone string }{{"a1", "a"}, {"b1", "b"}, {"a2", "a"}, {"none", ""}} {
		in := instance("greeter", startBackend(t, z.name))
		if z.zone != "" {
			in.Payload = spring("greeter", map[string]string{"zone": z.zone})
		}
		register(t, sess, in)
	}
	cc := dial(t, newBuilder(t, sess), target("greeter"), fmt.Sprintf(`{"loadBalancingConfig":[{%q:{}}]}`, zoneBalancer))
	reachAll(t, cc, "a1", "a2")
}

// TestCloseStopsEverything: after Close the resolver gives gRPC nothing (and
// TestMain checks that no goroutine of it is left); ResolveNow costs no
// request.
func TestCloseStopsEverything(t *testing.T) {
	ns := zktest.NewNamespace(t)
	reg := sessiontest.Connect(t, ns)
	register(t, reg, discovery.Instance{Name: "svc", ID: "a", Address: "127.0.0.1", Port: 1001})
	sess, tap := sessiontest.ConnectTap(t, ns)
	b := newBuilder(t, sess)

	r, rec := build(t, b, target("svc"))
	rec.waitState(t, "a", hasAddrs("127.0.0.1:1001"))
	before := tap.Requests()
	for i := 0; i < 1000; i++ {
		r.ResolveNow(resolver.ResolveNowOptions{})
	}
	if after := tap.Requests(); nonPing(after) != nonPing(before) {
		t.Errorf("ResolveNow sent requests: %v, then %v", before, after)
	}
	r.Close()
	r.Close() // idempotent
	nStates, nErrs := rec.counts()

	// A second resolver sees the next change; by then the first would have.
	_, rec2 := build(t, b, target("svc"))
	rec2.waitState(t, "a", hasAddrs("127.0.0.1:1001"))
	register(t, reg, discovery.Instance{Name: "svc", ID: "b", Address: "127.0.0.1", Port: 1002})
	rec2.waitState(t, "a and b", hasAddrs("127.0.0.1:1001", "127.0.0.1:1002"))
	if s, e := rec.counts(); s != nStates || e != nErrs {
		t.Errorf("the closed resolver gave %d states and %d errors", s-nStates, e-nErrs)
	}
}

func nonPing(reqs map[int32]int64) int64 {
	var n int64
	for op, c := range reqs {
		if op != zktest.OpPing {
			n += c
		}
	}
	return n
}

// TestBadInput: NewBuilder and Build refuse bad arguments and targets with
// errors matching session.ErrBadArgument, and start nothing.
func TestBadInput(t *testing.T) {
	ns := zktest.NewNamespace(t)
	sess := sessiontest.Connect(t, ns)
	for _, tc := range []struct {
		name string
		sess *session.Session
		opts []zkgrpc.Option
	}{
		{"nil session", nil, nil},
		{"nil option", sess, []zkgrpc.Option{nil}},
		{"nil logger", sess, []zkgrpc.Option{zkgrpc.WithLogger(nil)}},
		{"relative base", sess, []zkgrpc.Option{zkgrpc.WithBase("services")}},
		{"root base", sess, []zkgrpc.Option{zkgrpc.WithBase("/")}},
		{"empty base", sess, []zkgrpc.Option{zkgrpc.WithBase("")}},
		{"trailing slash", sess, []zkgrpc.Option{zkgrpc.WithBase("/services/")}},
		{"dot dot", sess, []zkgrpc.Option{zkgrpc.WithBase("/a/../b")}},
	} {
		b, err := zkgrpc.NewBuilder(tc.sess, tc.opts...)
		if !errors.Is(err, session.ErrBadArgument) || b != nil {
			t.Errorf("NewBuilder, %s: %v, %v; want session.ErrBadArgument", tc.name, b, err)
		}
	}

	b := newBuilder(t, sess, zkgrpc.WithLogger(zap.NewNop()))
	if b.Scheme() != "zk" {
		t.Errorf("Scheme: %q", b.Scheme())
	}
	for _, target := range []string{
		"zk://zk1:2181/svc", // the authority is not the servers
		"zk:///",
		"zk://",
		"zk:///a/b",
		"zk:///svc?base=/x",
		"zk:///svc#x",
		"zk:///..",
		"zk:///.",
		"zk:///a%00b",
	} {
		r, err := b.Build(parseTarget(t, target), newRecorder(), resolver.BuildOptions{})
		if !errors.Is(err, session.ErrBadArgument) || r != nil {
			t.Errorf("Build(%s): %v, %v; want session.ErrBadArgument", target, r, err)
		}
	}
	if r, err := b.Build(parseTarget(t, "zk:///svc"), nil, resolver.BuildOptions{}); !errors.Is(err, session.ErrBadArgument) || r != nil {
		t.Errorf("Build with a nil ClientConn: %v, %v; want session.ErrBadArgument", r, err)
	}
	if n := sess.Watches(); n != 0 {
		t.Errorf("the refused Builds left %d watches", n)
	}
	// The opaque form names a service as well.
	_, rec := build(t, b, "zk:svc")
	rec.waitErr(t, "no instances", isErr(discovery.ErrNoInstances))
}

// TestServiceAppears: a resolver of a service that does not exist yet reports
// no instances, then follows the service once it is registered.
func TestServiceAppears(t *testing.T) {
	ns := zktest.NewNamespace(t)
	sess := sessiontest.Connect(t, ns)
	_, rec := build(t, newBuilder(t, sess), target("later"))
	err := rec.waitErr(t, "no instances", isErr(discovery.ErrNoInstances))
	if !strings.Contains(err.Error(), "/services/later") {
		t.Errorf("error %q does not name the service's path", err)
	}
	if st, ok := rec.last(); !ok || len(st.Endpoints) != 0 {
		t.Errorf("state before the error: %v, %v; want an empty one", st, ok)
	}
	port := 1234
	register(t, sess, discovery.Instance{Name: "later", ID: "x", Address: "::1", Port: port})
	rec.waitState(t, "x", hasAddrs(net.JoinHostPort("::1", strconv.Itoa(port))))
}

func contextWithWait() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), wait)
}
