package cache_test

import (
	"bytes"
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/internal/testkit/sessiontest"
	"github.com/zkrecipes/zkrecipes/recipes/cache"
	"github.com/zkrecipes/zkrecipes/session"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// wait bounds every wait on something that should happen promptly.
const wait = 15 * time.Second

// convergeBound is the bound the tests state for a cache to match the
// server once its connection is allowed back: go-zookeeper's reconnect
// (about 1 s), the session's Reconnected, one reload, and a wide margin for
// a busy machine.
const convergeBound = 20 * time.Second

// longSession is the timeout of a session that a test keeps away from the
// server for a while without losing it.
var longSession = session.WithSessionTimeout(10 * time.Second)

func newNode(t testing.TB, s *session.Session, p string, opts ...cache.Option) *cache.NodeCache {
	t.Helper()
	c, err := cache.NewNode(s, p, opts...)
	if err != nil {
		t.Fatalf("NewNode: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func newChildren(t testing.TB, s *session.Session, p string, opts ...cache.Option) *cache.ChildrenCache {
	t.Helper()
	c, err := cache.NewChildren(s, p, opts...)
	if err != nil {
		t.Fatalf("NewChildren: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// recorder collects a cache's events until its channel closes.
type recorder struct {
	*sessiontest.EventLog[cache.Event]
}

func record(ch <-chan cache.Event) *recorder {
	return &recorder{sessiontest.LogEvents(ch, func(ev cache.Event) cache.Event { return ev }, fmtEvents)}
}

// waitClosed waits for the events channel to be closed.
func (r *recorder) waitClosed(t testing.TB, d time.Duration) {
	t.Helper()
	select {
	case <-r.Closed():
	case <-time.After(d):
		t.Fatalf("Events not closed within %v", d)
	}
}

// waitInit waits for an Initialized event.
func (r *recorder) waitInit(t testing.TB) []cache.Event {
	t.Helper()
	return r.WaitFor(t, wait, "Initialized", func(evs []cache.Event) bool {
		return countType(evs, cache.Initialized) > 0
	})
}

func countType(evs []cache.Event, typ cache.EventType) int {
	n := 0
	for _, ev := range evs {
		if ev.Type == typ {
			n++
		}
	}
	return n
}

func fmtEvents(evs []cache.Event) string {
	var b strings.Builder
	b.WriteString("[")
	for i, ev := range evs {
		if i > 0 {
			b.WriteString(" ")
		}
		fmt.Fprintf(&b, "%v(%s=%q c%d m%d)", ev.Type, ev.Node.Path, ev.Node.Data, ev.Node.Stat.Czxid, ev.Node.Stat.Mzxid)
	}
	b.WriteString("]")
	return b.String()
}

// replay applies evs to an empty copy, checking that each event follows
// from the copy: Added for a node it does not hold, Updated and Removed for
// one it holds, an Updated of the same incarnation (Czxid) with a later
// write (Mzxid), an Added of a later incarnation than the last Removed, a
// Removed that names the node as the copy holds it; Initialized exactly
// once. It returns the copy by path.
func replay(evs []cache.Event) (map[string]cache.Node, error) {
	cp := map[string]cache.Node{}
	lastCzxid := map[string]int64{}
	inits := 0
	for i, ev := range evs {
		n := ev.Node
		old, had := cp[n.Path]
		switch ev.Type {
		case cache.Initialized:
			inits++
			continue
		case cache.Added:
			if had {
				return nil, fmt.Errorf("event %d: Added %s, held already", i, n.Path)
			}
			if n.Stat.Czxid <= lastCzxid[n.Path] {
				return nil, fmt.Errorf("event %d: Added %s of czxid %d, not after %d", i, n.Path, n.Stat.Czxid, lastCzxid[n.Path])
			}
			cp[n.Path] = n
		case cache.Updated:
			if !had {
				return nil, fmt.Errorf("event %d: Updated %s, not held", i, n.Path)
			}
			if n.Stat.Czxid != old.Stat.Czxid || n.Stat.Mzxid <= old.Stat.Mzxid {
				return nil, fmt.Errorf("event %d: Updated %s c%d m%d after c%d m%d", i, n.Path, n.Stat.Czxid, n.Stat.Mzxid, old.Stat.Czxid, old.Stat.Mzxid)
			}
			cp[n.Path] = n
		case cache.Removed:
			if !had || old.Stat != n.Stat || !bytes.Equal(old.Data, n.Data) {
				return nil, fmt.Errorf("event %d: Removed %s (held %v) is not the node held", i, n.Path, had)
			}
			delete(cp, n.Path)
			lastCzxid[n.Path] = n.Stat.Czxid
		default:
			return nil, fmt.Errorf("event %d: type %v", i, ev.Type)
		}
	}
	if inits != 1 {
		return nil, fmt.Errorf("%d Initialized events, want 1", inits)
	}
	return cp, nil
}

// rawNode is a node as a raw read on the server sees it.
type rawNode struct {
	data         []byte
	czxid, mzxid int64
}

// rawChildren reads the children of full (a server path) with their data;
// keys are the cache's paths: p (the cache's path) + "/" + name.
func rawChildren(t testing.TB, c *zk.Conn, full, p string) map[string]rawNode {
	t.Helper()
	out := map[string]rawNode{}
	names, _, err := c.Children(full)
	if errors.Is(err, zk.ErrNoNode) {
		return out
	}
	if err != nil {
		t.Fatalf("raw children %s: %v", full, err)
	}
	for _, name := range names {
		data, st, err := c.Get(full + "/" + name)
		if errors.Is(err, zk.ErrNoNode) {
			continue
		}
		if err != nil {
			t.Fatalf("raw get: %v", err)
		}
		out[p+"/"+name] = rawNode{data, st.Czxid, st.Mzxid}
	}
	return out
}

// rawOne reads one node: keyed by p, or empty if it does not exist.
func rawOne(t testing.TB, c *zk.Conn, full, p string) map[string]rawNode {
	t.Helper()
	data, st, err := c.Get(full)
	if errors.Is(err, zk.ErrNoNode) {
		return map[string]rawNode{}
	}
	if err != nil {
		t.Fatalf("raw get %s: %v", full, err)
	}
	return map[string]rawNode{p: {data, st.Czxid, st.Mzxid}}
}

// sameAs says how the cached nodes differ from the raw ones ("" if not).
func sameAs(cached []cache.Node, raw map[string]rawNode) string {
	var diffs []string
	seen := map[string]bool{}
	for _, n := range cached {
		seen[n.Path] = true
		r, ok := raw[n.Path]
		switch {
		case !ok:
			diffs = append(diffs, n.Path+": cached, not on the server")
		case !bytes.Equal(r.data, n.Data) || r.czxid != n.Stat.Czxid || r.mzxid != n.Stat.Mzxid:
			diffs = append(diffs, fmt.Sprintf("%s: cached %q c%d m%d, server %q c%d m%d", n.Path, n.Data, n.Stat.Czxid, n.Stat.Mzxid, r.data, r.czxid, r.mzxid))
		}
	}
	for p := range raw {
		if !seen[p] {
			diffs = append(diffs, p+": on the server, not cached")
		}
	}
	sort.Strings(diffs)
	return strings.Join(diffs, "; ")
}

// nodesOf returns a replayed copy as a list.
func nodesOf(cp map[string]cache.Node) []cache.Node {
	out := make([]cache.Node, 0, len(cp))
	for _, n := range cp {
		out = append(out, n)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}

// nodeList is a NodeCache's Get as a list of 0 or 1 nodes.
func nodeList(c *cache.NodeCache) []cache.Node {
	if n, ok := c.Get(); ok {
		return []cache.Node{n}
	}
	return nil
}

// mustCreate creates a persistent node on the raw connection.
func mustCreate(t testing.TB, c *zk.Conn, p string, data string) *zk.Stat {
	t.Helper()
	if _, err := c.Create(p, []byte(data), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatalf("create %s: %v", p, err)
	}
	_, st, err := c.Get(p)
	if err != nil {
		t.Fatalf("get %s: %v", p, err)
	}
	return st
}

func mustSet(t testing.TB, c *zk.Conn, p string, data string) *zk.Stat {
	t.Helper()
	st, err := c.Set(p, []byte(data), -1)
	if err != nil {
		t.Fatalf("set %s: %v", p, err)
	}
	return st
}

func mustDelete(t testing.TB, c *zk.Conn, p string) {
	t.Helper()
	if err := c.Delete(p, -1); err != nil {
		t.Fatalf("delete %s: %v", p, err)
	}
}

// zktestNS is a namespace with its raw connection.
func zktestNS(t testing.TB) (*zktest.Namespace, *zk.Conn) {
	ns := zktest.NewNamespace(t)
	return ns, ns.Conn(t)
}

func newTree(t testing.TB, s *session.Session, p string, opts ...cache.Option) *cache.TreeCache {
	t.Helper()
	c, err := cache.NewTree(s, p, opts...)
	if err != nil {
		t.Fatalf("NewTree: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// rawTree reads the subtree at full (a server path) down to maxDepth
// levels below it (-1: no bound), keyed by the cache's paths (p for the
// root). A node deleted while it is read is left out.
func rawTree(t testing.TB, c *zk.Conn, full, p string, maxDepth int) map[string]rawNode {
	t.Helper()
	out := map[string]rawNode{}
	var walk func(full, p string, depth int)
	walk = func(full, p string, depth int) {
		data, st, err := c.Get(full)
		if errors.Is(err, zk.ErrNoNode) {
			return
		}
		if err != nil {
			t.Fatalf("raw get %s: %v", full, err)
		}
		out[p] = rawNode{data, st.Czxid, st.Mzxid}
		if depth == maxDepth {
			return
		}
		names, _, err := c.Children(full)
		if errors.Is(err, zk.ErrNoNode) {
			delete(out, p) // gone between the two reads
			return
		}
		if err != nil {
			t.Fatalf("raw children %s: %v", full, err)
		}
		for _, name := range names {
			walk(full+"/"+name, p+"/"+name, depth+1)
		}
	}
	walk(full, p, 0)
	return out
}

// cachedTree lists the tree cache's copy below p (p included), walking it
// with Get and Children.
func cachedTree(c *cache.TreeCache, p string) []cache.Node {
	n, ok := c.Get(p)
	if !ok {
		return nil
	}
	out := []cache.Node{n}
	kids, _ := c.Children(p)
	for _, k := range kids {
		out = append(out, cachedTree(c, k.Path)...)
	}
	return out
}

// fault is one fault a cache must converge through: do causes it on the
// session s (behind the proxy p) and returns once rec has seen it; want is
// the state the fault must cause; opts are the session's options.
type fault struct {
	name string
	want session.State
	opts []session.Option
	do   func(t *testing.T, s *session.Session, p *zktest.Proxy, tap *zktest.Tap, rec *sessiontest.Recorder, ns *zktest.Namespace)
}

// convergeFaults are the faults of the convergence tests.
var convergeFaults = []fault{
	{"cut", session.Suspended, []session.Option{longSession},
		func(t *testing.T, s *session.Session, p *zktest.Proxy, tap *zktest.Tap, rec *sessiontest.Recorder, ns *zktest.Namespace) {
			p.Cut()
			rec.Wait(t, wait, session.Suspended)
		}},
	{"partition shorter than the timeout", session.Suspended, []session.Option{session.WithSessionTimeout(6 * time.Second)},
		func(t *testing.T, s *session.Session, p *zktest.Proxy, tap *zktest.Tap, rec *sessiontest.Recorder, ns *zktest.Namespace) {
			p.Partition()
			rec.Wait(t, wait, session.Suspended)
			p.Heal()
		}},
	{"partition past the timeout", session.Lost, nil,
		func(t *testing.T, s *session.Session, p *zktest.Proxy, tap *zktest.Tap, rec *sessiontest.Recorder, ns *zktest.Namespace) {
			p.Partition()
			rec.Wait(t, wait, session.Lost)
			p.Heal()
		}},
	{"expiry", session.Lost, []session.Option{longSession},
		func(t *testing.T, s *session.Session, p *zktest.Proxy, tap *zktest.Tap, rec *sessiontest.Recorder, ns *zktest.Namespace) {
			sessiontest.Expire(t, s, tap, ns.Servers()...)
			p.Cut()
			rec.Wait(t, wait, session.Lost)
		}},
}

// faultsNamed returns the convergeFaults of the given names, in order.
func faultsNamed(names ...string) []fault {
	var out []fault
	for _, name := range names {
		for _, f := range convergeFaults {
			if f.name == name {
				out = append(out, f)
			}
		}
	}
	if len(out) != len(names) {
		panic(fmt.Sprintf("faultsNamed(%q): %d found", names, len(out)))
	}
	return out
}

// writer calls step (with a running count n) on its own goroutine until
// halt: each call makes one random change on the server through a raw
// connection and returns an error other than the races the writer expects
// (a node that is, or is not, there), which ends the writer. It counts its
// steps.
type writer struct {
	stop chan struct{}
	done chan error
	ops  int
}

func startWriter(step func(n int) error) *writer {
	w := &writer{stop: make(chan struct{}), done: make(chan error, 1)}
	go func() {
		var err error
		defer func() { w.done <- err }()
		for n := 0; ; n++ {
			select {
			case <-w.stop:
				return
			default:
			}
			if err = step(n); err != nil {
				return
			}
			w.ops++
		}
	}()
	return w
}

// halt stops the writer, fails the test on its error and returns its step
// count.
func (w *writer) halt(t *testing.T) int {
	t.Helper()
	close(w.stop)
	if err := sessiontest.Recv(t, w.done, wait, "the writer's end"); err != nil {
		t.Fatalf("writer: %v", err)
	}
	return w.ops
}

// faultRun is what convergeThrough saw: the session, its states, the
// writer's step count and how long after the writer's stop the caches
// matched the server.
type faultRun struct {
	s    *session.Session
	rec  *sessiontest.Recorder
	ops  int
	took time.Duration
}

// convergeThrough connects a session behind a proxy with f's options and
// calls start on it, which starts caches and a writer and returns the
// writer, follow (which waits until the caches follow the writer) and
// match (whether the caches match the server). It waits for follow before
// f and again after the reconnect that follows f, stops the writer, waits
// convergeBound for match, and checks that f caused f.want.
func convergeThrough(t *testing.T, ns *zktest.Namespace, f fault, start func(s *session.Session) (w *writer, follow func(when string), match func() bool)) faultRun {
	t.Helper()
	s, proxy, tap := sessiontest.ConnectProxyTap(t, ns, f.opts...)
	rec := sessiontest.Record(t, s)
	w, follow, match := start(s)
	follow("before the fault")
	f.do(t, s, proxy, tap, rec, ns)
	rec.Wait(t, wait, session.Reconnected)
	follow("after the reconnect")
	run := faultRun{s: s, rec: rec, ops: w.halt(t)}
	stopped := time.Now()
	zktest.Eventually(t, convergeBound, func() bool {
		if !match() {
			return false
		}
		run.took = time.Since(stopped)
		return true
	}, "the caches to match the server")
	states := rec.States()
	seen := false
	for _, st := range states {
		seen = seen || st == f.want
	}
	if !seen {
		t.Fatalf("states %v: the fault did not cause %v", states, f.want)
	}
	return run
}

// changeWhileAway connects a session behind a proxy and lets start begin a
// cache on it (start returns the cache's recorder). Once the cache is
// initialized it keeps the session from the server (expired there first if
// newSession) while change writes on the server through a raw connection,
// then lets it back and waits for Reconnected, checking that the session
// ID changed exactly when newSession. It returns the recorder and the
// number of events it held before the change.
func changeWhileAway(t *testing.T, ns *zktest.Namespace, newSession bool, start func(s *session.Session) *recorder, change func()) (*recorder, int) {
	t.Helper()
	s, proxy, tap := sessiontest.ConnectProxyTap(t, ns, longSession)
	rec := sessiontest.Record(t, s)
	r := start(s)
	mark := len(r.waitInit(t))
	sid := s.SessionID()
	proxy.Refuse(true)
	proxy.Cut()
	rec.Wait(t, wait, session.Suspended)
	if newSession {
		sessiontest.Expire(t, s, tap, ns.Servers()...)
	}
	change()
	proxy.Refuse(false)
	if newSession {
		rec.Wait(t, wait, session.Lost)
	}
	rec.Wait(t, wait, session.Reconnected)
	if got := s.SessionID() != sid; got != newSession {
		t.Fatalf("new session id after the reconnect: %v, want %v", got, newSession)
	}
	return r, mark
}

// upToSentinel waits (convergeBound) until the events since mark hold the
// change's last event (last), then creates a sentinel node at full (p in
// the cache) and waits for its Added; it returns the events so far.
func upToSentinel(t *testing.T, raw *zk.Conn, r *recorder, mark int, last func([]cache.Event) bool, full, p string) []cache.Event {
	t.Helper()
	r.WaitFor(t, convergeBound, "the changes", func(evs []cache.Event) bool { return last(evs[mark:]) })
	mustCreate(t, raw, full, "sentinel")
	return r.WaitFor(t, wait, "the sentinel", func(evs []cache.Event) bool { return hasData(evs[mark:], p, "sentinel") })
}
