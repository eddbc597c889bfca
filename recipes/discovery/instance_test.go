package discovery_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/recipes/discovery"
)

// curatorJSON is an instance as Curator 5.4's JsonInstanceSerializer writes
// it by default (fields in Jackson's order, no "enabled"), with Spring Cloud
// Zookeeper's payload. TestSpringPayloadRoundTrip checks the same against
// what Curator writes.
const curatorJSON = `{"name":"billing","id":"8b1a9953-c461-4c4b-9f8e-0c3f0a6d0e11","address":"10.0.0.7","port":8080,"sslPort":null,` +
	`"payload":{"@class":"org.springframework.cloud.zookeeper.discovery.ZookeeperInstance","id":"billing:8080","name":"billing","metadata":{"zone":"a"}},` +
	`"registrationTimeUTC":1700000000123,"serviceType":"DYNAMIC",` +
	`"uriSpec":{"parts":[{"value":"scheme","variable":true},{"value":"://","variable":false},{"value":"address","variable":true},{"value":":","variable":false},{"value":"port","variable":true}]}}`

// TestInstanceJSON: an instance written as Curator writes it reads back
// field by field, and writes back byte for byte.
func TestInstanceJSON(t *testing.T) {
	var in discovery.Instance
	if err := json.Unmarshal([]byte(curatorJSON), &in); err != nil {
		t.Fatal(err)
	}
	want := discovery.Instance{
		Name: "billing", ID: "8b1a9953-c461-4c4b-9f8e-0c3f0a6d0e11", Address: "10.0.0.7", Port: 8080,
		Payload:          json.RawMessage(`{"@class":"org.springframework.cloud.zookeeper.discovery.ZookeeperInstance","id":"billing:8080","name":"billing","metadata":{"zone":"a"}}`),
		RegistrationTime: time.UnixMilli(1700000000123),
		Type:             discovery.Dynamic,
		URISpec:          "{scheme}://{address}:{port}",
	}
	if !reflect.DeepEqual(in, want) {
		t.Fatalf("read\n%+v\nwant\n%+v", in, want)
	}
	if got := in.URI(); got != "http://10.0.0.7:8080" {
		t.Fatalf("URI %q", got)
	}
	out, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != curatorJSON {
		t.Fatalf("wrote\n%s\nwant\n%s", out, curatorJSON)
	}
	s, err := discovery.ParseSpring(in.Payload)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(s, discovery.SpringInstance{ID: "billing:8080", Name: "billing", Metadata: map[string]string{"zone": "a"}}) {
		t.Fatalf("Spring payload %+v", s)
	}
	if string(s.Payload()) != string(in.Payload) {
		t.Fatalf("Spring payload written as %s, want %s", s.Payload(), in.Payload)
	}
}

// TestInstanceJSONLenient: what Curator's Jackson accepts is read: unknown
// fields, null and missing ports, a missing "enabled" (true), a missing
// serviceType (DYNAMIC), a payload of any JSON, numbers as strings.
func TestInstanceJSONLenient(t *testing.T) {
	for _, tc := range []struct {
		name, json string
		want       discovery.Instance
	}{
		{"minimal", `{"name":"a","id":"1"}`, discovery.Instance{Name: "a", ID: "1"}},
		{"nulls", `{"name":"a","id":"1","address":null,"port":null,"sslPort":null,"payload":null,"serviceType":null,"uriSpec":null}`,
			discovery.Instance{Name: "a", ID: "1"}},
		{"unknown fields", `{"name":"a","id":"1","weight":3,"tags":["x"],"nested":{"k":1}}`, discovery.Instance{Name: "a", ID: "1"}},
		{"disabled", `{"name":"a","id":"1","enabled":false}`, discovery.Instance{Name: "a", ID: "1", Disabled: true}},
		{"string payload", `{"name":"a","id":"1","payload":"hello"}`, discovery.Instance{Name: "a", ID: "1", Payload: json.RawMessage(`"hello"`)}},
		{"array payload", `{"name":"a","id":"1","payload":[1,2]}`, discovery.Instance{Name: "a", ID: "1", Payload: json.RawMessage(`[1,2]`)}},
		{"ports as strings", `{"name":"a","id":"1","port":"80","sslPort":443}`, discovery.Instance{Name: "a", ID: "1", Port: 80, SSLPort: 443}},
		{"types", `{"name":"a","id":"1","serviceType":"DYNAMIC_SEQUENTIAL"}`, discovery.Instance{Name: "a", ID: "1", Type: discovery.DynamicSequential}},
		{"static", `{"name":"a","id":"1","serviceType":"STATIC"}`, discovery.Instance{Name: "a", ID: "1", Type: discovery.Static}},
		{"permanent", `{"name":"a","id":"1","serviceType":"PERMANENT"}`, discovery.Instance{Name: "a", ID: "1", Type: discovery.Permanent}},
		{"empty uri spec", `{"name":"a","id":"1","uriSpec":{"parts":[]}}`, discovery.Instance{Name: "a", ID: "1"}},
		{"literal braces", `{"name":"a","id":"1","uriSpec":{"parts":[{"value":"{x}","variable":false},{"value":"port","variable":true}]}}`,
			discovery.Instance{Name: "a", ID: "1", URISpec: "{[}x{]}{port}"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var in discovery.Instance
			if err := json.Unmarshal([]byte(tc.json), &in); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(in, tc.want) {
				t.Fatalf("read %+v, want %+v", in, tc.want)
			}
		})
	}
	for _, bad := range []string{`null`, `[]`, `"x"`, `{"port":"eighty"}`, `{"serviceType":"ELASTIC"}`, `{"enabled":"yes"}`, `{`} {
		var in discovery.Instance
		if err := in.UnmarshalJSON([]byte(bad)); !errors.Is(err, discovery.ErrBadData) {
			t.Errorf("%s: %v, want ErrBadData", bad, err)
		}
	}
}

// TestInstanceJSONWritesNulls: unset ports, address, payload and URI spec
// are written as null, as Curator writes its nulls; "enabled" is written
// only when false.
func TestInstanceJSONWritesNulls(t *testing.T) {
	out, err := json.Marshal(discovery.Instance{Name: "a", ID: "1", Disabled: true, Type: discovery.Permanent})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"name":"a","id":"1","address":null,"port":null,"sslPort":null,"payload":null,"registrationTimeUTC":0,"serviceType":"PERMANENT","uriSpec":null,"enabled":false}`
	if string(out) != want {
		t.Fatalf("wrote %s\nwant  %s", out, want)
	}
	if out, _ := json.Marshal(discovery.Instance{Name: "a", ID: "1"}); strings.Contains(string(out), "enabled") {
		t.Fatalf("an enabled instance written with \"enabled\": %s", out)
	}
	if _, err := json.Marshal(discovery.Instance{Payload: json.RawMessage("{")}); err == nil {
		t.Fatal("a payload that is not JSON was written")
	}
	if _, err := json.Marshal(discovery.Instance{Type: 9}); err == nil {
		t.Fatal("an unknown type was written")
	}
}

// TestURI: the variables Curator's UriSpec knows, https with an SSL port,
// literal braces, unknown variables left out.
func TestURI(t *testing.T) {
	in := discovery.Instance{Name: "n", ID: "i", Address: "h", Port: 80, SSLPort: 443,
		RegistrationTime: time.UnixMilli(42), Type: discovery.DynamicSequential}
	for spec, want := range map[string]string{
		"":                                "",
		"{scheme}://{address}:{ssl-port}": "https://h:443",
		"{name}/{id}/{port}/{registration-time-utc}/{service-type}": "n/i/80/42/dynamic_sequential",
		"x{[}{ port }{]}{unknown}":                                  "x{80}",
		"{broken":                                                   "",
	} {
		in.URISpec = spec
		if got := in.URI(); got != want {
			t.Errorf("%q: %q, want %q", spec, got, want)
		}
	}
	in.SSLPort = 0
	in.URISpec = "{scheme}:{ssl-port}"
	if got := in.URI(); got != "http:" {
		t.Errorf("without an SSL port: %q", got)
	}
}

// TestParseSpring: what a Spring payload may hold, and what it may not.
func TestParseSpring(t *testing.T) {
	s, err := discovery.ParseSpring(json.RawMessage(`{"id":"x","name":"y","metadata":null,"extra":1}`))
	if err != nil || s.ID != "x" || s.Name != "y" || s.Metadata != nil {
		t.Fatalf("%+v %v", s, err)
	}
	if got := string(discovery.SpringInstance{ID: "a", Name: "b"}.Payload()); got !=
		`{"@class":"org.springframework.cloud.zookeeper.discovery.ZookeeperInstance","id":"a","name":"b","metadata":{}}` {
		t.Fatalf("payload %s", got)
	}
	for _, bad := range []string{``, `null`, `"s"`, `[]`, `{"@class":"java.util.HashMap"}`, `{"metadata":{"a":1}}`} {
		if _, err := discovery.ParseSpring(json.RawMessage(bad)); !errors.Is(err, discovery.ErrBadData) {
			t.Errorf("%q: %v, want ErrBadData", bad, err)
		}
	}
}
