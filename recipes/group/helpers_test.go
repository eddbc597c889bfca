package group_test

import (
	"context"
	"errors"
	"sort"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/recipes/group"
	"github.com/zkrecipes/zkrecipes/session"
)

// wait bounds every wait on something that should happen soon, generous for
// a loaded machine.
const wait = 15 * time.Second

// backBound is the bound the package documentation states: after a session
// loss the node is back within this long of the Reconnected event.
const backBound = 5 * time.Second

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// startNode creates and starts a Node, closed in t.Cleanup.
func startNode(t testing.TB, s *session.Session, path string, mode group.Mode, data string) *group.Node {
	t.Helper()
	n, err := group.NewNode(s, path, mode, []byte(data))
	if err != nil {
		t.Fatalf("NewNode: %v", err)
	}
	if err := n.Start(); err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { n.Close() })
	return n
}

// startMember creates and starts a Member, closed in t.Cleanup.
func startMember(t testing.TB, s *session.Session, path, id, data string) *group.Member {
	t.Helper()
	m, err := group.NewMember(s, path, id, []byte(data))
	if err != nil {
		t.Fatalf("NewMember: %v", err)
	}
	if err := m.Start(); err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { m.Close() })
	return m
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

// stat returns the data and Stat of the full server path p read through
// raw, or ok == false when it does not exist.
func stat(t testing.TB, raw *zk.Conn, p string) (data []byte, st *zk.Stat, ok bool) {
	t.Helper()
	d, s, err := raw.Get(p)
	if errors.Is(err, zk.ErrNoNode) {
		return nil, nil, false
	}
	if err != nil {
		t.Fatalf("get %s: %v", p, err)
	}
	return d, s, true
}

// serverView reads the group at the full server path dir through raw: each
// child's name and data, as a member's view should be.
func serverView(t testing.TB, raw *zk.Conn, dir string) map[string]string {
	t.Helper()
	kids, _, err := raw.Children(dir)
	if errors.Is(err, zk.ErrNoNode) {
		return map[string]string{}
	}
	if err != nil {
		t.Fatalf("children %s: %v", dir, err)
	}
	out := make(map[string]string, len(kids))
	for _, k := range kids {
		d, _, ok := stat(t, raw, dir+"/"+k)
		if ok {
			out[k] = string(d)
		}
	}
	return out
}

// text turns a view into comparable strings.
func text(v map[string][]byte) map[string]string {
	out := make(map[string]string, len(v))
	for k, d := range v {
		out[k] = string(d)
	}
	return out
}

func sameView(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func ids(v map[string]string) []string {
	var out []string
	for k := range v {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func errorsIs(err, target error) bool { return errors.Is(err, target) }

// closedWithin drains ch (at most the one view it holds) and fails the test
// unless it is closed within wait.
func closedWithin(t testing.TB, ch <-chan map[string][]byte, what string) {
	t.Helper()
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	for {
		select {
		case _, ok := <-ch:
			if !ok {
				return
			}
		case <-deadline.C:
			t.Fatalf("%s: channel not closed within %v", what, wait)
		}
	}
}
