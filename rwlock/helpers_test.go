package rwlock_test

import (
	"context"
	"errors"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/internal/testkit/sessiontest"
	"github.com/zkrecipes/zkrecipes/recipes"
	"github.com/zkrecipes/zkrecipes/rwlock"
	"github.com/zkrecipes/zkrecipes/session"
	"github.com/zkrecipes/zkrecipes/zktest"
)

const lockPath = "/locks/rw"

// wait is how long a test waits for something that should happen promptly.
const wait = 15 * time.Second

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func connect(t testing.TB, ns *zktest.Namespace, opts ...session.Option) *session.Session {
	t.Helper()
	return sessiontest.Connect(t, ns, opts...)
}

// Side is a side of the lock, named as recipes.Participant.Kind names it
// (and rwlock.LeaseKind a lease's).
type Side = string

// The two sides.
const (
	Read  Side = "read"
	Write Side = "write"
)

// locker is what both lock kinds offer.
type locker interface {
	Lock(ctx context.Context) (*rwlock.WriteLease, error)
	TryLock(ctx context.Context) (*rwlock.WriteLease, error)
	RLock(ctx context.Context) (*rwlock.Lease, error)
	TryRLock(ctx context.Context) (*rwlock.Lease, error)
	Participants(ctx context.Context) ([]recipes.Participant, error)
	Close() error
}

var (
	_ locker = (*rwlock.RWMutex)(nil)
	_ locker = (*rwlock.Reentrant)(nil)
)

// kind builds one lock kind on a session (closed in t.Cleanup).
type kind struct {
	name string
	make func(t testing.TB, s *session.Session, opts ...rwlock.Option) locker
}

var kinds = []kind{
	{"rwmutex", func(t testing.TB, s *session.Session, opts ...rwlock.Option) locker {
		return newRWMutex(t, s, opts...)
	}},
	{"reentrant", func(t testing.TB, s *session.Session, opts ...rwlock.Option) locker {
		return newReentrant(t, s, opts...)
	}},
}

func newRWMutex(t testing.TB, s *session.Session, opts ...rwlock.Option) *rwlock.RWMutex {
	t.Helper()
	m, err := rwlock.New(s, lockPath, opts...)
	if err != nil {
		t.Fatalf("rwlock.New: %v", err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

func newReentrant(t testing.TB, s *session.Session, opts ...rwlock.Option) *rwlock.Reentrant {
	t.Helper()
	m, err := rwlock.NewReentrant(s, lockPath, opts...)
	if err != nil {
		t.Fatalf("rwlock.NewReentrant: %v", err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// acquire takes one side of lk.
func acquire(ctx context.Context, lk locker, side Side, try bool) (*rwlock.Lease, error) {
	if side == Write {
		var w *rwlock.WriteLease
		var err error
		if try {
			w, err = lk.TryLock(ctx)
		} else {
			w, err = lk.Lock(ctx)
		}
		if err != nil {
			return nil, err
		}
		return &w.Lease, nil
	}
	if try {
		return lk.TryRLock(ctx)
	}
	return lk.RLock(ctx)
}

// seqOf returns the sequence after the last marker of a node name.
func seqOf(name string) int64 {
	i := max(strings.LastIndex(name, rwlock.ReadMarker), strings.LastIndex(name, rwlock.WriteMarker))
	if i < 0 {
		return -1
	}
	n, err := strconv.ParseInt(name[i+len(rwlock.ReadMarker):], 10, 64)
	if err != nil {
		return -1
	}
	return n
}

// nodes lists the lock directory's read and write nodes through a raw
// connection, in sequence order.
func nodes(t testing.TB, c *zk.Conn, ns *zktest.Namespace) []string {
	t.Helper()
	k, _, err := c.Children(ns.Path(lockPath))
	if errors.Is(err, zk.ErrNoNode) {
		return nil
	}
	if err != nil {
		t.Fatalf("children: %v", err)
	}
	var out []string
	for _, n := range k {
		if seqOf(n) >= 0 {
			out = append(out, n)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if a, b := seqOf(out[i]), seqOf(out[j]); a != b {
			return a < b
		}
		return out[i] < out[j]
	})
	return out
}

// waitNodes waits until the lock directory holds n read or write nodes.
func waitNodes(t testing.TB, c *zk.Conn, ns *zktest.Namespace, n int) []string {
	t.Helper()
	var k []string
	zktest.Eventually(t, wait, func() bool {
		k = nodes(t, c, ns)
		return len(k) == n
	}, "want %d lock nodes", n)
	return k
}

// waitEmpty waits until the lock directory holds no node (or is gone).
func waitEmpty(t testing.TB, c *zk.Conn, ns *zktest.Namespace) {
	t.Helper()
	zktest.Eventually(t, wait, func() bool {
		k, _, err := c.Children(ns.Path(lockPath))
		return errors.Is(err, zk.ErrNoNode) || (err == nil && len(k) == 0)
	}, "nodes left under %s", ns.Path(lockPath))
}

// result is an acquire's outcome stamped with a global event number.
type result struct {
	l    *rwlock.Lease
	err  error
	n    int64
	at   time.Time
	then bool // lockAsyncThen's check, made as the acquire returned
}

// async is an acquire running in its own goroutine, which also does the
// Release when asked (a Reentrant lease must be unlocked by the goroutine
// that locked it).
type async struct {
	res       chan result
	unlockReq chan struct{}
	unlockErr chan error
	unlockedN atomic.Int64 // stamp taken just before the Unlock call
	stop      chan struct{}
	clock     *atomic.Int64
}

// lockAsync runs one acquire of side in a goroutine and stamps its return.
// The goroutine unlocks when asked (unlock) or at the test's end.
func lockAsync(t testing.TB, ctx context.Context, lk locker, side Side, clock *atomic.Int64) *async {
	return lockAsyncThen(t, ctx, lk, side, clock, nil)
}

// lockAsyncThen is lockAsync that also calls then on the acquiring goroutine
// the moment the acquire returns (before anything else runs there), and
// records its answer in the result's then field: the exact order of an
// event against the acquire, free of other goroutines' scheduling.
func lockAsyncThen(t testing.TB, ctx context.Context, lk locker, side Side, clock *atomic.Int64, then func() bool) *async {
	a := &async{res: make(chan result, 1), unlockReq: make(chan struct{}), unlockErr: make(chan error, 1), stop: make(chan struct{}), clock: clock}
	done := make(chan struct{})
	ctx, cancel := context.WithCancel(ctx)
	go func() {
		defer close(done)
		l, err := acquire(ctx, lk, side, false)
		thenOK := then != nil && then()
		r := result{l: l, err: err, n: clock.Add(1), at: time.Now()}
		r.then = thenOK
		a.res <- r
		if err != nil {
			return
		}
		select {
		case <-a.unlockReq:
		case <-a.stop:
		}
		a.unlockedN.Store(clock.Add(1))
		a.unlockErr <- l.Release(context.Background())
	}()
	t.Cleanup(func() { cancel(); close(a.stop); <-done })
	return a
}

// result waits for the acquire's outcome.
func (a *async) result(t testing.TB) result {
	t.Helper()
	return sessiontest.Recv(t, a.res, wait, "acquire result")
}

// held waits for the acquire's outcome and fails the test on error.
func (a *async) held(t testing.TB) result {
	t.Helper()
	r := a.result(t)
	if r.err != nil {
		t.Fatalf("acquire: %v", r.err)
	}
	return r
}

// pending fails the test if the acquire has returned.
func (a *async) pending(t testing.TB, what string) {
	t.Helper()
	select {
	case r := <-a.res:
		t.Fatalf("%s: acquire returned (lease %v, err %v) while it should wait", what, r.l, r.err)
	default:
	}
}

// unlock makes the locking goroutine unlock and returns the stamp taken
// just before its Release call.
func (a *async) unlock(t testing.TB) int64 {
	t.Helper()
	close(a.unlockReq)
	if err := sessiontest.Recv(t, a.unlockErr, wait, "Release result"); err != nil {
		t.Fatalf("Release: %v", err)
	}
	return a.unlockedN.Load()
}

// reads records the getData requests a session sends through its proxy: a
// waiter that sends getData on another node has decided to wait for that
// node (the engine reads a node's data only to watch it, or its own node),
// so it cannot return before that node changes.
type reads struct {
	mu    sync.Mutex
	paths []string
	more  chan struct{}
}

// connectReads connects a session through its own proxy that records its
// getData requests.
func connectReads(t testing.TB, ns *zktest.Namespace, opts ...session.Option) (*session.Session, *zktest.Proxy, *reads) {
	t.Helper()
	p := ns.Proxy(t)
	r := recordReads(p)
	return sessiontest.ConnectTo(t, p.Servers(), ns.Root, opts...), p, r
}

// recordReads records the getData requests of the clients of proxy p.
func recordReads(p *zktest.Proxy) *reads {
	r := &reads{more: make(chan struct{})}
	p.OnRequest(func(q zktest.Request) zktest.Action {
		if q.Op == zktest.OpGetData {
			r.mu.Lock()
			r.paths = append(r.paths, q.Path)
			close(r.more)
			r.more = make(chan struct{})
			r.mu.Unlock()
		}
		return zktest.Forward
	})
	return r
}

// waitRead waits until the session has sent a getData on the node named
// node.
func (r *reads) waitRead(t testing.TB, node string) {
	t.Helper()
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	for {
		r.mu.Lock()
		for _, p := range r.paths {
			if strings.HasSuffix(p, "/"+node) {
				r.mu.Unlock()
				return
			}
		}
		more := r.more
		r.mu.Unlock()
		select {
		case <-more:
		case <-deadline.C:
			t.Fatalf("no getData on %s within %v", node, wait)
		}
	}
}

// waitWaiting waits until the participant list shows n nodes, and the
// waiter's session (through rd) has read the node it waits for: the
// nearest node before its own that blocks its side. It returns the list.
func waitWaiting(t testing.TB, ctx context.Context, lk locker, rd *reads, n int, mine func(recipes.Participant) bool) []recipes.Participant {
	t.Helper()
	var ps []recipes.Participant
	zktest.Eventually(t, wait, func() bool {
		var err error
		ps, err = lk.Participants(ctx)
		return err == nil && len(ps) == n
	}, "%d participants", n)
	for i, p := range ps {
		if !mine(p) {
			continue
		}
		for j := i - 1; j >= 0; j-- {
			q := ps[j]
			if seqOf(q.Node) == seqOf(p.Node) {
				continue
			}
			if p.Kind == Write || q.Kind == Write {
				rd.waitRead(t, q.Node)
				return ps
			}
		}
		t.Fatalf("participant %s does not wait: %+v", p.Node, ps)
	}
	t.Fatalf("no participant of ours among %+v", ps)
	return nil
}
