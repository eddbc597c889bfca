package discovery_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/zkrecipes/zkrecipes/recipes/discovery"
)

// TestInService: an instance is in service unless Disabled or, with Spring's
// payload, of a status other than UP (Spring's own clients take an empty or
// missing status as UP).
func TestInService(t *testing.T) {
	spring := func(md map[string]string) json.RawMessage {
		return discovery.SpringInstance{ID: "x", Name: "svc", Metadata: md}.Payload()
	}
	for _, tc := range []struct {
		name string
		in   discovery.Instance
		want bool
	}{
		{"plain", discovery.Instance{}, true},
		{"disabled", discovery.Instance{Disabled: true}, false},
		{"spring without status", discovery.Instance{Payload: spring(map[string]string{"zone": "a"})}, true},
		{"spring UP", discovery.Instance{Payload: spring(map[string]string{discovery.SpringStatusKey: "UP"})}, true},
		{"spring empty status", discovery.Instance{Payload: spring(map[string]string{discovery.SpringStatusKey: ""})}, true},
		{"spring OUT_OF_SERVICE", discovery.Instance{Payload: spring(map[string]string{discovery.SpringStatusKey: "OUT_OF_SERVICE"})}, false},
		{"spring DOWN", discovery.Instance{Payload: spring(map[string]string{discovery.SpringStatusKey: "DOWN"})}, false},
		{"spring UP but disabled", discovery.Instance{Disabled: true, Payload: spring(map[string]string{discovery.SpringStatusKey: "UP"})}, false},
		{"other payload naming the key", discovery.Instance{Payload: json.RawMessage(`{"instance_status":"DOWN"}`)}, true},
	} {
		if got := tc.in.InService(); got != tc.want {
			t.Errorf("%s: InService() = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestProviderSkipsOutOfService: a Provider never picks an instance that
// Spring Cloud Zookeeper took out of service.
func TestProviderSkipsOutOfService(t *testing.T) {
	out := discovery.SpringInstance{ID: "b", Name: "svc", Metadata: map[string]string{discovery.SpringStatusKey: "OUT_OF_SERVICE"}}.Payload()
	_, c := providerSetup(t, discovery.Instance{ID: "a"}, discovery.Instance{ID: "b", Payload: out})
	p := newProvider(t, c)
	for i, id := range picks(t, p, 6) {
		if id != "a" {
			t.Fatalf("pick %d: %s, which is out of service", i, id)
		}
	}
	_, only := providerSetup(t, discovery.Instance{ID: "b", Payload: out})
	if _, err := newProvider(t, only).Pick(); !errors.Is(err, discovery.ErrNoInstances) {
		t.Fatalf("Pick with only an instance out of service: %v; want ErrNoInstances", err)
	}
}
