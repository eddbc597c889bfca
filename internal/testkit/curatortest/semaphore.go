package curatortest

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"
)

// SemaphoreProgram is CuratorSemaphore.java: an InterProcessSemaphoreV2 (fixed
// maximum or SharedCount) or InterProcessSemaphoreMutex participant.
const SemaphoreProgram Program = "CuratorSemaphore"

// SemaphoreMode selects what a CuratorSemaphore program runs.
type SemaphoreMode string

// The modes.
const (
	// ModeMax is InterProcessSemaphoreV2 with a fixed maximum (the argument).
	ModeMax SemaphoreMode = "max"
	// ModeCount is InterProcessSemaphoreV2 whose maximum is a started
	// SharedCount (the argument is the count's full server path; its seed is
	// 1). Count changes print "CHANGED <n>" lines.
	ModeCount SemaphoreMode = "count"
	// ModeMutex is InterProcessSemaphoreMutex (no argument).
	ModeMutex SemaphoreMode = "mutex"
)

// Semaphore drives a CuratorSemaphore program: one Curator client with one
// InterProcessSemaphoreV2 or InterProcessSemaphoreMutex on one full server
// path. Its commands run one at a time on one Java thread, so a command sent
// while an acquire blocks runs after the acquire returns; Participants is the
// exception: it is answered at once.
type Semaphore struct {
	*Process
	// Path is the semaphore path (full server path).
	Path string
}

// StartSemaphore starts a CuratorSemaphore participant on the full server
// path in the given mode (arg: the maximum for ModeMax, the count's full
// server path for ModeCount, ignored for ModeMutex) and waits until its
// Curator client is connected (READY). It fails the test on error, so it must
// be called from the test's goroutine.
func StartSemaphore(t testing.TB, servers []string, path string, mode SemaphoreMode, arg string, opts ...Option) *Semaphore {
	t.Helper()
	if arg == "" {
		arg = "-"
	}
	c := buildConfig(t, opts)
	p := Start(t, SemaphoreProgram, strings.Join(servers, ","), path, string(mode), arg, msText(c.sessionTimeout))
	ctx, cancel := context.WithTimeout(context.Background(), ReadyTimeout)
	defer cancel()
	if _, err := p.Expect(ctx, "READY"); err != nil {
		t.Fatal(err)
	}
	return &Semaphore{Process: p, Path: path}
}

// Acquire takes n leases (the mutex: n is 1), blocking until held or ctx
// ends (on the Go side: the Java acquire goes on, and its ACQUIRED line stays
// for WaitAcquired). It returns the lease node names ("-" for the mutex).
func (s *Semaphore) Acquire(ctx context.Context, n int) ([]string, error) {
	if err := s.BeginAcquire(n); err != nil {
		return nil, err
	}
	return s.WaitAcquired(ctx)
}

// BeginAcquire asks the Java side to take n leases and returns at once; the
// result comes with WaitAcquired.
func (s *Semaphore) BeginAcquire(n int) error { return s.Send(fmt.Sprintf("acquire %d", n)) }

// WaitAcquired waits for the next ACQUIRED line and returns its node names.
func (s *Semaphore) WaitAcquired(ctx context.Context) ([]string, error) {
	l, err := s.Expect(ctx, "ACQUIRED")
	if err != nil {
		return nil, err
	}
	return parseAcquired(s.Process, l)
}

// TryAcquire runs Curator's acquire(n, wait): ok is false when the leases
// were not held within wait (Curator then holds none of them).
func (s *Semaphore) TryAcquire(ctx context.Context, n int, wait time.Duration) (nodes []string, ok bool, err error) {
	if err := s.Send(fmt.Sprintf("acquire %d %s", n, msText(wait))); err != nil {
		return nil, false, err
	}
	l, err := s.ExpectAny(ctx, "ACQUIRED", "TIMEOUT")
	if err != nil {
		return nil, false, err
	}
	if l.Word() == "TIMEOUT" {
		return nil, false, nil
	}
	nodes, err = parseAcquired(s.Process, l)
	return nodes, err == nil, err
}

func parseAcquired(p *Process, l Line) ([]string, error) {
	f := l.Fields()
	if len(f) < 2 {
		return nil, fmt.Errorf("curatortest: %s: bad line %q", p.name, l.Text)
	}
	n, err := strconv.Atoi(f[1])
	if err != nil || len(f) != n+2 {
		return nil, fmt.Errorf("curatortest: %s: bad line %q", p.name, l.Text)
	}
	return f[2:], nil
}

// Release releases the oldest lease held (or the mutex).
func (s *Semaphore) Release(ctx context.Context) error {
	_, err := s.Call(ctx, "release", "RELEASED")
	return err
}

// ReleaseAll releases every lease held and returns how many.
func (s *Semaphore) ReleaseAll(ctx context.Context) (int, error) {
	l, err := s.Call(ctx, "releaseall", "RELEASED")
	if err != nil {
		return 0, err
	}
	f := l.Fields()
	if len(f) != 2 {
		return 0, fmt.Errorf("curatortest: %s: bad line %q", s.name, l.Text)
	}
	return strconv.Atoi(f[1])
}

// Participants returns the names of the lease nodes in sequence order, as
// Curator lists them. It is answered even while an acquire waits.
func (s *Semaphore) Participants(ctx context.Context) ([]string, error) {
	l, err := s.Call(ctx, "participants", "PARTICIPANTS")
	if err != nil {
		return nil, err
	}
	f := l.Fields()
	if len(f) < 2 {
		return nil, fmt.Errorf("curatortest: %s: bad line %q", s.name, l.Text)
	}
	return f[2:], nil
}

// Count returns the SharedCount's value and version as Curator last saw them
// (ModeCount).
func (s *Semaphore) Count(ctx context.Context) (value, version int, err error) {
	return s.twoInts(ctx, "count", "COUNT")
}

// SetCount runs SharedCount.setCount(n) (ModeCount).
func (s *Semaphore) SetCount(ctx context.Context, n int) error {
	_, err := s.Call(ctx, fmt.Sprintf("setcount %d", n), "SETCOUNT")
	return err
}

// Snapshot keeps the SharedCount's versioned value for TrySetCount and
// returns it (ModeCount).
func (s *Semaphore) Snapshot(ctx context.Context) (value, version int, err error) {
	return s.twoInts(ctx, "snapshot", "SNAPSHOT")
}

// TrySetCount runs SharedCount.trySetCount(snapshot, n) (ModeCount).
func (s *Semaphore) TrySetCount(ctx context.Context, n int) (bool, error) {
	l, err := s.Call(ctx, fmt.Sprintf("trysetcount %d", n), "TRYSET")
	if err != nil {
		return false, err
	}
	f := l.Fields()
	if len(f) != 2 {
		return false, fmt.Errorf("curatortest: %s: bad line %q", s.name, l.Text)
	}
	return f[1] == "true", nil
}

// WaitChanged waits for the next "CHANGED <n>" line of the SharedCount's
// listener and returns n (ModeCount).
func (s *Semaphore) WaitChanged(ctx context.Context) (int, error) {
	l, err := s.Expect(ctx, "CHANGED")
	if err != nil {
		return 0, err
	}
	f := l.Fields()
	if len(f) != 2 {
		return 0, fmt.Errorf("curatortest: %s: bad line %q", s.name, l.Text)
	}
	return strconv.Atoi(f[1])
}

func (s *Semaphore) twoInts(ctx context.Context, cmd, word string) (int, int, error) {
	l, err := s.Call(ctx, cmd, word)
	if err != nil {
		return 0, 0, err
	}
	f := l.Fields()
	if len(f) != 3 {
		return 0, 0, fmt.Errorf("curatortest: %s: bad line %q", s.name, l.Text)
	}
	a, err1 := strconv.Atoi(f[1])
	b, err2 := strconv.Atoi(f[2])
	if err1 != nil || err2 != nil {
		return 0, 0, fmt.Errorf("curatortest: %s: bad line %q", s.name, l.Text)
	}
	return a, b, nil
}

// BeginCycles starts n rounds of: acquire one lease (the mutex), add 1 to
// the decimal holders counter at holdersPath by compare-and-set, with a
// counterPath read it and write it + 1 with version -1, hold for hold,
// subtract 1 from holders, release. Both paths are full server paths of
// existing nodes ("" for no counter). WaitCycles returns the highest holders
// value the Java side wrote.
func (s *Semaphore) BeginCycles(n int, hold time.Duration, holdersPath, counterPath string) error {
	return s.Send(strings.TrimSpace(fmt.Sprintf("cycles %d %s %s %s", n, msText(hold), holdersPath, counterPath)))
}

// WaitCycles waits for the CYCLES line that ends a BeginCycles run and
// returns the highest holders value seen.
func (s *Semaphore) WaitCycles(ctx context.Context) (maxSeen int, err error) {
	l, err := s.Expect(ctx, "CYCLES")
	if err != nil {
		return 0, err
	}
	f := l.Fields()
	if len(f) != 3 {
		return 0, fmt.Errorf("curatortest: %s: bad line %q", s.name, l.Text)
	}
	return strconv.Atoi(f[2])
}

// SemaphoreBenchResult is what a Bench run reports.
type SemaphoreBenchResult struct {
	// Acquisitions is the number of leases taken.
	Acquisitions int
	// Elapsed is the run's wall time.
	Elapsed time.Duration
	// WaitP50 and WaitP99 are percentiles of the time from an acquire call to
	// its return.
	WaitP50, WaitP99 time.Duration
	// Peak is the most leases held at once in the Java process.
	Peak int
}

// Bench runs the contended workload with Curator alone: clients new Curator
// clients (sessions), each with an InterProcessSemaphoreV2 of max leases on
// the program's path, take n leases in all, each held for hold. It blocks
// until the Java side is done.
func (s *Semaphore) Bench(ctx context.Context, clients, n int, hold time.Duration, max int) (SemaphoreBenchResult, error) {
	l, err := s.Call(ctx, fmt.Sprintf("bench %d %d %s %d", clients, n, msText(hold), max), "BENCH")
	if err != nil {
		return SemaphoreBenchResult{}, err
	}
	f := l.Fields()
	if len(f) != 6 {
		return SemaphoreBenchResult{}, fmt.Errorf("curatortest: %s: bad line %q", s.name, l.Text)
	}
	var v [5]int64
	for i := range v {
		if v[i], err = strconv.ParseInt(f[i+1], 10, 64); err != nil {
			return SemaphoreBenchResult{}, fmt.Errorf("curatortest: %s: bad line %q", s.name, l.Text)
		}
	}
	return SemaphoreBenchResult{
		Acquisitions: int(v[0]),
		Elapsed:      time.Duration(v[1]) * time.Millisecond,
		WaitP50:      time.Duration(v[2]) * time.Microsecond,
		WaitP99:      time.Duration(v[3]) * time.Microsecond,
		Peak:         int(v[4]),
	}, nil
}

// CloseClient closes the Curator client: its session ends and its nodes go
// with it.
func (s *Semaphore) CloseClient(ctx context.Context) error {
	_, err := s.Call(ctx, "close", "CLOSED")
	return err
}
