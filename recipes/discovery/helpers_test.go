package discovery_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/internal/testkit/sessiontest"
	"github.com/zkrecipes/zkrecipes/recipes/cache"
	"github.com/zkrecipes/zkrecipes/recipes/discovery"
	"github.com/zkrecipes/zkrecipes/session"
)

// wait bounds every wait on something that should happen soon, generous for
// a loaded machine.
const wait = 15 * time.Second

// convergeBound bounds a cache matching the server once its connection is
// back: go-zookeeper's reconnect (about 1 s), one reload, and a wide margin.
const convergeBound = 20 * time.Second

// backBound is the bound the package documentation states: after a session
// loss a Dynamic instance is back within this long of Reconnected.
const backBound = 5 * time.Second

// base is the tests' base path (Spring's default).
const base = "/services"

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// waitFor calls w with a context bounded by wait and fails the test on error.
func waitFor(t testing.TB, what string, w func(ctx context.Context) error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if err := w(ctx); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// register registers inst under base, waits until it is there, and
// unregisters it in t.Cleanup.
func register(t testing.TB, s *session.Session, inst discovery.Instance, opts ...discovery.Option) *discovery.Registration {
	t.Helper()
	r, err := discovery.Register(s, base, inst, opts...)
	if err != nil {
		t.Fatalf("Register: %v", err)
	}
	t.Cleanup(func() { r.Close() })
	waitFor(t, "Wait", r.Wait)
	return r
}

func newCache(t testing.TB, s *session.Session, name string, opts ...discovery.Option) *discovery.Cache {
	t.Helper()
	c, err := discovery.NewCache(s, base, name, opts...)
	if err != nil {
		t.Fatalf("NewCache: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func waitInit(t testing.TB, c *discovery.Cache) {
	t.Helper()
	select {
	case <-c.Initialized():
	case <-time.After(wait):
		t.Fatalf("cache not initialized within %v", wait)
	}
}

// recorder collects a cache's events, each with its time of arrival,
// until its channel closes.
type recorder struct {
	*sessiontest.EventLog[recorded]
}

type recorded struct {
	discovery.Event
	at time.Time
}

func record(ch <-chan discovery.Event) *recorder {
	return &recorder{sessiontest.LogEvents(ch, func(ev discovery.Event) recorded { return recorded{ev, time.Now()} }, fmtEvents)}
}

func (r *recorder) waitInit(t testing.TB) []recorded {
	t.Helper()
	return r.WaitFor(t, wait, "Initialized", func(evs []recorded) bool {
		return countType(evs, cache.Initialized) > 0
	})
}

func countType(evs []recorded, typ cache.EventType) int {
	n := 0
	for _, ev := range evs {
		if ev.Type == typ {
			n++
		}
	}
	return n
}

func fmtEvents(evs []recorded) string {
	var b strings.Builder
	for _, ev := range evs {
		fmt.Fprintf(&b, "\n  %v %s/%s", ev.Type, ev.Instance.Name, ev.Instance.ID)
	}
	if b.Len() == 0 {
		return "(none)"
	}
	return b.String()
}

// serverInstances reads the instances of service name from the server
// through raw (full server path of the base): node name -> instance JSON
// as parsed. Nodes that do not parse are left out, as a cache leaves them.
func serverInstances(t testing.TB, raw *zk.Conn, fullBase, name string) map[string]discovery.Instance {
	t.Helper()
	dir := fullBase + "/" + name
	// A sync first, so the raw connection's server has what every other
	// server has.
	if _, err := raw.Sync(dir); err != nil && !errors.Is(err, zk.ErrNoNode) {
		t.Fatalf("sync %s: %v", dir, err)
	}
	kids, _, err := raw.Children(dir)
	if errors.Is(err, zk.ErrNoNode) {
		return map[string]discovery.Instance{}
	}
	if err != nil {
		t.Fatalf("children %s: %v", dir, err)
	}
	out := make(map[string]discovery.Instance, len(kids))
	for _, k := range kids {
		d, _, err := raw.Get(dir + "/" + k)
		if errors.Is(err, zk.ErrNoNode) {
			continue
		}
		if err != nil {
			t.Fatalf("get %s/%s: %v", dir, k, err)
		}
		var in discovery.Instance
		if json.Unmarshal(d, &in) == nil {
			out[k] = in
		}
	}
	return out
}

// sameInstances says how got (a cache's instances) differs from the
// server's, or "" when they match.
func sameInstances(got []discovery.Instance, server map[string]discovery.Instance) string {
	var want []discovery.Instance
	for _, in := range server {
		want = append(want, in)
	}
	key := func(in discovery.Instance) string { return in.ID + "\x00" + in.RegistrationTime.String() }
	sort.Slice(want, func(i, j int) bool { return key(want[i]) < key(want[j]) })
	g := append([]discovery.Instance(nil), got...)
	sort.Slice(g, func(i, j int) bool { return key(g[i]) < key(g[j]) })
	if len(g) != len(want) {
		return fmt.Sprintf("cache holds %d instances %v, server %d %v", len(g), idsOf(g), len(want), idsOf(want))
	}
	for i := range g {
		if !equalInstance(g[i], want[i]) {
			return fmt.Sprintf("cache holds %+v, server %+v", g[i], want[i])
		}
	}
	return ""
}

func idsOf(ins []discovery.Instance) []string {
	var out []string
	for _, in := range ins {
		out = append(out, in.ID)
	}
	sort.Strings(out)
	return out
}

// equalInstance compares instances, their times by instant and their
// payloads as JSON values.
func equalInstance(a, b discovery.Instance) bool {
	if !a.RegistrationTime.Equal(b.RegistrationTime) || !sameJSON(a.Payload, b.Payload) {
		return false
	}
	a.RegistrationTime, b.RegistrationTime = time.Time{}, time.Time{}
	a.Payload, b.Payload = nil, nil
	return reflect.DeepEqual(a, b)
}

func sameJSON(a, b json.RawMessage) bool {
	if len(a) == 0 || len(b) == 0 {
		return len(a) == len(b)
	}
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}

// exists reports whether the full server path p exists.
func exists(t testing.TB, raw *zk.Conn, p string) (*zk.Stat, bool) {
	t.Helper()
	ok, st, err := raw.Exists(p)
	if err != nil {
		t.Fatalf("exists %s: %v", p, err)
	}
	return st, ok
}

// registerBehind registers inst on s while holder, another session's
// instance of the same id with Port 1, holds its node at full (a server
// path): Wait does not return within 300 ms and the node is not written
// while holder is there (holderIs names it in a failure); once holder
// closes, Wait returns. The registration is closed in t.Cleanup.
func registerBehind(t *testing.T, raw *zk.Conn, s *session.Session, inst discovery.Instance, holder *discovery.Registration, holderIs, full string) *discovery.Registration {
	t.Helper()
	r, err := discovery.Register(s, base, inst)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	ctx, cancel := context.WithTimeout(ctxT(t), 300*time.Millisecond)
	defer cancel()
	if err := r.Wait(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait while %s holds the id: %v", holderIs, err)
	}
	d, _, _ := raw.Get(full)
	var in discovery.Instance
	if json.Unmarshal(d, &in) != nil || in.Port != 1 {
		t.Fatalf("the other session's node was written: %s", d)
	}
	holder.Close()
	waitFor(t, "Wait", r.Wait)
	return r
}
