package zkgrpc_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/status"

	"github.com/zkrecipes/zkrecipes/internal/testkit/sessiontest"
	"github.com/zkrecipes/zkrecipes/recipes/discovery"
	"github.com/zkrecipes/zkrecipes/session"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// TestRoundRobinReachesAll: a round_robin client over three registered
// servers reaches all three, and only them.
func TestRoundRobinReachesAll(t *testing.T) {
	ns := zktest.NewNamespace(t)
	reg := sessiontest.Connect(t, ns)
	for _, name := range []string{"a", "b", "c"} {
		register(t, reg, instance("greeter", startBackend(t, name)))
	}
	startBackend(t, "stranger") // serves, never registered
	client := sessiontest.Connect(t, ns)
	cc := dial(t, newBuilder(t, client), target("greeter"), roundRobin)
	reachAll(t, cc, "a", "b", "c")
	// Once all three are connected, round_robin takes each in turn.
	counts := map[string]int{}
	for i := 0; i < 30; i++ {
		got, err := call(cc, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		counts[got]++
	}
	for _, name := range []string{"a", "b", "c"} {
		if counts[name] == 0 {
			t.Errorf("%s never answered in 30 calls: %v", name, counts)
		}
	}
}

// TestInstanceLeavesAndComesBack: a server whose instance goes (unregistered,
// its session closed or expired, or the server dead as well) is no longer
// picked, and is picked again once it is registered again. In the first
// three cases the server keeps serving, so only the resolver can have
// dropped it.
func TestInstanceLeavesAndComesBack(t *testing.T) {
	cases := []struct {
		name string
		// leave makes b's instance go; dead says its server was stopped too.
		leave func(t *testing.T, sess *session.Session, tap *zktest.Tap, r *discovery.Registration, srv interface{ Stop() })
		dead  bool
	}{
		{name: "unregistered", leave: func(t *testing.T, _ *session.Session, _ *zktest.Tap, r *discovery.Registration, _ interface{ Stop() }) {
			if err := r.Close(); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "session closed", leave: func(t *testing.T, sess *session.Session, _ *zktest.Tap, _ *discovery.Registration, _ interface{ Stop() }) {
			if err := sess.Close(); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "session expired", leave: func(t *testing.T, sess *session.Session, tap *zktest.Tap, _ *discovery.Registration, _ interface{ Stop() }) {
			sessiontest.Expire(t, sess, tap)
		}},
		{name: "server died", dead: true, leave: func(t *testing.T, sess *session.Session, tap *zktest.Tap, _ *discovery.Registration, srv interface{ Stop() }) {
			srv.Stop()
			sessiontest.Expire(t, sess, tap)
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ns := zktest.NewNamespace(t)
			others := sessiontest.Connect(t, ns)
			register(t, others, instance("greeter", startBackend(t, "a")))
			register(t, others, instance("greeter", startBackend(t, "c")))
			bSess, bTap := sessiontest.ConnectTap(t, ns)
			bSrv := startBackend(t, "b")
			bReg := register(t, bSess, instance("greeter", bSrv))

			client := sessiontest.Connect(t, ns)
			cc := dial(t, newBuilder(t, client), target("greeter"), roundRobin)
			reachAll(t, cc, "a", "b", "c")

			tc.leave(t, bSess, bTap, bReg, bSrv)
			avoid(t, cc, "b", 20)

			// b comes back: the same address, registered by a new session.
			addr := bSrv.Addr()
			if tc.dead {
				bSrv = startBackendAt(t, "b", addr)
			}
			back := sessiontest.Connect(t, ns)
			register(t, back, instance("greeter", bSrv))
			reachAll(t, cc, "a", "b", "c")
		})
	}
}

// TestNoInstances: with no instance of the service, calls fail fast with
// Unavailable and wait-for-ready calls wait; both succeed once an instance
// is registered; when it goes, calls fail fast again.
func TestNoInstances(t *testing.T) {
	for _, policy := range []struct{ name, config string }{{"pick_first", ""}, {"round_robin", roundRobin}} {
		t.Run(policy.name, func(t *testing.T) {
			ns := zktest.NewNamespace(t)
			client := sessiontest.Connect(t, ns)
			cc := dial(t, newBuilder(t, client), target("greeter"), policy.config)

			start := time.Now()
			_, err := call(cc, wait)
			if status.Code(err) != codes.Unavailable {
				t.Fatalf("call with no instance: %v, want Unavailable", err)
			}
			if d := time.Since(start); d > wait/2 {
				t.Fatalf("call with no instance took %v: it should fail fast", d)
			}
			t.Logf("%s: %v, after %v", policy.name, err, time.Since(start))
			if policy.name == "pick_first" {
				// The resolver's error follows the empty state, whose own
				// error a call may see first.
				zktest.Eventually(t, wait, func() bool {
					_, err = call(cc, wait)
					return strings.Contains(fmt.Sprint(err), discovery.ErrNoInstances.Error())
				}, "calls failing with the resolver's error")
			}

			type result struct {
				name string
				err  error
			}
			waiting := make(chan result, 1)
			go func() {
				name, err := call(cc, wait, grpc.WaitForReady(true))
				waiting <- result{name, err}
			}()
			sess := sessiontest.Connect(t, ns)
			r := register(t, sess, instance("greeter", startBackend(t, "a")))
			res := sessiontest.Recv(t, waiting, wait, "the wait-for-ready call")
			if res.err != nil || res.name != "a" {
				t.Fatalf("wait-for-ready call: %q, %v; want a", res.name, res.err)
			}
			if got, err := call(cc, wait); err != nil || got != "a" {
				t.Fatalf("call once registered: %q, %v; want a", got, err)
			}

			if err := r.Close(); err != nil {
				t.Fatal(err)
			}
			zktest.Eventually(t, wait, func() bool {
				_, err := call(cc, wait)
				return status.Code(err) == codes.Unavailable
			}, "calls failing once the last instance went")
		})
	}
}

// TestShortPartitionChangesNothing: the client's session partitioned past
// Suspended but not past its timeout, then healed, changes nothing: the
// resolver gives gRPC nothing new, and calls reach every backend throughout.
func TestShortPartitionChangesNothing(t *testing.T) {
	ns := zktest.NewNamespace(t)
	reg := sessiontest.Connect(t, ns)
	for _, name := range []string{"a", "b", "c"} {
		register(t, reg, instance("greeter", startBackend(t, name)))
	}
	client, proxy := sessiontest.ConnectProxy(t, ns, session.WithSessionTimeout(6*time.Second))
	states := sessiontest.Record(t, client)
	rec := newRecorder()
	cc := dial(t, recBuilder{newBuilder(t, client), rec}, target("greeter"), roundRobin)
	reachAll(t, cc, "a", "b", "c")
	nStates, nErrs := rec.counts()

	proxy.Partition()
	states.Wait(t, wait, session.Suspended)
	reachAll(t, cc, "a", "b", "c")
	proxy.Heal()
	states.Wait(t, wait, session.Reconnected)
	reachAll(t, cc, "a", "b", "c")

	for _, st := range states.States() {
		if st == session.Lost {
			t.Fatalf("the session was lost: the partition was too long for this machine (%v)", states.States())
		}
	}
	if s, e := rec.counts(); s != nStates || e != nErrs {
		t.Fatalf("the resolver gave %d states and %d errors during the partition; want none", s-nStates, e-nErrs)
	}
}

// TestOutageKeepsAddresses: while the client cannot reach ZooKeeper, past
// its session timeout, the last known addresses are kept, even one
// unregistered meanwhile; once it is back (on a new session), the resolver
// gives the service as it is then.
func TestOutageKeepsAddresses(t *testing.T) {
	ns := zktest.NewNamespace(t)
	reg := sessiontest.Connect(t, ns)
	register(t, reg, instance("greeter", startBackend(t, "a")))
	bReg := register(t, reg, instance("greeter", startBackend(t, "b")))
	client, proxy := sessiontest.ConnectProxy(t, ns)
	states := sessiontest.Record(t, client)
	rec := newRecorder()
	cc := dial(t, recBuilder{newBuilder(t, client), rec}, target("greeter"), roundRobin)
	reachAll(t, cc, "a", "b")

	proxy.Partition()
	if err := bReg.Close(); err != nil {
		t.Fatal(err)
	}
	states.Wait(t, wait, session.Lost)
	reachAll(t, cc, "a", "b") // b is gone from ZooKeeper, but the client cannot know

	proxy.Heal()
	states.Wait(t, wait, session.Reconnected)
	avoid(t, cc, "b", 20)
	rec.waitState(t, "a only", func(st resolver.State) bool { return len(st.Endpoints) == 1 })
}

// TestFirstLoadLate: a resolver whose session cannot reach ZooKeeper when it
// starts reports an error after the session timeout, so that calls fail
// fast meanwhile; it resolves once ZooKeeper answers.
func TestFirstLoadLate(t *testing.T) {
	ns := zktest.NewNamespace(t)
	reg := sessiontest.Connect(t, ns)
	register(t, reg, instance("greeter", startBackend(t, "a")))
	client, proxy := sessiontest.ConnectProxy(t, ns)
	states := sessiontest.Record(t, client)
	proxy.Partition()
	states.Wait(t, wait, session.Suspended)

	cc := dial(t, newBuilder(t, client), target("greeter"), roundRobin)
	_, err := call(cc, wait)
	if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "not read from ZooKeeper") {
		t.Fatalf("call before the first load: %v; want Unavailable, not read from ZooKeeper", err)
	}
	proxy.Heal()
	if got, err := call(cc, wait, grpc.WaitForReady(true)); err != nil || got != "a" {
		t.Fatalf("call once ZooKeeper answers: %q, %v; want a", got, err)
	}
}

// TestSessionClosedKeepsAddresses: closing the client's session stops the
// resolver's cache; the resolver reports it, and calls go on to the last
// known addresses.
func TestSessionClosedKeepsAddresses(t *testing.T) {
	ns := zktest.NewNamespace(t)
	reg := sessiontest.Connect(t, ns)
	register(t, reg, instance("greeter", startBackend(t, "a")))
	register(t, reg, instance("greeter", startBackend(t, "b")))
	client := sessiontest.Connect(t, ns)
	rec := newRecorder()
	cc := dial(t, recBuilder{newBuilder(t, client), rec}, target("greeter"), roundRobin)
	reachAll(t, cc, "a", "b")
	if err := client.Close(); err != nil {
		t.Fatal(err)
	}
	rec.waitErr(t, "matching session.ErrClosed", isErr(session.ErrClosed))
	reachAll(t, cc, "a", "b")
}

// TestBadTargetFailsCalls: a target the Builder refuses fails the client's
// calls with the Builder's message.
func TestBadTargetFailsCalls(t *testing.T) {
	ns := zktest.NewNamespace(t)
	client := sessiontest.Connect(t, ns)
	b := newBuilder(t, client)
	for _, tc := range []struct{ target, want string }{
		{"zk://zk1:2181/greeter", "authority must be empty"},
		{"zk:///a/b", "without '/'"},
	} {
		cc := dial(t, b, tc.target, "")
		_, err := call(cc, wait)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: call returned %v; want an error saying %q", tc.target, err, tc.want)
		}
		var st interface{ GRPCStatus() *status.Status }
		if !errors.As(err, &st) {
			t.Errorf("%s: %v is not a gRPC status", tc.target, err)
		}
	}
}

// TestDeadServerStillRegistered: a server that dies while its instance stays
// registered is skipped by round_robin: calls go on, to the others.
func TestDeadServerStillRegistered(t *testing.T) {
	ns := zktest.NewNamespace(t)
	reg := sessiontest.Connect(t, ns)
	register(t, reg, instance("greeter", startBackend(t, "a")))
	b := startBackend(t, "b")
	register(t, reg, instance("greeter", b))
	register(t, reg, instance("greeter", startBackend(t, "c")))
	client := sessiontest.Connect(t, ns)
	rec := newRecorder()
	cc := dial(t, recBuilder{newBuilder(t, client), rec}, target("greeter"), roundRobin)
	reachAll(t, cc, "a", "b", "c")
	n, _ := rec.counts()
	b.Stop()
	avoid(t, cc, "b", 20)
	if m, _ := rec.counts(); m != n {
		t.Errorf("the resolver gave %d states: b's instance is still registered", m-n)
	}
}
