package counter_test

import (
	"encoding/binary"
	"errors"
	"math"
	"strings"
	"sync"
	"testing"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/internal/testkit/sessiontest"
	"github.com/zkrecipes/zkrecipes/recipes/counter"
	"github.com/zkrecipes/zkrecipes/session"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// A missing node reads as 0 with version -1 and is not created by Get; Add,
// Increment and Decrement write Curator's encoding (8 bytes big-endian, 4
// for New32) and return the value written with the node's version.
func TestBasicsAndEncoding(t *testing.T) {
	ns := zktest.NewNamespace(t)
	raw := ns.Conn(t)
	ctx := ctxT(t)
	s := sessiontest.Connect(t, ns)
	c := newCounter(t, s)
	v, err := c.Get(ctx)
	if err != nil || v != (counter.Value[int64]{Value: 0, Version: -1}) {
		t.Fatalf("Get of a missing node = %+v, %v", v, err)
	}
	if ok, _, _ := raw.Exists(ns.Path(cpath)); ok {
		t.Fatal("Get created the node")
	}
	if v, err = c.Add(ctx, 5); err != nil || v.Value != 5 || v.Version != 0 {
		t.Fatalf("Add(5) = %+v, %v", v, err)
	}
	if v, err = c.Increment(ctx); err != nil || v.Value != 6 || v.Version != 1 {
		t.Fatalf("Increment = %+v, %v", v, err)
	}
	if v, err = c.Add(ctx, -10); err != nil || v.Value != -4 {
		t.Fatalf("Add(-10) = %+v, %v", v, err)
	}
	if v, err = c.Decrement(ctx); err != nil || v.Value != -5 {
		t.Fatalf("Decrement = %+v, %v", v, err)
	}
	data, st, err := raw.Get(ns.Path(cpath))
	if err != nil || len(data) != 8 || int64(binary.BigEndian.Uint64(data)) != -5 || st.Version != v.Version {
		t.Fatalf("node data %x (version %d), %v; want 8 bytes of -5 at version %d", data, st.Version, err, v.Version)
	}
	if g, err := c.Get(ctx); err != nil || g != v {
		t.Fatalf("Get = %+v, %v; want %+v", g, err, v)
	}

	c32, err := counter.New32(s, "/counters/b")
	if err != nil {
		t.Fatal(err)
	}
	defer c32.Close()
	if v, err := c32.Add(ctx, -7); err != nil || v.Value != -7 {
		t.Fatalf("New32 Add(-7) = %+v, %v", v, err)
	}
	data, _, err = raw.Get(ns.Path("/counters/b"))
	if err != nil || len(data) != 4 || int32(binary.BigEndian.Uint32(data)) != -7 {
		t.Fatalf("32-bit node data %x, %v; want 4 bytes of -7", data, err)
	}
	if c.Path() != cpath {
		t.Fatalf("Path = %q", c.Path())
	}
}

// CompareAndSet compares values; TrySet compares versions: a stale Value
// fails and returns the current one, and nothing is written.
func TestCompareAndSetAndTrySet(t *testing.T) {
	ns := zktest.NewNamespace(t)
	ctx := ctxT(t)
	s := sessiontest.Connect(t, ns)
	c := newCounter(t, s)
	if v, ok, err := c.CompareAndSet(ctx, 1, 2); err != nil || ok || v.Version != -1 {
		t.Fatalf("CompareAndSet(1, 2) on a missing node = %+v, %v, %v", v, ok, err)
	}
	v0, ok, err := c.CompareAndSet(ctx, 0, 10)
	if err != nil || !ok || v0.Value != 10 || v0.Version != 0 {
		t.Fatalf("CompareAndSet(0, 10) on a missing node = %+v, %v, %v", v0, ok, err)
	}
	if v, ok, err := c.CompareAndSet(ctx, 9, 11); err != nil || ok || v != v0 {
		t.Fatalf("CompareAndSet(9, 11) = %+v, %v, %v; want false and %+v", v, ok, err, v0)
	}
	v1, ok, err := c.TrySet(ctx, v0, 20)
	if err != nil || !ok || v1.Value != 20 || v1.Version != 1 {
		t.Fatalf("TrySet(v0, 20) = %+v, %v, %v", v1, ok, err)
	}
	if v, ok, err := c.TrySet(ctx, v0, 30); err != nil || ok || v != v1 {
		t.Fatalf("TrySet with a stale version = %+v, %v, %v; want false and %+v", v, ok, err, v1)
	}
	if v, ok, err := c.TrySet(ctx, counter.Value[int64]{Version: -1}, 40); err != nil || ok || v != v1 {
		t.Fatalf("TrySet create on an existing node = %+v, %v, %v", v, ok, err)
	}
	if g, _ := c.Get(ctx); g != v1 {
		t.Fatalf("Get = %+v, want %+v", g, v1)
	}
}

// Eight sessions increment one counter 1,000 times each, four of them
// promoted to a lock after a lost race and four optimistic: the total is
// exact, and every increment returned a different value (each won one
// version).
func TestContention(t *testing.T) {
	const sessions, each = 8, 1000
	n := each
	if testing.Short() {
		n = 100
	}
	ns := zktest.NewNamespace(t)
	ctx := ctxT(t)
	var (
		mu   sync.Mutex
		seen = map[int64]bool{}
		wg   sync.WaitGroup
		errs = make(chan error, sessions)
	)
	for i := 0; i < sessions; i++ {
		var opts []counter.Option
		if i%2 == 1 { // half of them take a lock after a lost race; the others stay optimistic
			opts = append(opts, counter.WithPromotion("/counters/lock", 1))
		}
		c := newCounter(t, sessiontest.Connect(t, ns), opts...)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < n; j++ {
				v, err := c.Increment(ctx)
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				dup := seen[v.Value]
				seen[v.Value] = true
				mu.Unlock()
				if dup {
					errs <- errors.New("two increments returned the same value")
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	c := newCounter(t, sessiontest.Connect(t, ns))
	v, err := c.Get(ctx)
	if err != nil || v.Value != sessions*int64(n) || len(seen) != sessions*n {
		t.Fatalf("Get = %+v, %v; %d distinct results; want %d", v, err, len(seen), sessions*n)
	}
}

// An Add past the range fails with ErrOverflow and writes nothing, at both
// ends and for both widths.
func TestOverflow(t *testing.T) {
	ns := zktest.NewNamespace(t)
	ctx := ctxT(t)
	s := sessiontest.Connect(t, ns)
	c := newCounter(t, s)
	v, ok, err := c.TrySet(ctx, counter.Value[int64]{Version: -1}, math.MaxInt64)
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	if _, err := c.Increment(ctx); !errors.Is(err, counter.ErrOverflow) {
		t.Fatalf("Increment at MaxInt64 = %v, want ErrOverflow", err)
	}
	if _, err := c.Add(ctx, -1); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := c.TrySet(ctx, mustGet(t, c), math.MinInt64); err != nil || !ok {
		t.Fatal(ok, err)
	}
	if _, err := c.Add(ctx, -2); !errors.Is(err, counter.ErrOverflow) {
		t.Fatalf("Add(-2) at MinInt64 = %v, want ErrOverflow", err)
	}
	if g := mustGet(t, c); g.Value != math.MinInt64 || g.Version != v.Version+2 {
		t.Fatalf("after the overflows Get = %+v", g)
	}

	c32, err := counter.New32(s, "/counters/32")
	if err != nil {
		t.Fatal(err)
	}
	defer c32.Close()
	if _, err := c32.Add(ctx, math.MaxInt32); err != nil {
		t.Fatal(err)
	}
	if _, err := c32.Increment(ctx); !errors.Is(err, counter.ErrOverflow) {
		t.Fatalf("32-bit Increment at MaxInt32 = %v, want ErrOverflow", err)
	}
	if g, err := c32.Get(ctx); err != nil || g.Value != math.MaxInt32 {
		t.Fatalf("32-bit Get = %+v, %v", g, err)
	}
}

func mustGet(t *testing.T, c *counter.Counter[int64]) counter.Value[int64] {
	t.Helper()
	v, err := c.Get(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// Foreign data of the wrong length is ErrBadData for every call, and is
// left as it is; empty data reads as 0, as Curator reads it; a 32-bit
// counter's node is foreign to a 64-bit counter and the other way round.
func TestBadData(t *testing.T) {
	ns := zktest.NewNamespace(t)
	raw := ns.Conn(t)
	ctx := ctxT(t)
	s := sessiontest.Connect(t, ns)
	c := newCounter(t, s)
	if _, err := raw.Create(ns.Path("/counters"), nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Create(ns.Path(cpath), []byte("abc"), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Get(ctx); !errors.Is(err, counter.ErrBadData) {
		t.Fatalf("Get = %v, want ErrBadData", err)
	}
	if _, err := c.Increment(ctx); !errors.Is(err, counter.ErrBadData) {
		t.Fatalf("Increment = %v, want ErrBadData", err)
	}
	if _, _, err := c.CompareAndSet(ctx, 0, 1); !errors.Is(err, counter.ErrBadData) {
		t.Fatalf("CompareAndSet = %v, want ErrBadData", err)
	}
	if data, _, _ := raw.Get(ns.Path(cpath)); string(data) != "abc" {
		t.Fatalf("node data changed to %q", data)
	}
	if _, err := raw.Set(ns.Path(cpath), nil, -1); err != nil {
		t.Fatal(err)
	}
	if v, err := c.Increment(ctx); err != nil || v.Value != 1 {
		t.Fatalf("Increment of empty data = %+v, %v", v, err)
	}
	c32, err := counter.New32(s, cpath)
	if err != nil {
		t.Fatal(err)
	}
	defer c32.Close()
	if _, err := c32.Get(ctx); !errors.Is(err, counter.ErrBadData) || !strings.Contains(err.Error(), `counter "/counters/a"`) || !strings.Contains(err.Error(), "8 bytes") {
		t.Fatalf("32-bit Get of a 64-bit node = %v, want ErrBadData naming the path and length", err)
	}
}

// Bad input fails at once with ErrBadArgument; calls after Close fail with
// ErrClosed; Close is idempotent.
func TestBadInputAndClose(t *testing.T) {
	ns := zktest.NewNamespace(t)
	ctx := ctxT(t)
	s := sessiontest.Connect(t, ns)
	for _, tc := range []struct {
		name string
		f    func() error
	}{
		{"nil session", func() error { _, err := counter.New(nil, cpath); return err }},
		{"empty path", func() error { _, err := counter.New(s, ""); return err }},
		{"relative path", func() error { _, err := counter.New32(s, "a/b"); return err }},
		{"root", func() error { _, err := counter.New(s, "/"); return err }},
		{"nil option", func() error { _, err := counter.New(s, cpath, nil); return err }},
		{"nil logger", func() error { _, err := counter.New(s, cpath, counter.WithLogger(nil)); return err }},
		{"nil retry", func() error { _, err := counter.New(s, cpath, counter.WithRetry(nil)); return err }},
		{"promotion 0", func() error { _, err := counter.New(s, cpath, counter.WithPromotion("/l", 0)); return err }},
		{"promotion empty", func() error { _, err := counter.New(s, cpath, counter.WithPromotion("", 1)); return err }},
		{"promotion bad path", func() error { _, err := counter.New(s, cpath, counter.WithPromotion("l/", 1)); return err }},
		{"promotion same path", func() error { _, err := counter.New(s, cpath, counter.WithPromotion(cpath, 1)); return err }},
		{"nil ctx", func() error {
			c := newCounter(t, s)
			_, err := c.Get(nil) //nolint:staticcheck // the case under test
			return err
		}},
		{"bad version", func() error {
			c := newCounter(t, s)
			_, _, err := c.TrySet(ctx, counter.Value[int64]{Version: -2}, 1)
			return err
		}},
	} {
		if err := tc.f(); !errors.Is(err, session.ErrBadArgument) || !strings.Contains(err.Error(), "counter") {
			t.Errorf("%s: %v, want ErrBadArgument naming the counter", tc.name, err)
		}
	}
	c := newCounter(t, s)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Increment(ctx); !errors.Is(err, session.ErrClosed) {
		t.Fatalf("Increment after Close = %v, want ErrClosed", err)
	}
	if _, err := c.Get(ctx); !errors.Is(err, session.ErrClosed) {
		t.Fatalf("Get after Close = %v, want ErrClosed", err)
	}
}

// An uncontended change costs two requests (a read and a conditional
// write) and sets no watch; the first creates the node, and its parents,
// which are containers: the server reaps them once the counter is deleted.
func TestCostsAndContainers(t *testing.T) {
	ns := zktest.NewNamespace(t)
	raw := ns.Conn(t)
	ctx := ctxT(t)
	s, tap := sessiontest.ConnectTap(t, ns)
	c, err := counter.New(s, "/deep/er/count")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Increment(ctx); err != nil {
		t.Fatal(err)
	}
	before := tap.Requests()
	for i := 0; i < 10; i++ {
		if _, err := c.Increment(ctx); err != nil {
			t.Fatal(err)
		}
	}
	after := tap.Requests()
	var total int64
	for op, n := range after {
		total += n - before[op]
	}
	if got := after[zktest.OpGetData] - before[zktest.OpGetData]; total != 20 || got != 10 {
		t.Fatalf("10 increments sent %d requests (%d reads), want 20 (10)", total, got)
	}
	if n := sessiontest.TapWatches(tap); n != 0 {
		t.Fatalf("%d watches, want none", n)
	}
	if err := raw.Delete(ns.Path("/deep/er/count"), -1); err != nil {
		t.Fatal(err)
	}
	zktest.Eventually(t, wait, func() bool {
		ok, _, err := raw.Exists(ns.Path("/deep"))
		return err == nil && !ok
	}, "the server reaps the empty parent containers")
}
