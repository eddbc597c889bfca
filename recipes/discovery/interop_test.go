package discovery_test

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"testing"

	"github.com/zkrecipes/zkrecipes/internal/testkit/curatortest"
	"github.com/zkrecipes/zkrecipes/internal/testkit/sessiontest"
	"github.com/zkrecipes/zkrecipes/recipes/cache"
	"github.com/zkrecipes/zkrecipes/recipes/discovery"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// javaIDs returns the ids of the instances the Java side read, sorted,
// failing the test on an instance that does not parse.
func javaIDs(t *testing.T, ins []curatortest.JavaInstance) []string {
	t.Helper()
	var out []string
	for _, j := range ins {
		var in discovery.Instance
		if err := json.Unmarshal(j.Instance, &in); err != nil {
			t.Fatalf("the Java side's instance %s: %v", j.Instance, err)
		}
		out = append(out, in.ID)
	}
	sort.Strings(out)
	return out
}

// javaQuerySees waits until Curator's queryForInstances lists exactly ids.
func javaQuerySees(t *testing.T, j *curatortest.Discovery, name string, ids ...string) []curatortest.JavaInstance {
	t.Helper()
	sort.Strings(ids)
	var got []curatortest.JavaInstance
	zktest.Eventually(t, wait, func() bool {
		var err error
		if got, err = j.Query(ctxT(t), name); err != nil {
			t.Fatalf("Curator queryForInstances: %v", err)
		}
		return fmt.Sprint(javaIDs(t, got)) == fmt.Sprint(ids)
	}, "Curator's queryForInstances lists %v", ids)
	return got
}

// javaCacheSees waits until Curator's ServiceCache holds exactly ids.
func javaCacheSees(t *testing.T, j *curatortest.Discovery, name string, ids ...string) []curatortest.JavaInstance {
	t.Helper()
	sort.Strings(ids)
	var got []curatortest.JavaInstance
	zktest.Eventually(t, wait, func() bool {
		var err error
		if got, err = j.Cached(ctxT(t), name); err != nil {
			t.Fatalf("Curator ServiceCache: %v", err)
		}
		return fmt.Sprint(javaIDs(t, got)) == fmt.Sprint(ids)
	}, "Curator's ServiceCache holds %v", ids)
	return got
}

// withoutClass returns the JSON object p without its "@class" member.
func withoutClass(t *testing.T, p json.RawMessage) json.RawMessage {
	t.Helper()
	if len(p) == 0 || p[0] != '{' {
		return p
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(p, &m); err != nil {
		t.Fatal(err)
	}
	delete(m, "@class")
	out, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func goCacheSees(t *testing.T, c *discovery.Cache, ids ...string) {
	t.Helper()
	sort.Strings(ids)
	zktest.Eventually(t, wait, func() bool { return fmt.Sprint(idsOf(c.Instances())) == fmt.Sprint(ids) },
		"the Go cache holds %v", ids)
}

// TestCuratorFindsGoInstances: Curator's ServiceDiscovery (any JSON
// payload) lists the instances Go registered, with their fields and
// payload, in its queries, its ServiceCache and its ServiceProvider; it
// sees an Update, and sees them leave at Close.
func TestCuratorFindsGoInstances(t *testing.T) {
	ns := zktest.NewNamespace(t)
	ctx := ctxT(t)
	j := curatortest.StartDiscovery(t, ns.Servers(), ns.Path("services"), curatortest.ObjectPayload)
	s := sessiontest.Connect(t, ns)
	payload := json.RawMessage(`{"a":[1,2],"s":"x","n":null}`)
	r1 := register(t, s, discovery.Instance{Name: "svc", ID: "go1", Address: "10.0.0.1", Port: 8080, SSLPort: 8443,
		Payload: payload, URISpec: "{scheme}://{address}:{ssl-port}"})
	r2 := register(t, sessiontest.Connect(t, ns), discovery.Instance{Name: "svc", ID: "go2", Address: "10.0.0.2", Port: 8081,
		Type: discovery.DynamicSequential})
	names, err := j.Names(ctx)
	if err != nil || fmt.Sprint(names) != "[svc]" {
		t.Fatalf("Curator's queryForNames: %v %v", names, err)
	}
	got := javaQuerySees(t, j, "svc", "go1", "go2")
	for _, ji := range got {
		var in discovery.Instance
		if err := json.Unmarshal(ji.Instance, &in); err != nil {
			t.Fatal(err)
		}
		want := r2.Instance()
		if in.ID == "go1" {
			want = r1.Instance()
			if ji.PayloadClass != "java.util.LinkedHashMap" {
				t.Fatalf("Curator read go1's payload as %q", ji.PayloadClass)
			}
		} else if ji.PayloadClass != "" {
			t.Fatalf("Curator read go2's null payload as %q", ji.PayloadClass)
		}
		// Curator writes an object payload back with "@class" naming the
		// Java class it read it as, as it writes every payload object.
		in.Payload = withoutClass(t, in.Payload)
		if !equalInstance(in, want) {
			t.Fatalf("Curator read\n%+v\nGo registered\n%+v", in, want)
		}
	}
	if err := j.StartCache(ctx, "svc"); err != nil {
		t.Fatal(err)
	}
	javaCacheSees(t, j, "svc", "go1", "go2")
	if err := j.StartProvider(ctx, "svc"); err != nil {
		t.Fatal(err)
	}
	// A disabled instance is listed, and never picked.
	off := register(t, s, discovery.Instance{Name: "svc", ID: "go3", Disabled: true})
	javaCacheSees(t, j, "svc", "go1", "go2", "go3")
	for i := 0; i < 6; i++ {
		if id, err := j.Pick(ctx, "svc"); err != nil || (id != "go1" && id != "go2") {
			t.Fatalf("Curator's provider picked %q %v", id, err)
		}
	}
	off.Close()
	javaCacheSees(t, j, "svc", "go1", "go2")
	up := r1.Instance()
	up.Port = 9090
	waitFor(t, "Update", func(ctx context.Context) error { return r1.Update(ctx, up) })
	zktest.Eventually(t, wait, func() bool {
		for _, ji := range javaCacheSees(t, j, "svc", "go1", "go2") {
			var in discovery.Instance
			if json.Unmarshal(ji.Instance, &in) == nil && in.ID == "go1" && in.Port == 9090 {
				return true
			}
		}
		return false
	}, "Curator's cache has the update")
	r1.Close()
	javaCacheSees(t, j, "svc", "go2")
	javaQuerySees(t, j, "svc", "go2")
	r2.Close()
	javaCacheSees(t, j, "svc")
	if id, err := j.Pick(ctx, "svc"); err != nil || id != "" {
		t.Fatalf("Curator's provider picked %q %v after every instance left", id, err)
	}
}

// TestGoFindsCuratorInstances: a Go cache and provider find the instances
// Curator registered (Spring's payload, as Spring registers), follow its
// updateService, and see them leave at unregisterService and at Close.
func TestGoFindsCuratorInstances(t *testing.T) {
	ns := zktest.NewNamespace(t)
	raw := ns.Conn(t)
	ctx := ctxT(t)
	j := curatortest.StartDiscovery(t, ns.Servers(), ns.Path("services"), curatortest.SpringPayload)
	s := sessiontest.Connect(t, ns)
	c := newCache(t, s, "svc")
	rec := record(c.Events())
	rec.waitInit(t)
	p, err := discovery.NewProvider(c)
	if err != nil {
		t.Fatal(err)
	}
	for i, typ := range []string{"DYNAMIC", "DYNAMIC_SEQUENTIAL", "STATIC"} {
		if err := j.Register(ctx, "svc", fmt.Sprintf("j%d", i+1), 7000+i, typ); err != nil {
			t.Fatal(err)
		}
	}
	goCacheSees(t, c, "j1", "j2", "j3")
	if d := sameInstances(c.Instances(), serverInstances(t, raw, ns.Path("services"), "svc")); d != "" {
		t.Fatal(d)
	}
	for _, in := range c.Instances() {
		sp, err := discovery.ParseSpring(in.Payload)
		if err != nil {
			t.Fatalf("%s's payload %s: %v", in.ID, in.Payload, err)
		}
		if sp.ID != in.ID || sp.Name != "svc" || sp.Metadata["zone"] != "z-"+in.ID {
			t.Fatalf("%s's Spring payload %+v", in.ID, sp)
		}
		if want := fmt.Sprintf("http://127.0.0.1:%d", in.Port); in.URI() != want || in.Address != "127.0.0.1" || in.Disabled {
			t.Fatalf("%s: %+v, URI %q", in.ID, in, in.URI())
		}
	}
	types := map[string]discovery.ServiceType{}
	for _, in := range c.Instances() {
		types[in.ID] = in.Type
	}
	if types["j1"] != discovery.Dynamic || types["j2"] != discovery.DynamicSequential || types["j3"] != discovery.Static {
		t.Fatalf("types read %v", types)
	}
	seen := map[string]bool{}
	for i := 0; i < 6; i++ {
		in, err := p.Pick()
		if err != nil {
			t.Fatal(err)
		}
		seen[in.ID] = true
	}
	if len(seen) != 3 {
		t.Fatalf("round robin picked %v", seen)
	}
	list, err := discovery.Instances(ctx, s, base, "svc")
	if err != nil || fmt.Sprint(idsOf(list)) != "[j1 j2 j3]" {
		t.Fatalf("Instances: %v %v", idsOf(list), err)
	}
	if err := j.Update(ctx, "j1", 7100); err != nil {
		t.Fatal(err)
	}
	rec.WaitFor(t, wait, "Updated j1", func(evs []recorded) bool {
		for _, ev := range evs {
			if ev.Type == cache.Updated && ev.Instance.ID == "j1" && ev.Instance.Port == 7100 {
				return true
			}
		}
		return false
	})
	if err := j.Unregister(ctx, "j1"); err != nil {
		t.Fatal(err)
	}
	goCacheSees(t, c, "j2", "j3")
	if err := j.Close(ctx); err != nil {
		t.Fatal(err)
	}
	// Curator's close unregisters what it registered, STATIC included; its
	// DYNAMIC_SEQUENTIAL node is named <id><seq>, which its unregister
	// (deleting <id>) misses: it goes with the session.
	zktest.Eventually(t, wait, func() bool { return len(c.Instances()) <= 1 }, "the Curator instances gone")
	t.Logf("left after Curator's close: %v", idsOf(c.Instances()))
}

// TestBothRegisterOneName: Go and Curator register under one service name
// at once; each side lists every instance, in its query and in its cache.
func TestBothRegisterOneName(t *testing.T) {
	ns := zktest.NewNamespace(t)
	ctx := ctxT(t)
	j := curatortest.StartDiscovery(t, ns.Servers(), ns.Path("services"), curatortest.ObjectPayload)
	if err := j.StartCache(ctx, "mix"); err != nil {
		t.Fatal(err)
	}
	s := sessiontest.Connect(t, ns)
	c := newCache(t, s, "mix", discovery.WithEvents(false))
	errs := make(chan error, 1)
	go func() {
		for i := 1; i <= 3; i++ {
			if err := j.Register(ctx, "mix", fmt.Sprintf("java%d", i), 6000+i, "DYNAMIC"); err != nil {
				errs <- err
				return
			}
		}
		errs <- nil
	}()
	for i := 1; i <= 3; i++ {
		register(t, sessiontest.Connect(t, ns), discovery.Instance{Name: "mix", ID: fmt.Sprintf("go%d", i), Port: 5000 + i,
			Payload: json.RawMessage(fmt.Sprintf(`{"k":"go%d"}`, i))})
	}
	if err := sessiontest.Recv(t, errs, wait, "the Java registrations"); err != nil {
		t.Fatal(err)
	}
	all := []string{"go1", "go2", "go3", "java1", "java2", "java3"}
	goCacheSees(t, c, all...)
	list, err := discovery.Instances(ctx, s, base, "mix")
	if err != nil || fmt.Sprint(idsOf(list)) != fmt.Sprint(all) {
		t.Fatalf("Go's Instances: %v %v", idsOf(list), err)
	}
	javaQuerySees(t, j, "mix", all...)
	javaCacheSees(t, j, "mix", all...)
	for _, in := range c.Instances() {
		want := fmt.Sprintf(`{"k":%q}`, in.ID)
		if in.ID[0] == 'j' { // Curator writes a map payload with its class
			want = fmt.Sprintf(`{"@class":"java.util.HashMap","k":%q}`, in.ID)
		}
		if !sameJSON(in.Payload, json.RawMessage(want)) {
			t.Fatalf("%s's payload %s, want %s", in.ID, in.Payload, want)
		}
	}
}

// TestSpringPayloadRoundTrip: Spring's payload read with Spring's Jackson
// configuration (JsonInstanceSerializer<ZookeeperInstance>) both ways: what
// Go registers with SpringInstance.Payload, Curator reads as a
// ZookeeperInstance with the same fields; what Curator writes, Go reads,
// and writes again byte for byte.
func TestSpringPayloadRoundTrip(t *testing.T) {
	ns := zktest.NewNamespace(t)
	raw := ns.Conn(t)
	ctx := ctxT(t)
	j := curatortest.StartDiscovery(t, ns.Servers(), ns.Path("services"), curatortest.SpringPayload)
	s := sessiontest.Connect(t, ns)
	sp := discovery.SpringInstance{ID: "orders:8080", Name: "orders", Metadata: map[string]string{"version": "1.2", "zone": "eu-1"}}
	r := register(t, s, discovery.Instance{Name: "orders", ID: "go-orders", Address: "10.1.2.3", Port: 8080,
		Payload: sp.Payload(), URISpec: "{scheme}://{address}:{port}"})
	got := javaQuerySees(t, j, "orders", "go-orders")
	ji := got[0]
	if ji.PayloadClass != discovery.SpringClass || ji.Spring == nil {
		t.Fatalf("Curator read the payload as %q %+v", ji.PayloadClass, ji.Spring)
	}
	if ji.Spring.ID != sp.ID || ji.Spring.Name != sp.Name || !reflect.DeepEqual(ji.Spring.Metadata, sp.Metadata) {
		t.Fatalf("Curator's ZookeeperInstance %+v, want %+v", *ji.Spring, sp)
	}
	var back discovery.Instance
	if err := json.Unmarshal(ji.Instance, &back); err != nil || !equalInstance(back, r.Instance()) {
		t.Fatalf("Curator wrote back %s (%v), want %+v", ji.Instance, err, r.Instance())
	}

	if err := j.Register(ctx, "orders", "java-orders", 8081, "DYNAMIC"); err != nil {
		t.Fatal(err)
	}
	data, _, err := raw.Get(ns.Path("services/orders/java-orders"))
	if err != nil {
		t.Fatal(err)
	}
	var in discovery.Instance
	if err := json.Unmarshal(data, &in); err != nil {
		t.Fatal(err)
	}
	jsp, err := discovery.ParseSpring(in.Payload)
	if err != nil || jsp.ID != "java-orders" || jsp.Name != "orders" || jsp.Metadata["zone"] != "z-java-orders" {
		t.Fatalf("Go read Curator's payload %s as %+v (%v)", in.Payload, jsp, err)
	}
	if string(jsp.Payload()) != string(in.Payload) {
		t.Fatalf("Go writes the payload as\n%s\nCurator wrote\n%s", jsp.Payload(), in.Payload)
	}
	again, err := json.Marshal(in)
	if err != nil || string(again) != string(data) {
		t.Fatalf("Go writes the instance as\n%s\nCurator wrote\n%s", again, data)
	}
	t.Logf("Curator wrote %s", data)
}
