package semaphore_test

import (
	"context"
	"errors"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/internal/testkit/sessiontest"
	"github.com/zkrecipes/zkrecipes/recipes"
	"github.com/zkrecipes/zkrecipes/semaphore"
	"github.com/zkrecipes/zkrecipes/session"
	"github.com/zkrecipes/zkrecipes/zktest"
)

const semPath = "/sem/a"

// wait is how long a test waits for something that should happen promptly.
const wait = 15 * time.Second

// leaseNode is a lease node's name, Curator's or ours.
var leaseNode = regexp.MustCompile(`^_c_[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}-lease-[0-9]{10}$`)

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func connect(t testing.TB, ns *zktest.Namespace, opts ...session.Option) *session.Session {
	t.Helper()
	return sessiontest.Connect(t, ns, opts...)
}

func newSem(t testing.TB, s *session.Session, max int, opts ...semaphore.Option) *semaphore.Semaphore {
	t.Helper()
	sem, err := semaphore.New(s, semPath, max, opts...)
	if err != nil {
		t.Fatalf("semaphore.New: %v", err)
	}
	t.Cleanup(func() { sem.Close() })
	return sem
}

func newCount(t testing.TB, s *session.Session, path string, seed int) *semaphore.SharedCount {
	t.Helper()
	c, err := semaphore.NewSharedCount(s, path, seed)
	if err != nil {
		t.Fatalf("semaphore.NewSharedCount: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func newShared(t testing.TB, s *session.Session, c *semaphore.SharedCount, opts ...semaphore.Option) *semaphore.Semaphore {
	t.Helper()
	sem, err := semaphore.NewShared(s, semPath, c, opts...)
	if err != nil {
		t.Fatalf("semaphore.NewShared: %v", err)
	}
	t.Cleanup(func() { sem.Close() })
	return sem
}

// children lists a directory of the semaphore (LocksDir or LeasesDir)
// through a raw connection, sorted by name; a missing directory is empty.
func children(t testing.TB, c *zk.Conn, ns *zktest.Namespace, dir string) []string {
	t.Helper()
	k, _, err := c.Children(ns.Path(semPath + "/" + dir))
	if errors.Is(err, zk.ErrNoNode) {
		return nil
	}
	if err != nil {
		t.Fatalf("children: %v", err)
	}
	sort.Strings(k)
	return k
}

// leases lists the lease nodes in sequence order.
func leases(t testing.TB, c *zk.Conn, ns *zktest.Namespace) []string {
	t.Helper()
	k := children(t, c, ns, semaphore.LeasesDir)
	sort.Slice(k, func(i, j int) bool { return seqOf(k[i]) < seqOf(k[j]) })
	return k
}

func seqOf(name string) string { return name[strings.LastIndex(name, "-")+1:] }

// waitNodes waits until the semaphore's directory dir has n children.
func waitNodes(t testing.TB, c *zk.Conn, ns *zktest.Namespace, dir string, n int) []string {
	t.Helper()
	var k []string
	zktest.Eventually(t, wait, func() bool {
		k = children(t, c, ns, dir)
		return len(k) == n
	}, "want %d nodes in %s", n, dir)
	return k
}

// acquired is the outcome of an acquire run in a goroutine.
type acquired struct {
	ls  []*semaphore.Lease
	err error
}

// acquireAsync runs sem.AcquireN(ctx, n) in a goroutine.
func acquireAsync(ctx context.Context, sem *semaphore.Semaphore, n int) <-chan acquired {
	ch := make(chan acquired, 1)
	go func() {
		ls, err := sem.AcquireN(ctx, n)
		ch <- acquired{ls, err}
	}()
	return ch
}

// notAcquired checks that an acquire running in a goroutine has not
// returned (at the moment of the call: the state it depends on must already
// be confirmed).
func notAcquired(t testing.TB, ch <-chan acquired) {
	t.Helper()
	select {
	case r := <-ch:
		t.Fatalf("acquire returned %v leases, %v; want it waiting", len(r.ls), r.err)
	default:
	}
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

// requests sums tap's request counts (pings excluded).
func requests(tap *zktest.Tap) int64 {
	var n int64
	for _, k := range tap.Requests() {
		n += k
	}
	return n
}

// releaseAll releases every lease (as AcquireN returns them) and returns the
// errors joined (see Lease.Release); nil leases are skipped.
func releaseAll(ctx context.Context, leases []*semaphore.Lease) error {
	var errs []error
	for _, l := range leases {
		if l != nil {
			errs = append(errs, l.Release(ctx))
		}
	}
	return errors.Join(errs...)
}

// holder returns the first of m's participants (the holder of a semaphore of
// one lease, as NewMutex returns); ok is false when there is none.
func holder(ctx context.Context, m *semaphore.Semaphore) (p recipes.Participant, ok bool, err error) {
	ps, err := m.Participants(ctx)
	if err != nil || len(ps) == 0 {
		return recipes.Participant{}, false, err
	}
	return ps[0], true, nil
}
