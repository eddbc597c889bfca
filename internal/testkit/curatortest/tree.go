package curatortest

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TreeCacheProgram is CuratorTreeCache.java: a Curator TreeCache, measured.
const TreeCacheProgram Program = "CuratorTreeCache"

// TreeCache drives a CuratorTreeCache program: one Curator client that
// loads a TreeCache on one full server path on demand and reports what it
// costs.
type TreeCache struct {
	*Process
	// Path is the tree's root (full server path).
	Path string
}

// TreeLoad is what a TreeCache load reported.
type TreeLoad struct {
	// Nodes is the number of nodes cached, the root included.
	Nodes int
	// Took is the time from the cache's start to its INITIALIZED event.
	Took time.Duration
	// HeapBefore and HeapAfter are the JVM's used heap after System.gc(),
	// before the start and after the load, in bytes.
	HeapBefore, HeapAfter int64
}

// StartTreeCache starts a CuratorTreeCache client on the full server path
// and waits until its Curator client is connected (READY). The cache is
// not started: call Load. It fails the test on error, so it must be called
// from the test's goroutine.
func StartTreeCache(t testing.TB, servers []string, path string, opts ...Option) *TreeCache {
	t.Helper()
	c := buildConfig(t, opts)
	p := Start(t, TreeCacheProgram, strings.Join(servers, ","), path, msText(c.sessionTimeout))
	ctx, cancel := context.WithTimeout(context.Background(), ReadyTimeout)
	defer cancel()
	if _, err := p.Expect(ctx, "READY"); err != nil {
		t.Fatal(err)
	}
	return &TreeCache{Process: p, Path: path}
}

// Load starts a TreeCache on the path and waits for its INITIALIZED event.
func (c *TreeCache) Load(ctx context.Context) (TreeLoad, error) {
	l, err := c.Call(ctx, "load", "LOADED")
	if err != nil {
		return TreeLoad{}, err
	}
	n, err := c.ints(l, 5)
	if err != nil {
		return TreeLoad{}, err
	}
	return TreeLoad{Nodes: int(n[0]), Took: time.Duration(n[1]), HeapBefore: n[2], HeapAfter: n[3]}, nil
}

// Watches returns the number of paths the program's ZooKeeper client holds
// data, exists and child watches on.
func (c *TreeCache) Watches(ctx context.Context) (data, exist, child int, err error) {
	l, err := c.Call(ctx, "watches", "WATCHES")
	if err != nil {
		return 0, 0, 0, err
	}
	n, err := c.ints(l, 4)
	if err != nil {
		return 0, 0, 0, err
	}
	return int(n[0]), int(n[1]), int(n[2]), nil
}

// Arm asks for the time of the next NODE_UPDATED of the node at the full
// server path p; WaitChanged returns it.
func (c *TreeCache) Arm(ctx context.Context, p string) error {
	_, err := c.Call(ctx, "arm "+p, "ARMED")
	return err
}

// WaitChanged waits for the event Arm asked for and returns when the
// listener saw it (the wall clock of the JVM, which is this machine's).
func (c *TreeCache) WaitChanged(ctx context.Context) (time.Time, error) {
	l, err := c.Expect(ctx, "CHANGED")
	if err != nil {
		return time.Time{}, err
	}
	f := l.Fields()
	if len(f) < 2 {
		return time.Time{}, fmt.Errorf("curatortest: %s: bad line %q", c.name, l.Text)
	}
	ns, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("curatortest: %s: bad line %q: %w", c.name, l.Text, err)
	}
	return time.Unix(0, ns), nil
}

// CloseCache closes the TreeCache (the client stays).
func (c *TreeCache) CloseCache(ctx context.Context) error {
	_, err := c.Call(ctx, "close", "CLOSED")
	return err
}

// ints parses the fields after the first of l, which must have n fields.
func (c *TreeCache) ints(l Line, n int) ([]int64, error) {
	f := l.Fields()
	if len(f) != n {
		return nil, fmt.Errorf("curatortest: %s: bad line %q", c.name, l.Text)
	}
	out := make([]int64, 0, n-1)
	for _, s := range f[1:] {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("curatortest: %s: bad line %q: %w", c.name, l.Text, err)
		}
		out = append(out, v)
	}
	return out, nil
}
