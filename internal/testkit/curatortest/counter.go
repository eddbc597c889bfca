package curatortest

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"
)

// CounterProgram is CuratorCounter.java: a DistributedAtomicLong or
// DistributedAtomicInteger client.
const CounterProgram Program = "CuratorCounter"

// Counter drives a CuratorCounter program: one Curator client with one
// atomic value on one full server path. Its commands run one at a time on
// one Java thread.
type Counter struct {
	*Process
	// Path is the counter path (full server path).
	Path string
}

// StartCounter starts a CuratorCounter client on the full server path, a
// DistributedAtomicLong when wide, else a DistributedAtomicInteger, and
// waits until its Curator client is connected (READY). It fails the test on
// error, so it must be called from the test's goroutine.
func StartCounter(t testing.TB, servers []string, path string, wide bool, opts ...Option) *Counter {
	t.Helper()
	width := "int"
	if wide {
		width = "long"
	}
	c := buildConfig(t, opts)
	p := Start(t, CounterProgram, strings.Join(servers, ","), path, width, msText(c.sessionTimeout))
	ctx, cancel := context.WithTimeout(context.Background(), ReadyTimeout)
	defer cancel()
	if _, err := p.Expect(ctx, "READY"); err != nil {
		t.Fatal(err)
	}
	return &Counter{Process: p, Path: path}
}

// BeginAdd asks the Java side to add delta times times (each add retried
// until it succeeds) and returns at once; WaitAdded waits for the result.
func (c *Counter) BeginAdd(delta int64, times int) error {
	return c.Send(fmt.Sprintf("add %d %d", delta, times))
}

// WaitAdded waits for the ADDED line of BeginAdd and returns the last value
// the Java side wrote.
func (c *Counter) WaitAdded(ctx context.Context) (int64, error) {
	l, err := c.Expect(ctx, "ADDED")
	if err != nil {
		return 0, err
	}
	return c.lastInt(l, 3)
}

// Get returns the value as Curator reads it (0 for a missing node).
func (c *Counter) Get(ctx context.Context) (int64, error) {
	l, err := c.Call(ctx, "get", "VALUE")
	if err != nil {
		return 0, err
	}
	return c.lastInt(l, 2)
}

// CompareAndSet runs Curator's compareAndSet(expected, n) and returns
// whether it succeeded.
func (c *Counter) CompareAndSet(ctx context.Context, expected, n int64) (bool, error) {
	l, err := c.Call(ctx, fmt.Sprintf("cas %d %d", expected, n), "CAS")
	if err != nil {
		return false, err
	}
	f := l.Fields()
	if len(f) != 3 {
		return false, fmt.Errorf("curatortest: %s: bad line %q", c.name, l.Text)
	}
	return f[1] == "true", nil
}

// Bench has clients new Curator clients increment the counter n times in
// all, concurrently, and returns how long that took.
func (c *Counter) Bench(ctx context.Context, clients, n int) (time.Duration, error) {
	l, err := c.Call(ctx, fmt.Sprintf("bench %d %d", clients, n), "BENCH")
	if err != nil {
		return 0, err
	}
	ms, err := c.lastInt(l, 3)
	return time.Duration(ms) * time.Millisecond, err
}

func (c *Counter) lastInt(l Line, fields int) (int64, error) {
	f := l.Fields()
	if len(f) != fields {
		return 0, fmt.Errorf("curatortest: %s: bad line %q", c.name, l.Text)
	}
	n, err := strconv.ParseInt(f[fields-1], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("curatortest: %s: bad line %q: %w", c.name, l.Text, err)
	}
	return n, nil
}
