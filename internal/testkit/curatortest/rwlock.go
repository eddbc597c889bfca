package curatortest

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"
)

// RWLockProgram is CuratorRWLock.java: an InterProcessReadWriteLock
// contender.
const RWLockProgram Program = "CuratorRWLock"

// RWLock drives a CuratorRWLock program: one Curator client holding one
// InterProcessReadWriteLock on one full server path. Its commands run one at
// a time on one Java thread (Curator's locks belong to a thread, so a read
// taken while that thread holds the write lock is Curator's downgrade);
// Participants is answered at once.
type RWLock struct {
	*Process
	// Path is the lock path (full server path).
	Path string
	// Data is the lock data stored in every node (the participant id).
	Data string
}

// RWNode is a node the Java side reported holding.
type RWNode struct {
	Node
	// Write reports the write side.
	Write bool
}

// StartRWLock starts a CuratorRWLock contender on the full server path with
// the given lock data (no white space) and waits until its Curator client is
// connected (READY). It fails the test on error, so it must be called from
// the test's goroutine.
func StartRWLock(t testing.TB, servers []string, path, data string, opts ...Option) *RWLock {
	t.Helper()
	if data == "" || strings.ContainsAny(data, " \t\r\n") {
		t.Fatalf("curatortest: lock data %q must be non-empty without white space", data)
	}
	c := buildConfig(t, opts)
	p := Start(t, RWLockProgram, strings.Join(servers, ","), path, data, msText(c.sessionTimeout))
	ctx, cancel := context.WithTimeout(context.Background(), ReadyTimeout)
	defer cancel()
	if _, err := p.Expect(ctx, "READY"); err != nil {
		t.Fatal(err)
	}
	return &RWLock{Process: p, Path: path, Data: data}
}

func sideWord(write bool) string {
	if write {
		return "write"
	}
	return "read"
}

// Acquire acquires one side, blocking until held or ctx ends (on the Go
// side: the Java acquire goes on, and its ACQUIRED line stays for
// WaitAcquired).
func (l *RWLock) Acquire(ctx context.Context, write bool) (RWNode, error) {
	if err := l.BeginAcquire(write); err != nil {
		return RWNode{}, err
	}
	return l.WaitAcquired(ctx)
}

// BeginAcquire asks the Java side to acquire one side and returns at once.
func (l *RWLock) BeginAcquire(write bool) error { return l.Send(sideWord(write)) }

// WaitAcquired waits for the next ACQUIRED line.
func (l *RWLock) WaitAcquired(ctx context.Context) (RWNode, error) {
	line, err := l.Expect(ctx, "ACQUIRED")
	if err != nil {
		return RWNode{}, err
	}
	f := line.Fields()
	if len(f) != 4 {
		return RWNode{}, fmt.Errorf("curatortest: %s: bad line %q", l.name, line.Text)
	}
	n, err := parseNode(l.Process, Line{Text: f[0] + " " + f[2] + " " + f[3], At: line.At})
	return RWNode{Node: n, Write: f[1] == "WRITE"}, err
}

// TryAcquire runs Curator's acquire(wait) on one side: ok == false when the
// side was not held within wait (Curator deletes its node before returning).
func (l *RWLock) TryAcquire(ctx context.Context, write bool, wait time.Duration) (n RWNode, ok bool, err error) {
	if err := l.Send(sideWord(write) + " " + msText(wait)); err != nil {
		return RWNode{}, false, err
	}
	line, err := l.ExpectAny(ctx, "ACQUIRED", "TIMEOUT")
	if err != nil {
		return RWNode{}, false, err
	}
	if line.Word() == "TIMEOUT" {
		return RWNode{}, false, nil
	}
	f := line.Fields()
	if len(f) != 4 {
		return RWNode{}, false, fmt.Errorf("curatortest: %s: bad line %q", l.name, line.Text)
	}
	nd, err := parseNode(l.Process, Line{Text: f[0] + " " + f[2] + " " + f[3], At: line.At})
	return RWNode{Node: nd, Write: f[1] == "WRITE"}, err == nil, err
}

// Release releases one hold of one side.
func (l *RWLock) Release(ctx context.Context, write bool) error {
	_, err := l.Call(ctx, "release "+sideWord(write), "RELEASED")
	return err
}

// Participants returns the names of every read and write node of the lock
// in Curator's order. It is answered even while an acquire waits.
func (l *RWLock) Participants(ctx context.Context) ([]string, error) {
	line, err := l.Call(ctx, "participants", "PARTICIPANTS")
	if err != nil {
		return nil, err
	}
	f := line.Fields()
	if len(f) < 2 {
		return nil, fmt.Errorf("curatortest: %s: bad line %q", l.name, line.Text)
	}
	return f[2:], nil
}

// Writes reports whether round k of client c of the mixed workload writes:
// (k+3c) mod 5 == 0, the rule of BeginCycles and Bench.
func Writes(k, c int) bool { return ((k+3*c)%5+5)%5 == 0 }

// BeginCycles starts n mixed rounds as client number c on the decimal
// counter at counterPath (a full server path) and returns at once: round k
// writes iff Writes(k, c); a write reads the counter v, sets it to
// "writing", then to v+1 (version -1); a read reads it and counts a
// violation if it is not a number. WaitCycles returns the counts.
func (l *RWLock) BeginCycles(n int, counterPath string, c int) error {
	return l.Send(fmt.Sprintf("cycles %d %s %d", n, counterPath, c))
}

// WaitCycles waits for the COUNT line that ends a cycles run.
func (l *RWLock) WaitCycles(ctx context.Context) (writes, reads, violations int, err error) {
	line, err := l.Expect(ctx, "COUNT")
	if err != nil {
		return 0, 0, 0, err
	}
	f := line.Fields()
	if len(f) != 4 {
		return 0, 0, 0, fmt.Errorf("curatortest: %s: bad line %q", l.name, line.Text)
	}
	var v [3]int
	for i := range v {
		if v[i], err = strconv.Atoi(f[i+1]); err != nil {
			return 0, 0, 0, fmt.Errorf("curatortest: %s: bad line %q: %w", l.name, line.Text, err)
		}
	}
	return v[0], v[1], v[2], nil
}

// RWLockBenchResult is Curator's side of the mixed benchmark.
type RWLockBenchResult struct {
	// Ops is the number of lock cycles, Elapsed their wall time.
	Ops     int
	Elapsed time.Duration
	// Reads and Writes count the cycles of each side.
	Reads, Writes int
	// Acquire times (call to held), by side.
	ReadP50, ReadP99, WriteP50, WriteP99 time.Duration
}

// OpsPerSec returns Ops / Elapsed.
func (b RWLockBenchResult) OpsPerSec() float64 { return float64(b.Ops) / b.Elapsed.Seconds() }

// Bench runs the mixed workload on Curator: clients more Curator clients in
// the JVM, one thread each with its own InterProcessReadWriteLock on the
// path; client c0+i runs cycles rounds by the Writes rule, with an empty
// critical section.
func (l *RWLock) Bench(ctx context.Context, clients, cycles, c0 int) (RWLockBenchResult, error) {
	line, err := l.Call(ctx, fmt.Sprintf("bench %d %d %d", clients, cycles, c0), "BENCH")
	if err != nil {
		return RWLockBenchResult{}, err
	}
	f := line.Fields()
	if len(f) != 9 {
		return RWLockBenchResult{}, fmt.Errorf("curatortest: %s: bad line %q", l.name, line.Text)
	}
	var v [8]int64
	for i := range v {
		if v[i], err = strconv.ParseInt(f[i+1], 10, 64); err != nil {
			return RWLockBenchResult{}, fmt.Errorf("curatortest: %s: bad line %q: %w", l.name, line.Text, err)
		}
	}
	us := func(x int64) time.Duration { return time.Duration(x) * time.Microsecond }
	return RWLockBenchResult{
		Ops: int(v[0]), Elapsed: time.Duration(v[1]),
		ReadP50: us(v[2]), ReadP99: us(v[3]), WriteP50: us(v[4]), WriteP99: us(v[5]),
		Reads: int(v[6]), Writes: int(v[7]),
	}, nil
}

// CloseClient closes the Curator client: its session ends and its nodes go
// with it.
func (l *RWLock) CloseClient(ctx context.Context) error {
	_, err := l.Call(ctx, "close", "CLOSED")
	return err
}
