package discovery_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/zkrecipes/zkrecipes/internal/testkit/sessiontest"
	"github.com/zkrecipes/zkrecipes/recipes/cache"
	"github.com/zkrecipes/zkrecipes/recipes/discovery"
	"github.com/zkrecipes/zkrecipes/session"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// instanceJSON is the JSON of a small instance, written raw by the tests.
func instanceJSON(t testing.TB, name, id string, port int) []byte {
	t.Helper()
	b, err := json.Marshal(discovery.Instance{Name: name, ID: id, Address: "127.0.0.1", Port: port,
		RegistrationTime: time.UnixMilli(1700000000000)})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func mustCreate(t testing.TB, raw *zk.Conn, p string, data []byte) {
	t.Helper()
	if _, err := raw.Create(p, data, 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatalf("create %s: %v", p, err)
	}
}

func mustSet(t testing.TB, raw *zk.Conn, p string, data []byte) {
	t.Helper()
	if _, err := raw.Set(p, data, -1); err != nil {
		t.Fatalf("set %s: %v", p, err)
	}
}

// TestCacheSkipsBadData: a child whose data is not an instance is left out
// of the copy and logged; when it becomes one it is Added, and when an
// instance's data stops being one it is Removed. The query leaves it out
// too.
func TestCacheSkipsBadData(t *testing.T) {
	ns := zktest.NewNamespace(t)
	raw := ns.Conn(t)
	dir := ns.Path("services/svc")
	mustCreate(t, raw, ns.Path("services"), nil)
	mustCreate(t, raw, dir, nil)
	mustCreate(t, raw, dir+"/good", instanceJSON(t, "svc", "good", 1))
	mustCreate(t, raw, dir+"/garbage", []byte("not json"))
	mustCreate(t, raw, dir+"/array", []byte("[1]"))
	s := sessiontest.Connect(t, ns)
	core, logs := observer.New(zapcore.WarnLevel)
	c := newCache(t, s, "svc", discovery.WithLogger(zap.New(core)))
	rec := record(c.Events())
	evs := rec.waitInit(t)
	if countType(evs, cache.Added) != 1 || len(c.Instances()) != 1 || c.Instances()[0].ID != "good" {
		t.Fatalf("first load: %s; instances %v", fmtEvents(evs), idsOf(c.Instances()))
	}
	if n := logs.FilterMessageSnippet("not an instance").Len(); n != 2 {
		t.Fatalf("%d warnings about the two bad nodes, want 2: %v", n, logs.All())
	}
	list, err := discovery.Instances(ctxT(t), s, base, "svc")
	if err != nil || len(list) != 1 {
		t.Fatalf("Instances: %v %v", idsOf(list), err)
	}
	mustSet(t, raw, dir+"/garbage", instanceJSON(t, "svc", "fixed", 2))
	rec.WaitFor(t, wait, "Added", func(evs []recorded) bool { return countType(evs, cache.Added) == 2 })
	mustSet(t, raw, dir+"/good", []byte("{broken"))
	evs = rec.WaitFor(t, wait, "Removed", func(evs []recorded) bool { return countType(evs, cache.Removed) == 1 })
	if last := evs[len(evs)-1]; last.Instance.ID != "good" {
		t.Fatalf("Removed %q, want good", last.Instance.ID)
	}
	if got := idsOf(c.Instances()); len(got) != 1 || got[0] != "fixed" {
		t.Fatalf("instances %v, want [fixed]", got)
	}
}

// TestCacheEventsOff: with WithEvents(false) the cache delivers nothing and
// its channel closes at Close; Instances still follows the server.
func TestCacheEventsOff(t *testing.T) {
	ns := zktest.NewNamespace(t)
	s := sessiontest.Connect(t, ns)
	c := newCache(t, s, "svc", discovery.WithEvents(false))
	register(t, s, discovery.Instance{Name: "svc", ID: "a"})
	zktest.Eventually(t, wait, func() bool { return len(c.Instances()) == 1 }, "the instance cached")
	c.Close()
	if _, ok := <-c.Events(); ok {
		t.Fatal("an event delivered with WithEvents(false)")
	}
	if len(c.Instances()) != 1 {
		t.Fatal("Instances after Close lost the copy")
	}
}

// TestCacheCloseWhileLoading: Close while the session cannot reach the
// server returns promptly, closes Events, and Initialized stays open.
func TestCacheCloseWhileLoading(t *testing.T) {
	ns := zktest.NewNamespace(t)
	s, p := sessiontest.ConnectProxy(t, ns, session.WithSessionTimeout(10*time.Second))
	p.Partition()
	c, err := discovery.NewCache(s, base, "svc")
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	c.Close()
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("Close took %v", d)
	}
	if _, ok := <-c.Events(); ok {
		t.Fatal("an event after Close")
	}
	select {
	case <-c.Initialized():
		t.Fatal("Initialized closed by Close")
	default:
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	p.Heal()
}

// churn creates, rewrites and deletes instance nodes of service svc (and
// writes a node that is no instance now and then) on raw until stopped.
type churn struct {
	stop chan struct{}
	done chan error
}

func startChurn(raw *zk.Conn, dir string, seed int64) *churn {
	c := &churn{stop: make(chan struct{}), done: make(chan error, 1)}
	rng := rand.New(rand.NewSource(seed))
	go func() {
		var err error
		defer func() { c.done <- err }()
		for n := 0; ; n++ {
			select {
			case <-c.stop:
				return
			case <-time.After(time.Duration(rng.Intn(5)) * time.Millisecond):
			}
			id := fmt.Sprintf("i%d", rng.Intn(12))
			p := dir + "/" + id
			data, _ := json.Marshal(discovery.Instance{Name: "svc", ID: id, Port: 1 + n%60000, RegistrationTime: time.UnixMilli(int64(1 + n))})
			if rng.Intn(10) == 0 {
				data = []byte("garbage")
			}
			var e error
			switch op := rng.Intn(10); {
			case op < 5:
				_, e = raw.Set(p, data, -1)
				if errors.Is(e, zk.ErrNoNode) {
					_, e = raw.Create(p, data, 0, zk.WorldACL(zk.PermAll))
				}
			case op < 8:
				e = raw.Delete(p, -1)
			default:
				if e = raw.Delete(p, -1); e == nil || errors.Is(e, zk.ErrNoNode) {
					_, e = raw.Create(p, data, 0, zk.WorldACL(zk.PermAll))
				}
			}
			if e != nil && !errors.Is(e, zk.ErrNoNode) && !errors.Is(e, zk.ErrNodeExists) {
				err = e
				return
			}
		}
	}()
	return c
}

func (c *churn) halt(t testing.TB) {
	t.Helper()
	close(c.stop)
	if err := <-c.done; err != nil {
		t.Fatalf("churn: %v", err)
	}
}

// replayInstances replays events from an empty copy, keyed by instance id
// (unique in the churn), and fails on an event that does not fit the copy:
// Added of what it holds, Updated or Removed of what it does not.
func replayInstances(t testing.TB, evs []recorded) map[string]discovery.Instance {
	t.Helper()
	cp := map[string]discovery.Instance{}
	for i, ev := range evs {
		_, had := cp[ev.Instance.ID]
		switch ev.Type {
		case cache.Added:
			if had {
				t.Fatalf("event %d: Added %s, already held", i, ev.Instance.ID)
			}
			cp[ev.Instance.ID] = ev.Instance
		case cache.Updated:
			if !had {
				t.Fatalf("event %d: Updated %s, not held", i, ev.Instance.ID)
			}
			cp[ev.Instance.ID] = ev.Instance
		case cache.Removed:
			if !had {
				t.Fatalf("event %d: Removed %s, not held", i, ev.Instance.ID)
			}
			delete(cp, ev.Instance.ID)
		}
	}
	return cp
}

// TestCachesConverge: caches on sessions that are cut, partitioned until
// suspended (which the session may or may not survive), and expired, while another client churns the
// service's instances, each match the server's children (after a sync)
// once the fault is over; and each cache's events, replayed from nothing,
// give its copy.
func TestCachesConverge(t *testing.T) {
	ns := zktest.NewNamespace(t)
	raw := ns.Conn(t)
	dir := ns.Path("services/svc")
	mustCreate(t, raw, ns.Path("services"), nil)
	mustCreate(t, raw, dir, nil)
	type watcher struct {
		s   *session.Session
		p   *zktest.Proxy
		tap *zktest.Tap
		c   *discovery.Cache
		rec *recorder
	}
	var ws []*watcher
	for i := 0; i < 3; i++ {
		s, p, tap := sessiontest.ConnectProxyTap(t, ns)
		c := newCache(t, s, "svc")
		w := &watcher{s: s, p: p, tap: tap, c: c, rec: record(c.Events())}
		w.rec.waitInit(t)
		ws = append(ws, w)
	}
	check := func(round string) {
		t.Helper()
		server := serverInstances(t, raw, ns.Path("services"), "svc")
		for i, w := range ws {
			zktest.Eventually(t, convergeBound, func() bool { return sameInstances(w.c.Instances(), server) == "" },
				"%s: cache %d matches the server: %s", round, i, sameInstances(w.c.Instances(), server))
			evs := w.rec.Events()
			var got []discovery.Instance
			for _, in := range replayInstances(t, evs) {
				got = append(got, in)
			}
			if d := sameInstances(got, server); d != "" {
				t.Fatalf("%s: cache %d's events replayed: %s", round, i, d)
			}
		}
	}
	// Each fault hits every watcher at once, from the test's goroutine.
	recs := func() []*sessiontest.Recorder {
		var out []*sessiontest.Recorder
		for _, w := range ws {
			out = append(out, sessiontest.Record(t, w.s))
		}
		return out
	}
	waitAll := func(rs []*sessiontest.Recorder, st session.State) {
		for _, r := range rs {
			r.Wait(t, wait, st)
		}
	}
	faults := []struct {
		name string
		do   func()
	}{
		{"cut", func() {
			rs := recs()
			for _, w := range ws {
				w.p.Cut()
			}
			waitAll(rs, session.Reconnected)
		}},
		{"partition", func() {
			rs := recs()
			for _, w := range ws {
				w.p.Partition()
			}
			waitAll(rs, session.Suspended)
			for _, w := range ws {
				w.p.Heal()
			}
			waitAll(rs, session.Reconnected)
		}},
		{"expiry", func() {
			rs := recs()
			for _, w := range ws {
				sessiontest.Expire(t, w.s, w.tap, ns.Servers()...)
				w.p.Cut()
			}
			waitAll(rs, session.Lost)
			waitAll(rs, session.Reconnected)
		}},
	}
	for round, f := range faults {
		ch := startChurn(raw, dir, int64(round))
		f.do()
		ch.halt(t)
		check(f.name)
	}
}
