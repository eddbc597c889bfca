package zkgrpc_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/resolver"

	"github.com/zkrecipes/zkrecipes/recipes/discovery"
	"github.com/zkrecipes/zkrecipes/recipes/discovery/zkgrpc"
	"github.com/zkrecipes/zkrecipes/recipes/discovery/zkgrpc/internal/backend"
	"github.com/zkrecipes/zkrecipes/session"
)

// wait bounds every wait of these tests: generous, for a loaded machine.
const wait = 30 * time.Second

// basePath is where the tests register their services, under each test's
// namespace.
const basePath = "/services"

// roundRobin is the service config of a client balancing over every address.
const roundRobin = `{"loadBalancingConfig":[{"round_robin":{}}]}`

// startBackend serves a backend on a free loopback port until the test ends.
func startBackend(t *testing.T, name string) *backend.Server {
	t.Helper()
	return startBackendAt(t, name, "127.0.0.1:0")
}

// startBackendAt serves a backend on addr until the test ends.
func startBackendAt(t *testing.T, name, addr string) *backend.Server {
	t.Helper()
	s, err := backend.Start(name, addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	return s
}

// instance is the instance of service svc that backend s serves, its id
// the backend's name.
func instance(svc string, s *backend.Server) discovery.Instance {
	return discovery.Instance{Name: svc, ID: s.Name(), Address: s.Host(), Port: s.Port()}
}

// register registers inst on sess and waits until its node exists; the
// registration is closed at the end of the test.
func register(t *testing.T, sess *session.Session, inst discovery.Instance) *discovery.Registration {
	t.Helper()
	r, err := discovery.Register(sess, basePath, inst)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if err := r.Wait(ctx); err != nil {
		t.Fatalf("registering %s/%s: %v", inst.Name, inst.ID, err)
	}
	return r
}

// newBuilder returns a Builder on sess under base, failing the test on error.
func newBuilder(t *testing.T, sess *session.Session, opts ...zkgrpc.Option) *zkgrpc.Builder {
	t.Helper()
	b, err := zkgrpc.NewBuilder(sess, append([]zkgrpc.Option{zkgrpc.WithBase(basePath)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// dial returns a client of target through b, with the given service config
// ("" for gRPC's default, pick_first), closed at the end of the test.
func dial(t *testing.T, b resolver.Builder, target, serviceConfig string, opts ...grpc.DialOption) *grpc.ClientConn {
	t.Helper()
	opts = append([]grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithResolvers(b),
	}, opts...)
	if serviceConfig != "" {
		opts = append(opts, grpc.WithDefaultServiceConfig(serviceConfig))
	}
	cc, err := grpc.NewClient(target, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	return cc
}

// call makes one call on cc, bounded by d, and returns the name of the
// backend that answered.
func call(cc *grpc.ClientConn, d time.Duration, opts ...grpc.CallOption) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	return backend.Name(ctx, cc, opts...)
}

// reachAll calls cc until every one of names has answered, and fails the
// test if that takes longer than wait or a backend not named answers.
func reachAll(t *testing.T, cc *grpc.ClientConn, names ...string) {
	t.Helper()
	seen := map[string]int{}
	deadline := time.Now().Add(wait)
	var lastErr error
	for time.Now().Before(deadline) {
		got, err := call(cc, 5*time.Second, grpc.WaitForReady(true))
		if err != nil {
			lastErr = err
			continue
		}
		if !slices.Contains(names, got) {
			t.Fatalf("backend %s answered; want one of %v", got, names)
		}
		seen[got]++
		if len(seen) == len(names) {
			return
		}
	}
	t.Fatalf("reached %v in %v, want every one of %v (last error: %v)", seen, wait, names, lastErr)
}

// avoid calls cc until n calls in a row succeed without gone answering, then
// checks that n more do too; it fails the test if that does not happen
// within wait.
func avoid(t *testing.T, cc *grpc.ClientConn, gone string, n int) {
	t.Helper()
	deadline := time.Now().Add(wait)
	run := 0
	for run < n {
		if time.Now().After(deadline) {
			t.Fatalf("%s still answered calls after %v", gone, wait)
		}
		got, err := call(cc, 5*time.Second)
		if err != nil || got == gone {
			run = 0
			continue
		}
		run++
	}
	for i := 0; i < n; i++ {
		got, err := call(cc, 5*time.Second)
		if err != nil {
			t.Fatalf("call %d after %s left: %v", i, gone, err)
		}
		if got == gone {
			t.Fatalf("call %d after %s left: answered by %s", i, gone, gone)
		}
	}
}

// recorder is a resolver.ClientConn that records what a resolver gives
// gRPC, and passes it on to the client it wraps (none in the tests that
// call Build themselves).
type recorder struct {
	resolver.ClientConn // nil: record only

	mu      sync.Mutex
	states  []resolver.State
	errs    []error
	changed chan struct{} // closed and replaced at every record
}

func newRecorder() *recorder { return &recorder{changed: make(chan struct{})} }

func (r *recorder) UpdateState(s resolver.State) error {
	r.mu.Lock()
	r.states = append(r.states, s)
	r.kickLocked()
	inner := r.ClientConn
	r.mu.Unlock()
	if inner != nil {
		return inner.UpdateState(s)
	}
	return nil
}

func (r *recorder) ReportError(err error) {
	r.mu.Lock()
	r.errs = append(r.errs, err)
	r.kickLocked()
	inner := r.ClientConn
	r.mu.Unlock()
	if inner != nil {
		inner.ReportError(err)
	}
}

func (r *recorder) kickLocked() {
	close(r.changed)
	r.changed = make(chan struct{})
}

// counts returns how many states and errors the resolver gave so far.
func (r *recorder) counts() (states, errs int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.states), len(r.errs)
}

// last returns the last state given, and whether there was one.
func (r *recorder) last() (resolver.State, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.states) == 0 {
		return resolver.State{}, false
	}
	return r.states[len(r.states)-1], true
}

// waitState waits until the last state given satisfies cond, and returns it.
func (r *recorder) waitState(t *testing.T, what string, cond func(resolver.State) bool) resolver.State {
	t.Helper()
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		r.mu.Lock()
		ch := r.changed
		var st resolver.State
		ok := len(r.states) > 0
		if ok {
			st = r.states[len(r.states)-1]
		}
		r.mu.Unlock()
		if ok && cond(st) {
			return st
		}
		select {
		case <-ch:
		case <-timer.C:
			t.Fatalf("no state with %s within %v; last: %v", what, wait, addrs(st))
		}
	}
}

// waitErr waits until the resolver has reported an error matching cond, and
// returns it.
func (r *recorder) waitErr(t *testing.T, what string, cond func(error) bool) error {
	t.Helper()
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		r.mu.Lock()
		ch := r.changed
		for _, err := range r.errs {
			if cond(err) {
				r.mu.Unlock()
				return err
			}
		}
		errs := slices.Clone(r.errs)
		r.mu.Unlock()
		select {
		case <-ch:
		case <-timer.C:
			t.Fatalf("no error %s within %v; errors: %v", what, wait, errs)
		}
	}
}

// addrs lists a state's endpoint addresses, in order.
func addrs(st resolver.State) []string {
	var out []string
	for _, ep := range st.Endpoints {
		for _, a := range ep.Addresses {
			out = append(out, a.Addr)
		}
	}
	return out
}

// hasAddrs returns a condition on states: exactly these addresses, in any
// order.
func hasAddrs(want ...string) func(resolver.State) bool {
	return func(st resolver.State) bool {
		got := addrs(st)
		slices.Sort(got)
		w := slices.Clone(want)
		slices.Sort(w)
		return slices.Equal(got, w)
	}
}

// recBuilder is a Builder whose resolver reports to rec, which passes on to
// the client: the tests see what the client was given.
type recBuilder struct {
	*zkgrpc.Builder
	rec *recorder
}

func (b recBuilder) Build(target resolver.Target, cc resolver.ClientConn, opts resolver.BuildOptions) (resolver.Resolver, error) {
	b.rec.mu.Lock()
	b.rec.ClientConn = cc
	b.rec.mu.Unlock()
	return b.Builder.Build(target, b.rec, opts)
}

// build starts a resolver of target on b that reports to a recorder only,
// closed at the end of the test.
func build(t *testing.T, b *zkgrpc.Builder, target string) (resolver.Resolver, *recorder) {
	t.Helper()
	rec := newRecorder()
	r, err := b.Build(parseTarget(t, target), rec, resolver.BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	return r, rec
}

func parseTarget(t *testing.T, target string) resolver.Target {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	return resolver.Target{URL: *u}
}

// isErr returns a condition matching errors that wrap target.
func isErr(target error) func(error) bool {
	return func(err error) bool { return errors.Is(err, target) }
}

func target(svc string) string { return fmt.Sprintf("%s:///%s", zkgrpc.Scheme, svc) }
