package barrier_test

import (
	"context"
	"errors"
	"sort"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/internal/testkit/sessiontest"
	"github.com/zkrecipes/zkrecipes/recipes/barrier"
	"github.com/zkrecipes/zkrecipes/session"
	"github.com/zkrecipes/zkrecipes/zktest"
)

const bpath = "/barriers/a"

// wait is how long a test waits for something that should happen promptly.
const wait = 30 * time.Second

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func newDouble(t testing.TB, s *session.Session, members int, opts ...barrier.Option) *barrier.DoubleBarrier {
	t.Helper()
	d, err := barrier.NewDouble(s, bpath, members, opts...)
	if err != nil {
		t.Fatalf("barrier.NewDouble: %v", err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// async runs f on a goroutine and returns its result's channel.
func async(f func() error) <-chan error {
	ch := make(chan error, 1)
	go func() { ch <- f() }()
	return ch
}

// kids lists the barrier's children through a raw connection, sorted; a
// missing directory has none.
func kids(t testing.TB, raw *zk.Conn, ns *zktest.Namespace) []string {
	t.Helper()
	k, _, err := raw.Children(ns.Path(bpath))
	if errors.Is(err, zk.ErrNoNode) {
		return nil
	}
	if err != nil {
		t.Fatalf("children: %v", err)
	}
	sort.Strings(k)
	return k
}

// members counts the member nodes (children other than "ready").
func members(t testing.TB, raw *zk.Conn, ns *zktest.Namespace) int {
	n := 0
	for _, k := range kids(t, raw, ns) {
		if k != "ready" {
			n++
		}
	}
	return n
}

func waitMembers(t testing.TB, raw *zk.Conn, ns *zktest.Namespace, n int) {
	t.Helper()
	zktest.Eventually(t, wait, func() bool { return members(t, raw, ns) == n }, "%d member nodes (have %v)", n, kids(t, raw, ns))
}

// pending fails the test if any of chs has a result already.
func pending(t testing.TB, what string, chs ...<-chan error) {
	t.Helper()
	for i, ch := range chs {
		select {
		case err := <-ch:
			t.Fatalf("%s %d returned early: %v", what, i, err)
		default:
		}
	}
}

// returned fails t unless every call of chs returns nil within wait.
func returned(t testing.TB, what string, chs ...<-chan error) {
	t.Helper()
	for i, ch := range chs {
		if err := sessiontest.Recv(t, ch, wait, what); err != nil {
			t.Fatalf("%s %d: %v", what, i, err)
		}
	}
}
