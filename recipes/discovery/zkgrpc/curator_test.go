package zkgrpc_test

import (
	"context"
	"testing"

	"google.golang.org/grpc/resolver"

	"github.com/zkrecipes/zkrecipes/internal/testkit/curatortest"
	"github.com/zkrecipes/zkrecipes/internal/testkit/sessiontest"
	"github.com/zkrecipes/zkrecipes/recipes/discovery/zkgrpc"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// TestCuratorInstances: an instance that Curator's ServiceDiscovery
// registers with Spring Cloud Zookeeper's payload is called beside a Go
// one, with its Spring metadata in its attributes; Curator's update of its
// port moves the calls to the new port, and its unregistration ends them.
// The Java side only registers: its instance points at a Go gRPC server.
func TestCuratorInstances(t *testing.T) {
	ns := zktest.NewNamespace(t)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	sess := sessiontest.Connect(t, ns)
	register(t, sess, instance("greeter", startBackend(t, "go-1")))
	java := curatortest.StartDiscovery(t, ns.Servers(), ns.Root+basePath, curatortest.SpringPayload)
	first := startBackend(t, "java-1")
	if err := java.Register(ctx, "greeter", "java-1", first.Port(), "DYNAMIC"); err != nil {
		t.Fatal(err)
	}

	client := sessiontest.Connect(t, ns)
	rec := newRecorder()
	cc := dial(t, recBuilder{newBuilder(t, client), rec}, target("greeter"), roundRobin)
	reachAll(t, cc, "go-1", "java-1")
	st := rec.waitState(t, "java-1's instance", func(st resolver.State) bool { return len(st.Endpoints) == 2 })
	found := false
	for _, ep := range st.Endpoints {
		inst, ok := zkgrpc.Instance(ep.Attributes)
		if !ok || inst.ID != "java-1" {
			continue
		}
		found = true
		md, ok := zkgrpc.SpringMetadata(ep.Attributes)
		if !ok || md["zone"] != "z-java-1" {
			t.Errorf("java-1's Spring metadata: %v, %v; want zone z-java-1", md, ok)
		}
		if got := ep.Addresses[0].Addr; got != first.Addr() {
			t.Errorf("java-1's address: %s; want %s", got, first.Addr())
		}
	}
	if !found {
		t.Fatalf("no endpoint stands for java-1: %v", addrs(st))
	}

	moved := startBackend(t, "java-1-moved")
	if err := java.Update(ctx, "java-1", moved.Port()); err != nil {
		t.Fatal(err)
	}
	avoid(t, cc, "java-1", 20)
	reachAll(t, cc, "go-1", "java-1-moved")

	if err := java.Unregister(ctx, "java-1"); err != nil {
		t.Fatal(err)
	}
	avoid(t, cc, "java-1-moved", 20)
}
