package curatortest

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"
)

// SessionTimeout is the session timeout (and Curator connection timeout) the
// Java programs ask for unless started with WithSessionTimeout: long, so that
// a loaded machine that stalls a JVM for a couple of seconds does not expire
// its session in a test that is not about expiry.
const SessionTimeout = 10 * time.Second

// ShortSessionTimeout is the session timeout for a test that waits for a Java
// program's session to expire (after Kill, the server ends it this long after
// it last heard from the program). Ask for it with WithSessionTimeout.
const ShortSessionTimeout = 2 * time.Second

// Option configures a Java program as it starts (StartMutex, StartLatch,
// StartRWLock, StartSemaphore).
type Option func(*config)

type config struct {
	sessionTimeout time.Duration
}

// WithSessionTimeout makes the program's Curator client ask for session
// timeout d (also its connection timeout) instead of SessionTimeout. The
// start fails the test for d under a millisecond.
func WithSessionTimeout(d time.Duration) Option {
	return func(c *config) { c.sessionTimeout = d }
}

// buildConfig applies opts over the defaults; it fails the test on a bad
// value, so it must be called from the test's goroutine.
func buildConfig(t testing.TB, opts []Option) config {
	t.Helper()
	c := config{sessionTimeout: SessionTimeout}
	for _, o := range opts {
		if o != nil {
			o(&c)
		}
	}
	if c.sessionTimeout < time.Millisecond {
		t.Fatalf("curatortest: session timeout %v: want at least 1ms", c.sessionTimeout)
	}
	return c
}

// Node is a lock node as the Java side reported it.
type Node struct {
	// Name is the node's name (last path segment), "_c_<uuid>-lock-<seq>".
	Name string
	// Seq is the sequence number after the last "lock-".
	Seq int64
	// At is when the Go side read the ACQUIRED line.
	At time.Time
}

// Mutex drives a CuratorMutex program: one Curator client holding one
// InterProcessMutex on one full server path. Its commands run one at a time
// on one Java thread (a Curator mutex belongs to a thread), so a command sent
// while an acquire blocks runs after the acquire returns; Participants is the
// exception: it is answered at once.
type Mutex struct {
	*Process
	// Path is the lock path (full server path).
	Path string
}

// StartMutex starts a CuratorMutex contender on the full server path (a Go
// session's namespace root plus the Go side's path) and waits until its
// Curator client is connected (READY). It fails the test on error, so it must
// be called from the test's goroutine.
func StartMutex(t testing.TB, servers []string, path string, opts ...Option) *Mutex {
	t.Helper()
	c := buildConfig(t, opts)
	p := Start(t, MutexProgram, strings.Join(servers, ","), path, msText(c.sessionTimeout))
	ctx, cancel := context.WithTimeout(context.Background(), ReadyTimeout)
	defer cancel()
	if _, err := p.Expect(ctx, "READY"); err != nil {
		t.Fatal(err)
	}
	return &Mutex{Process: p, Path: path}
}

// Acquire acquires the lock, blocking until held or ctx ends (on the Go side:
// the Java acquire goes on, and its ACQUIRED line stays for WaitAcquired).
func (m *Mutex) Acquire(ctx context.Context) (Node, error) {
	if err := m.BeginAcquire(); err != nil {
		return Node{}, err
	}
	return m.WaitAcquired(ctx)
}

// BeginAcquire asks the Java side to acquire and returns at once; the result
// comes with WaitAcquired.
func (m *Mutex) BeginAcquire() error { return m.Send("acquire") }

// WaitAcquired waits for the next ACQUIRED line.
func (m *Mutex) WaitAcquired(ctx context.Context) (Node, error) {
	l, err := m.Expect(ctx, "ACQUIRED")
	if err != nil {
		return Node{}, err
	}
	return parseNode(m.Process, l)
}

// TryAcquire runs Curator's acquire(wait): it returns ok == false when the
// lock was not held within wait (Curator deletes its node before returning).
func (m *Mutex) TryAcquire(ctx context.Context, wait time.Duration) (n Node, ok bool, err error) {
	if err := m.Send("acquire " + msText(wait)); err != nil {
		return Node{}, false, err
	}
	l, err := m.ExpectAny(ctx, "ACQUIRED", "TIMEOUT")
	if err != nil {
		return Node{}, false, err
	}
	if l.Word() == "TIMEOUT" {
		return Node{}, false, nil
	}
	n, err = parseNode(m.Process, l)
	return n, err == nil, err
}

// Release releases one hold of the lock.
func (m *Mutex) Release(ctx context.Context) error {
	_, err := m.Call(ctx, "release", "RELEASED")
	return err
}

// Participants returns the names of the lock's contender nodes in Curator's
// order (holder first). It is answered even while an acquire waits.
func (m *Mutex) Participants(ctx context.Context) ([]string, error) {
	l, err := m.Call(ctx, "participants", "PARTICIPANTS")
	if err != nil {
		return nil, err
	}
	f := l.Fields()
	if len(f) < 2 {
		return nil, fmt.Errorf("curatortest: %s: bad line %q", m.name, l.Text)
	}
	return f[2:], nil
}

// Cycles runs n rounds of: acquire, read the decimal counter in counterPath
// (a full server path), write counter+1 with version -1, release. It blocks
// until the Java side is done; BeginCycles and WaitCycles split it.
func (m *Mutex) Cycles(ctx context.Context, n int, counterPath string) error {
	if err := m.BeginCycles(n, counterPath); err != nil {
		return err
	}
	return m.WaitCycles(ctx)
}

// BeginCycles starts Cycles and returns at once.
func (m *Mutex) BeginCycles(n int, counterPath string) error {
	return m.Send(fmt.Sprintf("cycles %d %s", n, counterPath))
}

// WaitCycles waits for the COUNT line that ends a Cycles run.
func (m *Mutex) WaitCycles(ctx context.Context) error {
	_, err := m.Expect(ctx, "COUNT")
	return err
}

// Bench runs n rounds of acquire and release of the (free) lock on the Java
// side and returns how long they took together.
func (m *Mutex) Bench(ctx context.Context, n int) (time.Duration, error) {
	line, err := m.Call(ctx, fmt.Sprintf("bench %d", n), "BENCH")
	if err != nil {
		return 0, err
	}
	f := line.Fields()
	if len(f) != 3 {
		return 0, fmt.Errorf("curatortest: %s: bad line %q", m.name, line.Text)
	}
	ns, err := strconv.ParseInt(f[2], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("curatortest: %s: bad line %q: %w", m.name, line.Text, err)
	}
	return time.Duration(ns), nil
}

// CloseClient closes the Curator client: its session ends and a held lock's
// node goes with it.
func (m *Mutex) CloseClient(ctx context.Context) error {
	_, err := m.Call(ctx, "close", "CLOSED")
	return err
}

func parseNode(p *Process, l Line) (Node, error) {
	f := l.Fields()
	if len(f) != 3 {
		return Node{}, fmt.Errorf("curatortest: %s: bad line %q", p.name, l.Text)
	}
	seq, err := strconv.ParseInt(f[2], 10, 64)
	if err != nil {
		return Node{}, fmt.Errorf("curatortest: %s: bad line %q: %w", p.name, l.Text, err)
	}
	return Node{Name: f[1], Seq: seq, At: l.At}, nil
}

// Latch drives a CuratorLatch program: one Curator client with one LeaderLatch
// (close mode NOTIFY_LEADER) on one full server path.
type Latch struct {
	*Process
	// Path is the latch path (full server path).
	Path string
	// ID is the participant id (the latch node's data).
	ID string
}

// StartLatch starts a CuratorLatch participant with the given id (no white
// space) on the full server path and waits until its Curator client is
// connected (READY). The latch is not started: call Start. It fails the test
// on error, so it must be called from the test's goroutine.
func StartLatch(t testing.TB, servers []string, path, id string, opts ...Option) *Latch {
	t.Helper()
	if id == "" || strings.ContainsAny(id, " \t\r\n") {
		t.Fatalf("curatortest: latch id %q must be non-empty without white space", id)
	}
	c := buildConfig(t, opts)
	p := Start(t, LatchProgram, strings.Join(servers, ","), path, id, msText(c.sessionTimeout))
	ctx, cancel := context.WithTimeout(context.Background(), ReadyTimeout)
	defer cancel()
	if _, err := p.Expect(ctx, "READY"); err != nil {
		t.Fatal(err)
	}
	return &Latch{Process: p, Path: path, ID: id}
}

// Start starts the latch (joins the election) and waits for STARTED. Curator
// creates the latch node in the background: the LEADER line, if any, comes
// later (WaitLeader).
func (l *Latch) Start(ctx context.Context) error {
	_, err := l.Call(ctx, "start", "STARTED")
	return err
}

// WaitLeader waits for the next "LEADER <ourPath>" transition and returns it.
func (l *Latch) WaitLeader(ctx context.Context) (Line, error) { return l.Expect(ctx, "LEADER") }

// WaitNotLeader waits for the next "NOTLEADER" transition.
func (l *Latch) WaitNotLeader(ctx context.Context) (Line, error) { return l.Expect(ctx, "NOTLEADER") }

// Status asks LeaderLatch.hasLeadership and getOurPath ("" before the node
// exists).
func (l *Latch) Status(ctx context.Context) (leader bool, ourPath string, err error) {
	line, err := l.Call(ctx, "status", "STATUS")
	if err != nil {
		return false, "", err
	}
	f := line.Fields()
	if len(f) != 3 {
		return false, "", fmt.Errorf("curatortest: %s: bad line %q", l.name, line.Text)
	}
	if f[2] != "-" {
		ourPath = f[2]
	}
	return f[1] == "LEADER", ourPath, nil
}

// Participants asks LeaderLatch.getLeader and getParticipants: the leader's
// id ("" when there is none) and every participant's id in node order.
func (l *Latch) Participants(ctx context.Context) (leader string, ids []string, err error) {
	line, err := l.Call(ctx, "participants", "PARTICIPANTS")
	if err != nil {
		return "", nil, err
	}
	f := line.Fields()
	if len(f) < 2 {
		return "", nil, fmt.Errorf("curatortest: %s: bad line %q", l.name, line.Text)
	}
	if f[1] != "-" {
		leader = f[1]
	}
	return leader, f[2:], nil
}

// Close closes the latch (LeaderLatch.close with NOTIFY_LEADER: a leader
// prints NOTLEADER before CLOSED) and waits for CLOSED. Curator deletes the
// node in the background, so another participant may lead slightly after
// Close returns.
func (l *Latch) Close(ctx context.Context) error {
	_, err := l.Call(ctx, "close", "CLOSED")
	return err
}

// Transitions returns every LEADER and NOTLEADER line printed so far, taken or
// not, in order, with the time the Go side read each.
func (l *Latch) Transitions() []Line {
	var out []Line
	for _, line := range l.Lines() {
		if w := line.Word(); w == "LEADER" || w == "NOTLEADER" {
			out = append(out, line)
		}
	}
	return out
}

func msText(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) }
