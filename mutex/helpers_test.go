package mutex_test

import (
	"context"
	"errors"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/internal/testkit/sessiontest"
	"github.com/zkrecipes/zkrecipes/mutex"
	"github.com/zkrecipes/zkrecipes/session"
	"github.com/zkrecipes/zkrecipes/zktest"
)

const lockPath = "/locks/a"

// wait is how long a test waits for something that should happen promptly.
const wait = 15 * time.Second

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func newMutex(t testing.TB, s *session.Session, opts ...mutex.Option) *mutex.Reentrant {
	t.Helper()
	m, err := mutex.NewReentrant(s, lockPath, opts...)
	if err != nil {
		t.Fatalf("mutex.New: %v", err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// kids lists the lock directory through a raw connection (sorted by name).
func kids(t testing.TB, c *zk.Conn, ns *zktest.Namespace) []string {
	t.Helper()
	k, _, err := c.Children(ns.Path(lockPath))
	if errors.Is(err, zk.ErrNoNode) {
		return nil
	}
	if err != nil {
		t.Fatalf("children: %v", err)
	}
	sort.Strings(k)
	return k
}

// lockKids lists the "lock-" nodes in sequence order.
func lockKids(t testing.TB, c *zk.Conn, ns *zktest.Namespace) []string {
	t.Helper()
	var out []string
	for _, k := range kids(t, c, ns) {
		if strings.Contains(k, "lock-") {
			out = append(out, k)
		}
	}
	sort.Slice(out, func(i, j int) bool { return seqOf(out[i]) < seqOf(out[j]) })
	return out
}

func seqOf(name string) string { return name[strings.LastIndex(name, "lock-")+5:] }

// waitKids waits until the lock directory has n "lock-" nodes.
func waitKids(t testing.TB, c *zk.Conn, ns *zktest.Namespace, n int) []string {
	t.Helper()
	var k []string
	zktest.Eventually(t, wait, func() bool {
		k = lockKids(t, c, ns)
		return len(k) == n
	}, "want %d lock nodes", n)
	return k
}

// waitQueued waits until the waiter on session ws has decided to wait for
// the lock at lockPath: its session watches the node it waits on (for the
// fair kinds its predecessor, the lowest other "lock-" node; for NonFair the
// one lock node). That is the waiter's last request before it blocks; a
// fault injected earlier would hit the acquire, not the wait.
func waitQueued(t testing.TB, ns *zktest.Namespace, k lockKind, ws *session.Session) {
	t.Helper()
	dir := ns.Path(lockPath)
	sid := ws.SessionID()
	raw := ns.Conn(t)
	zktest.Eventually(t, wait, func() bool {
		watched := sessiontest.Watches(t, ns.Server.Addr(), sid)
		if !k.fair {
			return watched[dir+"/"+mutex.NonFairNode]
		}
		for p := range watched {
			if !strings.HasPrefix(p, dir+"/") || !strings.Contains(p, "lock-") {
				continue
			}
			// Not the waiter's own node (the node watch also watches that).
			if _, st, err := raw.Get(p); err == nil && st.EphemeralOwner != sid {
				return true
			}
		}
		return false
	}, "the waiter on session 0x%x does not wait on %s", sid, dir)
}

// seenBefore polls cond every 10 ms on a goroutine of its own until cond
// holds or ctx ends, and then sends whether cond held before ctx ended. It
// lets a test that blocks in a call bounded by ctx (on its own goroutine, as
// the call under test requires) check that the state the deadline is meant
// to interrupt was reached first. cond must not call t.Fatal.
func seenBefore(ctx context.Context, cond func() bool) <-chan bool {
	out := make(chan bool, 1)
	go func() {
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			if cond() {
				out <- true
				return
			}
			select {
			case <-ctx.Done():
				out <- false
				return
			case <-tick.C:
			}
		}
	}()
	return out
}

// childCount returns the number of children of p, or -1 on error.
func childCount(c *zk.Conn, p string) int {
	k, _, err := c.Children(p)
	if err != nil {
		return -1
	}
	return len(k)
}

func connect(t testing.TB, ns *zktest.Namespace, opts ...session.Option) *session.Session {
	t.Helper()
	return sessiontest.Connect(t, ns, opts...)
}

// notes returns the watch notifications tap has recorded; it fails the test
// if a stream could not be parsed.
func notes(t testing.TB, tap *zktest.Tap) []zktest.Notification {
	t.Helper()
	n, err := tap.Notifications()
	if err != nil {
		t.Fatalf("tap: unparsable stream: %v", err)
	}
	return n
}

// mutexOnOwnSession connects a session of its own (with opts) and returns a
// mutex.New on lockPath on it, closed when the test ends.
func mutexOnOwnSession(t testing.TB, ns *zktest.Namespace, opts ...session.Option) *mutex.Mutex {
	t.Helper()
	m, err := mutex.New(connect(t, ns, opts...), lockPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// ensureLockDir creates the lock directory, so that a test's first create
// under it succeeds on the server (a create into a missing directory fails
// there, and Lock creates the directory only then).
func ensureLockDir(t testing.TB, s *session.Session, ns *zktest.Namespace) {
	t.Helper()
	if err := sessiontest.Core(s).EnsureContainers(ctxT(t), ns.Path(lockPath)); err != nil {
		t.Fatal(err)
	}
}
