package zkgrpc

import (
	"maps"
	"reflect"

	"google.golang.org/grpc/attributes"

	"github.com/zkrecipes/zkrecipes/recipes/discovery"
)

// The attribute keys, unexported so that only this package sets them; the
// values are compared by content, as gRPC's attributes ask of values that
// are not comparable.
type (
	instanceKey   struct{}
	springKey     struct{}
	instanceValue struct{ in discovery.Instance }
	springValue   struct{ md map[string]string }
)

func (v instanceValue) Equal(o any) bool {
	ov, ok := o.(instanceValue)
	return ok && reflect.DeepEqual(v.in, ov.in)
}

func (v instanceValue) String() string { return v.in.Name + "/" + v.in.ID }

func (v springValue) Equal(o any) bool {
	ov, ok := o.(springValue)
	return ok && maps.Equal(v.md, ov.md)
}

// Instance returns the discovery instance that an endpoint's attributes
// (resolver.Endpoint.Attributes, as a balancer receives them) or an
// address's balancer attributes (resolver.Address.BalancerAttributes in
// resolver.State.Addresses) stand for, as the cache last read it. ok is
// false for attributes that a zkgrpc resolver did not set. The instance's
// Payload is shared: do not modify it.
func Instance(a *attributes.Attributes) (inst discovery.Instance, ok bool) {
	v, ok := a.Value(instanceKey{}).(instanceValue)
	return v.in, ok
}

// SpringMetadata returns the metadata of the instance that the attributes
// stand for (see Instance) when its payload is Spring Cloud Zookeeper's (it
// parses with discovery.ParseSpring): spring.cloud.zookeeper.discovery.metadata,
// such as a zone or a version. The map is the caller's; it is nil when the
// payload has none. ok is false when the payload is not Spring's or the
// attributes are not a zkgrpc resolver's.
func SpringMetadata(a *attributes.Attributes) (md map[string]string, ok bool) {
	v, ok := a.Value(springKey{}).(springValue)
	return maps.Clone(v.md), ok
}
