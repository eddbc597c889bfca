package engine_test

import (
	"context"
	"errors"
	"fmt"
	"path"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/internal/engine"
	"github.com/zkrecipes/zkrecipes/internal/testkit/sessiontest"
	"github.com/zkrecipes/zkrecipes/recipes"
	"github.com/zkrecipes/zkrecipes/session"
	"github.com/zkrecipes/zkrecipes/zktest"
)

const dir = "/r/dir"

var lockDriver = engine.Standard("lock-", 1)

const wait = 15 * time.Second

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func newInternals(t testing.TB, s *session.Session, opts ...engine.Option) *engine.Engine {
	t.Helper()
	in, err := engine.New(s, dir, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { in.Close() })
	return in
}

func children(t testing.TB, c *zk.Conn, ns *zktest.Namespace) []string {
	t.Helper()
	k, _, err := c.Children(ns.Path(dir))
	if errors.Is(err, zk.ErrNoNode) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(k)
	return k
}

func waitChildren(t testing.TB, c *zk.Conn, ns *zktest.Namespace, n int) {
	t.Helper()
	zktest.Eventually(t, wait, func() bool { return len(children(t, c, ns)) == n }, "want %d children", n)
}

// TestTokenIsCzxid: whether the token comes from the pipelined read (no child
// changed after our create) or from a read of our node (contention), it is
// the node's czxid; and leases see Context cause == Err.
func TestTokenIsCzxid(t *testing.T) {
	ns := zktest.NewNamespace(t)
	raw := ns.Conn(t)
	ctx := ctxT(t)
	const workers, cycles = 4, 15
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for i := 0; i < workers; i++ {
		in := newInternals(t, sessiontest.Connect(t, ns), engine.WithNodeWatch(i%2 == 0))
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- func() error {
				for j := 0; j < cycles; j++ {
					l, err := in.Acquire(ctx, lockDriver, []byte("x"))
					if err != nil {
						return err
					}
					_, st, err := raw.Get(l.Path())
					if err != nil {
						return err
					}
					if st.Czxid != l.Token() {
						return fmt.Errorf("token %d, czxid %d", l.Token(), st.Czxid)
					}
					if err := l.Release(ctx); err != nil {
						return err
					}
					if context.Cause(l.Context()) != l.Err() || !errors.Is(l.Err(), recipes.ErrReleased) {
						return fmt.Errorf("cause %v, Err %v", context.Cause(l.Context()), l.Err())
					}
				}
				return nil
			}()
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}

// TestSemaphoreDriver: the engine with MaxLeases 3 lets three hold at once,
// the fourth waits for the first: a release of another holder fires no watch
// and does not wake it.
func TestSemaphoreDriver(t *testing.T) {
	// A server of its own: the test reads the server-wide watch counters.
	ns := zktest.NewNamespaceOn(t, zktest.StartServerT(t))
	ctx := ctxT(t)
	// Without the node watch, the fourth's watch on the node it waits for is
	// the only watch on the server.
	in := newInternals(t, sessiontest.Connect(t, ns), engine.WithNodeWatch(false))
	waiter := newInternals(t, sessiontest.Connect(t, ns), engine.WithNodeWatch(false))
	d := engine.Standard("lease-", 3)
	var ls []*engine.Lease
	for i := 0; i < 3; i++ {
		l, err := in.TryAcquire(ctx, d, []byte(fmt.Sprint(i)))
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
	}
	if _, err := in.TryAcquire(ctx, d, nil); !errors.Is(err, recipes.ErrBusy) {
		t.Fatalf("fourth TryAcquire = %v", err)
	}
	ps, err := in.Participants(ctx, d)
	if err != nil || len(ps) != 3 {
		t.Fatalf("Participants = %+v, %v", ps, err)
	}
	for i, p := range ps {
		if p.ID != fmt.Sprint(i) || p.Node != ls[i].Node() || p.Token != ls[i].Token() || !p.Holds || p.Kind != "lease" {
			t.Fatalf("participant %d = %+v", i, p)
		}
	}
	type result struct {
		l   *engine.Lease
		err error
	}
	done := make(chan result, 1)
	go func() {
		l, err := waiter.Acquire(ctx, d, nil)
		done <- result{l, err}
	}()
	raw := ns.Conn(t)
	waitChildren(t, raw, ns, 4)
	// The fourth is parked once its watch is set.
	zktest.Eventually(t, wait, func() bool { return mntrInt(t, ns, "zk_watch_count") == 1 }, "the fourth does not watch")
	before := notifications(t, ns)
	if err := ls[1].Release(ctx); err != nil {
		t.Fatal(err)
	}
	// The server fires a delete's watches before it answers the delete: had
	// the fourth watched the second's node (or the directory), it would have
	// been notified by now.
	if n := notifications(t, ns) - before; n != 0 {
		t.Fatalf("releasing the second fired %d watch notifications, want none (the fourth watches the first)", n)
	}
	if n := mntrInt(t, ns, "zk_watch_count"); n != 1 {
		t.Fatalf("watches after the second released: %d, want the fourth's one", n)
	}
	select {
	case r := <-done:
		t.Fatalf("the fourth returned after the second released: %v, %v", r.l, r.err)
	default:
	}
	if err := ls[0].Release(ctx); err != nil {
		t.Fatal(err)
	}
	var r result
	select {
	case r = <-done:
	case <-time.After(wait):
		t.Fatal("the fourth did not acquire after the first released")
	}
	if r.err != nil {
		t.Fatal(r.err)
	}
	if n := notifications(t, ns) - before; n != 1 {
		t.Fatalf("releasing the first fired %d watch notifications in all, want 1", n)
	}
	for _, x := range []*engine.Lease{r.l, ls[2]} {
		if err := x.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	waitChildren(t, raw, ns, 0)
}

// mntrInt reads an integer from the mntr output of ns's server.
func mntrInt(t testing.TB, ns *zktest.Namespace, key string) int {
	t.Helper()
	m, err := zktest.Mntr(ctxT(t), ns.Server.Addr())
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(m[key])
	if err != nil {
		t.Fatalf("mntr %s = %q: %v", key, m[key], err)
	}
	return n
}

// notifications returns how many watch notifications ns's server has sent.
func notifications(t testing.TB, ns *zktest.Namespace) int64 {
	t.Helper()
	n, err := zktest.WatchNotifications(ctxT(t), ns.Server.Addr())
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestWaitingNodeDeleted: a third party deletes our node while we wait: the
// acquire fails with ErrNodeDeleted (with the node watch at once, without it
// when the predecessor goes).
func TestWaitingNodeDeleted(t *testing.T) {
	for _, watch := range []bool{true, false} {
		t.Run(fmt.Sprintf("nodewatch=%v", watch), func(t *testing.T) {
			ns := zktest.NewNamespace(t)
			raw := ns.Conn(t)
			ctx := ctxT(t)
			holder := newInternals(t, sessiontest.Connect(t, ns))
			waiter := newInternals(t, sessiontest.Connect(t, ns), engine.WithNodeWatch(watch))
			hl, err := holder.Acquire(ctx, lockDriver, nil)
			if err != nil {
				t.Fatal(err)
			}
			res := make(chan error, 1)
			go func() {
				l, err := waiter.Acquire(ctx, lockDriver, nil)
				if err == nil {
					l.Release(ctx)
				}
				res <- err
			}()
			waitChildren(t, raw, ns, 2)
			ks := children(t, raw, ns)
			for _, k := range ks {
				if k != hl.Node() {
					if err := raw.Delete(ns.Path(dir)+"/"+k, -1); err != nil {
						t.Fatal(err)
					}
				}
			}
			if !watch {
				hl.Release(ctx)
			}
			select {
			case err := <-res:
				if !errors.Is(err, recipes.ErrNodeDeleted) {
					t.Fatalf("Acquire = %v, want ErrNodeDeleted", err)
				}
			case <-time.After(wait):
				t.Fatal("waiter did not notice")
			}
			hl.Release(ctx)
		})
	}
}

// TestSessionLostWhileWaiting: the waiter's session is expired: its acquire
// fails with session.ErrLost and is not carried over to the new session.
func TestSessionLostWhileWaiting(t *testing.T) {
	ns := zktest.NewNamespace(t)
	raw := ns.Conn(t)
	ctx := ctxT(t)
	holder := newInternals(t, sessiontest.Connect(t, ns))
	ws, p := sessiontest.ConnectProxy(t, ns)
	waiter := newInternals(t, ws)
	hl, err := holder.Acquire(ctx, lockDriver, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer hl.Release(ctx)
	res := make(chan error, 1)
	go func() {
		l, err := waiter.Acquire(ctx, lockDriver, nil)
		if err == nil {
			l.Release(ctx)
		}
		res <- err
	}()
	waitChildren(t, raw, ns, 2)
	p.Partition()
	defer p.Heal()
	select {
	case err := <-res:
		if !errors.Is(err, session.ErrLost) {
			t.Fatalf("Acquire = %v, want session.ErrLost", err)
		}
	case <-time.After(wait):
		t.Fatal("waiter did not fail")
	}
	waitChildren(t, raw, ns, 1)
}

var errDecide = errors.New("decide failed")

// driverErr fails every decision.
var driverErr = &engine.Driver{Marker: "lock-", Markers: []string{"lock-"}, Monotone: true,
	Decide: func([]engine.Child, int) (bool, string, error) { return false, "", errDecide }}

// TestDriverErrorCleansUp: a Decide error ends the acquire and deletes the
// node; bad drivers are refused before any I/O.
func TestDriverErrorCleansUp(t *testing.T) {
	ns := zktest.NewNamespace(t)
	raw := ns.Conn(t)
	ctx := ctxT(t)
	in := newInternals(t, sessiontest.Connect(t, ns))
	if _, err := in.Acquire(ctx, driverErr, nil); !errors.Is(err, errDecide) {
		t.Fatalf("Acquire = %v", err)
	}
	if ks := children(t, raw, ns); len(ks) != 0 {
		t.Fatalf("nodes left: %q", ks)
	}
	// Bad drivers are refused before any request: count them at a proxy.
	ps, p := sessiontest.ConnectProxy(t, ns)
	pin := newInternals(t, ps)
	var requests atomic.Int32
	p.OnRequest(func(r zktest.Request) zktest.Action {
		if r.Op != zktest.OpPing {
			requests.Add(1)
		}
		return zktest.Forward
	})
	for _, d := range []*engine.Driver{nil, {}, engine.Standard("", 1), engine.Standard("a/b", 1),
		engine.Standard("lock-", -1), engine.Standard("lock-", 0)} {
		if _, err := pin.Acquire(ctx, d, nil); !errors.Is(err, engine.ErrBadDriver) {
			t.Fatalf("Acquire(%v) = %v", d, err)
		}
		if _, err := pin.TryAcquire(ctx, d, nil); !errors.Is(err, engine.ErrBadDriver) {
			t.Fatalf("TryAcquire(%v) = %v", d, err)
		}
		if _, err := pin.Participants(ctx, d); !errors.Is(err, engine.ErrBadDriver) {
			t.Fatalf("Participants(%v) = %v", d, err)
		}
	}
	if n := requests.Load(); n != 0 {
		t.Fatalf("%d requests sent for bad drivers", n)
	}
	if ks := children(t, raw, ns); len(ks) != 0 {
		t.Fatalf("nodes left: %q", ks)
	}
	if _, err := engine.New(nil, dir); !errors.Is(err, session.ErrBadArgument) {
		t.Fatalf("nil session: %v", err)
	}
}

// TestGhostStandard: the ghost-node recovery under the standard policy (the
// lease context is canceled by the cut; the engine waits for the
// reconnection before it grants).
func TestGhostStandard(t *testing.T) {
	ns := zktest.NewNamespace(t)
	raw := ns.Conn(t)
	ctx := ctxT(t)
	s, p := sessiontest.ConnectProxy(t, ns)
	in := newInternals(t, s)
	prefix := ns.Path(dir) + "/"
	// The directory exists, so the swallowed create succeeds on the server
	// (without it the create would fail there, leaving no ghost).
	if err := sessiontest.Core(s).EnsureContainers(ctx, in.Path()); err != nil {
		t.Fatal(err)
	}
	var n atomic.Int32
	p.OnRequest(func(r zktest.Request) zktest.Action {
		if (r.Op == zktest.OpCreate || r.Op == zktest.OpMulti) && strings.HasPrefix(r.Path, prefix) && n.Add(1) == 1 {
			return zktest.SwallowReply
		}
		return zktest.Forward
	})
	l, err := in.Acquire(ctx, lockDriver, []byte("g"))
	if err != nil {
		t.Fatal(err)
	}
	if n.Load() != 1 || len(children(t, raw, ns)) != 1 {
		t.Fatalf("creates %d, nodes %q", n.Load(), children(t, raw, ns))
	}
	if l.Err() != nil {
		t.Fatalf("lease ended: %v", l.Err())
	}
	l.Release(ctx)
	waitChildren(t, raw, ns, 0)
}

// TestCloseEndsAndJoins: Close ends leases with ErrClosed, deletes their
// nodes, and is idempotent.
func TestCloseEndsAndJoins(t *testing.T) {
	ns := zktest.NewNamespace(t)
	raw := ns.Conn(t)
	ctx := ctxT(t)
	in, err := engine.New(sessiontest.Connect(t, ns), dir, engine.WithName("mine"))
	if err != nil {
		t.Fatal(err)
	}
	var ls []*engine.Lease
	for i := 0; i < 3; i++ {
		l, err := in.TryAcquire(ctx, engine.Standard("lease-", 5), nil)
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
	}
	in.Close()
	in.Close()
	for _, l := range ls {
		select {
		case <-l.Done():
		default:
			t.Fatal("lease not ended by Close")
		}
		if !errors.Is(l.Err(), session.ErrClosed) || !errors.Is(l.Err(), session.ErrClosed) ||
			l.Err().Error() != `mine "`+dir+`": closed` {
			t.Fatalf("cause %v", l.Err())
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if ks := children(t, raw, ns); len(ks) != 0 {
		t.Fatalf("nodes left: %q", ks)
	}
	if _, err := in.Acquire(ctx, lockDriver, nil); !errors.Is(err, session.ErrClosed) {
		t.Fatalf("Acquire after Close = %v", err)
	}
}

// TestPlainCreateAndDirData: the token is the czxid of our node whether it
// comes from the create's reply (the default, and WithMultiCreate(false)) or
// from the multi's setData (WithMultiCreate(true)); only the multi writes the
// directory, and not when the directory holds data.
func TestPlainCreateAndDirData(t *testing.T) {
	for _, tc := range []struct {
		name    string
		opts    []engine.Option
		dirData []byte
		writes  int32
	}{
		{"default", nil, nil, 0},
		{"option-plain", []engine.Option{engine.WithMultiCreate(false)}, nil, 0},
		{"option-multi", []engine.Option{engine.WithMultiCreate(true)}, nil, 3},
		{"dir-data", nil, []byte("keep me"), 0},
		{"dir-data-multi", []engine.Option{engine.WithMultiCreate(true)}, []byte("keep me"), 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := zktest.NewNamespace(t)
			raw := ns.Conn(t)
			ctx := ctxT(t)
			if tc.dirData != nil {
				for _, p := range []string{"/r", dir} {
					if _, err := raw.Create(ns.Path(p), tc.dirData, 0, zk.WorldACL(zk.PermAll)); err != nil {
						t.Fatal(err)
					}
				}
			}
			in := newInternals(t, sessiontest.Connect(t, ns), tc.opts...)
			for i := 0; i < 3; i++ {
				l, err := in.Acquire(ctx, lockDriver, nil)
				if err != nil {
					t.Fatal(err)
				}
				checkToken(t, raw, l)
				if i == 0 {
					// Keep the directory (a container) from being reaped
					// while it is empty between two acquires, which would
					// restart its version: a child that matches no marker.
					if _, err := raw.Create(ns.Path(dir)+"/pin", nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
						t.Fatal(err)
					}
				}
				l.Release(ctx)
			}
			data, st, err := raw.Get(ns.Path(dir))
			if err != nil {
				t.Fatal(err)
			}
			if string(data) != string(tc.dirData) || st.Version != tc.writes {
				t.Fatalf("directory data %q version %d, want %q version %d", data, st.Version, tc.dirData, tc.writes)
			}
		})
	}
}

// TestHandoffRequests: with the node watch a waiter takes over on the
// deletion notice alone (no children read); without it, it reads the
// children once. Either way it sends nothing else.
func TestHandoffRequests(t *testing.T) {
	for _, watch := range []bool{true, false} {
		t.Run(fmt.Sprintf("nodewatch=%v", watch), func(t *testing.T) {
			// A server of its own: the test counts the watches on it.
			ns := zktest.NewNamespaceOn(t, zktest.StartServerT(t))
			raw := ns.Conn(t)
			ctx := ctxT(t)
			holder := newInternals(t, sessiontest.Connect(t, ns))
			ws, p := sessiontest.ConnectProxy(t, ns)
			waiter := newInternals(t, ws, engine.WithNodeWatch(watch))
			hl, err := holder.Acquire(ctx, lockDriver, nil)
			if err != nil {
				t.Fatal(err)
			}
			var mu sync.Mutex
			var ops []int32
			var armed atomic.Bool
			p.OnRequest(func(r zktest.Request) zktest.Action {
				if armed.Load() && r.Op != zktest.OpPing {
					mu.Lock()
					ops = append(ops, r.Op)
					mu.Unlock()
				}
				return zktest.Forward
			})
			res := make(chan *engine.Lease, 1)
			go func() {
				l, err := waiter.Acquire(ctx, lockDriver, nil)
				if err != nil {
					t.Error(err)
				}
				res <- l
			}()
			waitChildren(t, raw, ns, 2)
			// Wait until the waiter is in its select (its last request sent).
			// (the holder's own watch, the waiter's on it, and with the node
			// watch the waiter's own).
			want := 2
			if watch {
				want = 3
			}
			zktest.Eventually(t, wait, func() bool { return mntrInt(t, ns, "zk_watch_count") >= want }, "waiter not watching")
			armed.Store(true)
			hl.Release(ctx)
			var l *engine.Lease
			select {
			case l = <-res:
			case <-time.After(wait):
				t.Fatal("the waiter did not acquire after the holder released")
			}
			if l == nil {
				t.FailNow()
			}
			mu.Lock()
			got := append([]int32(nil), ops...)
			mu.Unlock()
			if watch && len(got) != 0 {
				t.Fatalf("requests during the handoff: %v, want none", got)
			}
			if !watch && (len(got) != 1 || got[0] != zktest.OpGetChildren2) {
				t.Fatalf("requests during the handoff: %v, want one children read", got)
			}
			l.Release(ctx)
		})
	}
}

// TestUncontendedRequests: an uncontended acquire and release sends a plain
// create, the pipelined children read (again if that read overtook the
// create) and the delete, nothing else: the token comes from the create's
// reply (no multi, no setData on the directory, no read of our node), and it
// is our node's czxid.
func TestUncontendedRequests(t *testing.T) {
	ns := zktest.NewNamespace(t)
	raw := ns.Conn(t)
	ctx := ctxT(t)
	s, p := sessiontest.ConnectProxy(t, ns)
	in := newInternals(t, s)
	// A persistent directory: a container emptied by every release could be
	// reaped between two cycles on a slow machine, and then the next acquire
	// creates it again (more requests).
	if err := sessiontest.Core(s).EnsureContainers(ctx, path.Dir(in.Path())); err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Create(in.Path(), nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	l, err := in.Acquire(ctx, lockDriver, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	log := sessiontest.LogRequests(p)
	for i := 0; i < 5; i++ {
		l, err := in.Acquire(ctx, lockDriver, nil)
		if err != nil {
			t.Fatal(err)
		}
		checkToken(t, raw, l)
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	count := map[string]int{}
	for _, r := range log.Since(0) {
		if r.Op != zktest.OpPing {
			got = append(got, zktest.OpName(r.Op))
			count[zktest.OpName(r.Op)]++
		}
	}
	// The pipelined read may, rarely, reach the server before the create
	// and miss our node: then the acquire reads again (documented).
	lists := count["getChildren2"]
	delete(count, "getChildren2")
	want := map[string]int{"create": 5, "delete": 5}
	if !reflect.DeepEqual(count, want) || lists < 5 || lists > 10 {
		t.Fatalf("requests of 5 uncontended cycles: %v and %d children reads, want %v and 5 (in order: %v)", count, lists, want, got)
	}
}

// checkToken fails unless l's token is its node's czxid.
func checkToken(t *testing.T, raw *zk.Conn, l *engine.Lease) {
	t.Helper()
	_, st, err := raw.Get(l.Path())
	if err != nil || st.Czxid != l.Token() {
		t.Fatalf("token %d, our node's czxid %v (%v)", l.Token(), st, err)
	}
}

// TestCloseWaitsForLateCreate: Close, racing with an acquire whose create
// has reached the server but whose reply has not reached the client, returns
// only once that node is gone (on a healthy, if slow, connection): the
// acquire left the create behind, and the sweep of its late success is one
// of the cleanups Close waits for. A leader's Close in
// TestCloseDeletesQueuedNode (package leader) once returned with such a node
// still there.
func TestCloseWaitsForLateCreate(t *testing.T) {
	ns := zktest.NewNamespace(t)
	raw := ns.Conn(t)
	ctx := ctxT(t)
	s, p := sessiontest.ConnectProxy(t, ns, session.WithSessionTimeout(10*time.Second))
	in := newInternals(t, s)
	l, err := in.Acquire(ctx, lockDriver, []byte("x")) // the directory exists from now on
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	waitChildren(t, raw, ns, 0)
	p.SetLatency(300 * time.Millisecond)
	got := make(chan error, 1)
	go func() {
		_, err := in.Acquire(ctx, lockDriver, []byte("y"))
		got <- err
	}()
	waitChildren(t, raw, ns, 1) // created on the server; the reply is on its way
	if err := in.Close(); err != nil {
		t.Fatal(err)
	}
	if ks := children(t, raw, ns); len(ks) != 0 {
		t.Fatalf("nodes right after Close: %q", ks)
	}
	if err := <-got; !errors.Is(err, session.ErrClosed) {
		t.Fatalf("Acquire during Close = %v, want ErrClosed", err)
	}
}

// TestCloseAfterSuspensionIsPrompt: a lease that ended at a suspension (a
// partition) has its node handed to the session's queue; neither Release
// nor Close waits for that delete while the connection is down. The lease's
// monitor may begin its wait for the delete just before the state goroutine
// reports Suspended (the lease ends a hop earlier): the wait ends at that
// transition, not at the cleanup timeout. Each round holds a lease longer
// than the node watch's delay, so that its monitor runs.
func TestCloseAfterSuspensionIsPrompt(t *testing.T) {
	const rounds = 4
	for i := 0; i < rounds; i++ {
		ns := zktest.NewNamespace(t)
		s, p := sessiontest.ConnectProxy(t, ns, session.WithSessionTimeout(2*time.Second))
		rec := sessiontest.Record(t, s)
		in := newInternals(t, s) // cleanup timeout: the default 5 s
		l, err := in.Acquire(ctxT(t), lockDriver, nil)
		if err != nil {
			t.Fatal(err)
		}
		zktest.Eventually(t, wait, func() bool { return sessiontest.Core(s).NodeSubs() > 0 }, "the lease's own-node watch")
		p.Partition()
		<-l.Done()
		if !errors.Is(l.Err(), session.ErrSuspended) {
			t.Fatalf("lease ended with %v, want ErrSuspended", l.Err())
		}
		start := time.Now()
		if err := l.Release(ctxT(t)); err != nil {
			t.Fatal(err)
		}
		released := time.Since(start)
		if err := in.Close(); err != nil {
			t.Fatal(err)
		}
		closed := time.Since(start)
		t.Logf("round %d: Release %v, Release+Close %v", i, released.Round(time.Millisecond), closed.Round(time.Millisecond))
		if closed > time.Second {
			t.Fatalf("Release and Close took %v after the lease ended at a suspension, want well under the 5 s cleanup timeout", closed)
		}
		rec.Wait(t, wait, session.Suspended)
		p.Heal()
	}
}
