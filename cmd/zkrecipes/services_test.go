package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/internal/testkit/curatortest"
	"github.com/zkrecipes/zkrecipes/internal/testkit/sessiontest"
	"github.com/zkrecipes/zkrecipes/recipes/discovery"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// springNode is an instance as Spring Cloud Zookeeper registers it through
// Curator's JsonInstanceSerializer: Jackson's field order, nulls, the
// UriSpec as its parts, and the ZookeeperInstance payload with its @class.
const springNode = `{"name":"spring-app","id":"6f1c0d2e-8a34-4c5b-9e7f-0a1b2c3d4e5f","address":"192.168.1.20",` +
	`"port":8081,"sslPort":null,"payload":{"@class":"org.springframework.cloud.zookeeper.discovery.ZookeeperInstance",` +
	`"id":"spring-app-1","name":"spring-app","metadata":{"instance_status":"UP","zone":"eu-1"}},` +
	`"registrationTimeUTC":1700000000123,"serviceType":"DYNAMIC","uriSpec":{"parts":[` +
	`{"value":"scheme","variable":true},{"value":"://","variable":false},{"value":"address","variable":true},` +
	`{"value":":","variable":false},{"value":"port","variable":true}]},"enabled":true}`

// services lists the service names under the base path and the instances
// of one, as text and as JSON: instances registered through
// recipes/discovery (a Spring payload, another payload, none; enabled and
// disabled; ports set and not), one node written raw in Curator's JSON by
// Spring Cloud Zookeeper, a node whose data is no instance (left out), and
// another base path.
func TestServices(t *testing.T) {
	ctx := testContext(t)
	ns := zktest.NewNamespace(t)
	sess := sessiontest.Connect(t, ns)
	zc := ns.Conn(t)
	register := func(base string, in discovery.Instance) discovery.Instance {
		t.Helper()
		r, err := discovery.Register(sess, base, in)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.Close() })
		if err := r.Wait(ctx); err != nil {
			t.Fatal(err)
		}
		return r.Instance()
	}
	spring := discovery.SpringInstance{ID: "billing-1", Name: "billing", Metadata: map[string]string{"zone": "eu-1", "note": "a b\tc"}}
	b1 := register("/services", discovery.Instance{Name: "billing", ID: "b1", Address: "10.0.0.7", Port: 8080, SSLPort: 8443, Payload: spring.Payload()})
	b2 := register("/services", discovery.Instance{Name: "billing", ID: "b2", Address: "10.0.0.8", Port: 8081, Disabled: true,
		Payload: json.RawMessage(`{"weight": 3, "tags": ["x"]}`)})
	o1 := register("/services", discovery.Instance{Name: "orders", ID: "o1", Type: discovery.Static})
	register("/custom", discovery.Instance{Name: "search", ID: "s1", Address: "search.internal", Port: 9200})
	long := `{"desc":"` + strings.Repeat("é", 60) + `","n":1}`
	register("/custom", discovery.Instance{Name: "long", ID: "l1", Payload: json.RawMessage(long)})
	for _, n := range []struct{ path, data string }{
		{"/services/spring-app", ""},
		{"/services/spring-app/6f1c0d2e-8a34-4c5b-9e7f-0a1b2c3d4e5f", springNode},
		{"/services/billing/junk", "not an instance"},
	} {
		if _, err := zc.Create(ns.Path(n.path), []byte(n.data), 0, zk.WorldACL(zk.PermAll)); err != nil {
			t.Fatal(err)
		}
	}
	c := conn(ns, 10*time.Second)
	svc := func(argv ...string) string {
		t.Helper()
		code, out, stderr := runCmd(t, nil, args([]string{"services"}, c, argv)...)
		if code != 0 || stderr != "" {
			t.Fatalf("services %s: exit %d, stderr %q", strings.Join(argv, " "), code, stderr)
		}
		return out
	}
	stamp := func(in discovery.Instance) string {
		return "registered " + in.RegistrationTime.UTC().Format("2006-01-02T15:04:05.000Z")
	}
	lines := func(argv ...string) [][]string {
		t.Helper()
		var out [][]string
		for _, l := range strings.Split(strings.TrimSuffix(svc(argv...), "\n"), "\n") {
			out = append(out, strings.Split(l, "\t"))
		}
		return out
	}
	same := func(what string, got []string, want ...string) {
		t.Helper()
		if strings.Join(got, "|") != strings.Join(want, "|") {
			t.Errorf("%s:\n got %q\nwant %q", what, got, want)
		}
	}

	if got := svc(); got != "billing\norders\nspring-app\n" {
		t.Errorf("services: %q, want billing, orders and spring-app", got)
	}
	if got := svc("--json"); got != `["billing","orders","spring-app"]`+"\n" {
		t.Errorf("services --json: %q", got)
	}

	t.Logf("services billing:\n%s", svc("billing"))
	billing := lines("billing")
	if len(billing) != 2 {
		t.Fatalf("services billing: %d lines, want 2 (the node that is no instance left out): %q", len(billing), billing)
	}
	same("services billing, b1", billing[0], "b1", "10.0.0.7", "port 8080", "sslPort 8443", "enabled", stamp(b1),
		`spring billing-1 metadata {"note":"a b\tc","zone":"eu-1"}`)
	same("services billing, b2", billing[1], "b2", "10.0.0.8", "port 8081", "sslPort -", "disabled", stamp(b2),
		`payload {"weight":3,"tags":["x"]}`)
	orders := lines("orders")
	if len(orders) != 1 {
		t.Fatalf("services orders: %q", orders)
	}
	same("services orders", orders[0], "o1", "-", "port -", "sslPort -", "enabled", stamp(o1), "no payload")
	springApp := lines("spring-app")
	if len(springApp) != 1 {
		t.Fatalf("services spring-app: %q", springApp)
	}
	same("services spring-app", springApp[0], "6f1c0d2e-8a34-4c5b-9e7f-0a1b2c3d4e5f", "192.168.1.20", "port 8081", "sslPort -",
		"enabled", "registered 2023-11-14T22:13:20.123Z", `spring spring-app-1 metadata {"instance_status":"UP","zone":"eu-1"}`)

	// --json: the instances as Curator writes them.
	var js []map[string]any
	if err := json.Unmarshal([]byte(svc("--json", "billing")), &js); err != nil {
		t.Fatal(err)
	}
	if len(js) != 2 {
		t.Fatalf("services --json billing: %d instances, want 2: %v", len(js), js)
	}
	for i, want := range []map[string]any{
		{"name": "billing", "id": "b1", "address": "10.0.0.7", "port": 8080.0, "sslPort": 8443.0, "enabled": true,
			"registrationTimeUTC": float64(b1.RegistrationTime.UnixMilli()), "serviceType": "DYNAMIC"},
		{"name": "billing", "id": "b2", "address": "10.0.0.8", "port": 8081.0, "sslPort": nil, "enabled": false,
			"registrationTimeUTC": float64(b2.RegistrationTime.UnixMilli()), "serviceType": "DYNAMIC"},
	} {
		for k, v := range want {
			if got, ok := js[i][k]; !ok || got != v {
				t.Errorf("services --json billing, instance %d: %s = %v, want %v", i, k, got, v)
			}
		}
	}
	if p, _ := js[0]["payload"].(map[string]any); p["@class"] != discovery.SpringClass || p["id"] != "billing-1" {
		t.Errorf("services --json billing: b1's payload %v, want the Spring payload", js[0]["payload"])
	}
	var insts []discovery.Instance
	if err := json.Unmarshal([]byte(svc("--json", "spring-app")), &insts); err != nil {
		t.Fatal(err)
	}
	if len(insts) != 1 || insts[0].URI() != "http://192.168.1.20:8081" {
		t.Fatalf("services --json spring-app: %+v, want the Spring instance, its UriSpec kept", insts)
	}
	if s, err := discovery.ParseSpring(insts[0].Payload); err != nil || s.Metadata["zone"] != "eu-1" {
		t.Errorf("services --json spring-app: payload %s: %+v, %v", insts[0].Payload, s, err)
	}

	// Another base path; a service or a base that does not exist.
	if got := svc("--base", "/custom"); got != "long\nsearch\n" {
		t.Errorf("services --base /custom: %q", got)
	}
	search := lines("--base", "/custom", "search")
	if len(search) != 1 || strings.Join(search[0][:4], "|") != "s1|search.internal|port 9200|sslPort -" {
		t.Errorf("services --base /custom search: %q", search)
	}
	// A payload past 80 bytes is cut, between characters.
	if got := lines("--base", "/custom", "long"); len(got) != 1 || got[0][6] != "payload "+long[:79]+"…" {
		t.Errorf("services --base /custom long: %q, want the payload cut after 79 bytes (80 would split a character)", got)
	}
	for _, argv := range [][]string{{"nosuch"}, {"--base", "/none"}, {"--base", "/none", "x"}} {
		if got := svc(argv...); got != "" {
			t.Errorf("services %s: %q, want nothing", strings.Join(argv, " "), got)
		}
		if got := svc(append([]string{"--json"}, argv...)...); got != "[]\n" {
			t.Errorf("services --json %s: %q, want []", strings.Join(argv, " "), got)
		}
	}
}

// Bad usage of services exits 2 before connecting, naming what is wrong;
// its help says what it prints.
func TestServicesUsage(t *testing.T) {
	dead := []string{"--servers", "127.0.0.1:1", "--connect-timeout", "1s"}
	for _, tc := range []struct {
		argv []string
		want string
	}{
		{[]string{"a", "b"}, `one NAME only, got "b" after it (flags go before NAME)`},
		{[]string{"a/b"}, `NAME "a/b": want a service's name, one node below --base (no '/')`},
		{[]string{".."}, `NAME "..": `},
		{[]string{"--base", "services"}, `--base "services": must start with '/'`},
		{[]string{"--base", "/services/"}, `--base "/services/": trailing '/'`},
		{[]string{"--frob"}, "flag provided but not defined: -frob"},
	} {
		code, out, stderr := runCmd(t, nil, args([]string{"services"}, dead, tc.argv)...)
		if code != exitUsage || out != "" || !strings.Contains(stderr, tc.want) || !strings.Contains(stderr, "(see zkrecipes help services)") {
			t.Errorf("services %s: exit %d, stdout %q, stderr %q: want exit %d and %q", strings.Join(tc.argv, " "), code, out, stderr, exitUsage, tc.want)
		}
	}
	code, out, _ := runCmd(t, nil, "help", "services")
	for _, want := range []string{"zkrecipes services [--base P] [--json] [NAME]", "--base P", "/services", "registrationTimeUTC", "--servers"} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("help services: exit %d, lacks %q", code, want)
		}
	}
	if code, out, _ := runCmd(t, nil, "help"); code != 0 || !strings.Contains(out, "zkrecipes services") {
		t.Errorf("help: exit %d, lacks the services command", code)
	}
}

// services lists what Curator's ServiceDiscovery registered, with Spring
// Cloud Zookeeper's payload: the names, and the instance with its Spring
// id and metadata, its registration time as Curator's query reads it.
func TestServicesListsCuratorRegistrations(t *testing.T) {
	ctx := testContext(t)
	ns := zktest.NewNamespace(t)
	java := curatortest.StartDiscovery(t, ns.Servers(), ns.Path("/services"), curatortest.SpringPayload)
	if err := java.Register(ctx, "pay", "j1", 7001, "DYNAMIC"); err != nil {
		t.Fatal(err)
	}
	if err := java.Register(ctx, "pay", "j2", 7002, "STATIC"); err != nil {
		t.Fatal(err)
	}
	c := conn(ns, 10*time.Second)
	code, out, stderr := runCmd(t, nil, args([]string{"services"}, c)...)
	if code != 0 || out != "pay\n" {
		t.Fatalf("services: exit %d, %q, %s", code, out, stderr)
	}
	code, out, stderr = runCmd(t, nil, args([]string{"services"}, c, []string{"pay"})...)
	if code != 0 {
		t.Fatalf("services pay: exit %d: %s", code, stderr)
	}
	t.Logf("services pay:\n%s", out)
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != 2 {
		t.Fatalf("services pay: %d lines, want 2:\n%s", len(lines), out)
	}
	for i, id := range []string{"j1", "j2"} {
		f := strings.Split(lines[i], "\t")
		want := []string{id, "127.0.0.1", "port 700" + id[1:], "sslPort -", "enabled"}
		if len(f) != 7 || strings.Join(f[:5], "|") != strings.Join(want, "|") ||
			!strings.HasPrefix(f[5], "registered 20") || f[6] != `spring `+id+` metadata {"zone":"z-`+id+`"}` {
			t.Errorf("services pay, line %d: %q, want %q, a registration time and the Spring payload", i, f, want)
		}
	}
	code, out, _ = runCmd(t, nil, args([]string{"services", "--json"}, c, []string{"pay"})...)
	var insts []discovery.Instance
	if err := json.Unmarshal([]byte(out), &insts); code != 0 || err != nil {
		t.Fatalf("services --json pay: exit %d, %v: %s", code, err, out)
	}
	if len(insts) != 2 || insts[0].URI() != "http://127.0.0.1:7001" || insts[1].Type != discovery.Static {
		t.Fatalf("services --json pay: %+v, want j1 (its UriSpec) and the STATIC j2", insts)
	}
	// The registration times are those Curator reads.
	jis, err := java.Query(ctx, "pay")
	if err != nil {
		t.Fatal(err)
	}
	curator := map[string]time.Time{}
	for _, ji := range jis {
		var in discovery.Instance
		if err := json.Unmarshal(ji.Instance, &in); err != nil {
			t.Fatal(err)
		}
		curator[in.ID] = in.RegistrationTime
	}
	for i, in := range insts {
		stamp := "registered " + in.RegistrationTime.UTC().Format("2006-01-02T15:04:05.000Z")
		if ct, ok := curator[in.ID]; !ok || !ct.Equal(in.RegistrationTime) || !strings.Contains(lines[i], "\t"+stamp+"\t") {
			t.Errorf("instance %s: registered %v in --json, %v for Curator; text line %q", in.ID, in.RegistrationTime, ct, lines[i])
		}
	}
}
