package curatortest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Program names one of the Java programs shipped in internal/curatortest/java.
type Program string

// The programs.
const (
	// MutexProgram is CuratorMutex.java: an InterProcessMutex contender.
	MutexProgram Program = "CuratorMutex"
	// LatchProgram is CuratorLatch.java: a LeaderLatch participant.
	LatchProgram Program = "CuratorLatch"
)

// errNoSuchProgram is returned for a Program with no embedded source.
var errNoSuchProgram = errors.New("curatortest: no such program")

// Timeouts used by the helpers that wait on their own.
const (
	// ReadyTimeout bounds JVM start plus the Curator client's connect.
	ReadyTimeout = 30 * time.Second
	// quitTimeout bounds the graceful exit at cleanup (closing the Curator
	// client ends its session at once) before the process group is killed.
	quitTimeout = 5 * time.Second
)

// jvmFlags make a small client JVM start fast and stay small.
var jvmFlags = []string{
	"-Xshare:auto",
	"-XX:+UseSerialGC",
	"-XX:TieredStopAtLevel=1",
	"-XX:-UsePerfData",
	"-Xms16m",
	"-Xmx128m",
	"-Djava.awt.headless=true",
	"-Djava.net.preferIPv4Stack=true",
	"-Dorg.slf4j.simpleLogger.showDateTime=true",
	"-Dorg.slf4j.simpleLogger.dateTimeFormat=HH:mm:ss.SSS",
	"-Dorg.slf4j.simpleLogger.log.org.apache.zookeeper=warn",
}

// Line is one line the program printed on stdout.
type Line struct {
	// Text is the line without its newline.
	Text string
	// At is when the Go side read it.
	At time.Time
}

// Fields splits the line on white space.
func (l Line) Fields() []string { return strings.Fields(l.Text) }

// Word returns the line's first word ("ACQUIRED", "LEADER", "ERR", ...).
func (l Line) Word() string {
	if f := l.Fields(); len(f) > 0 {
		return f[0]
	}
	return ""
}

// String returns the text.
func (l Line) String() string { return l.Text }

// Process is a running Java program. Lines it prints are kept in order; Expect
// takes them out by their first words. Commands go to its stdin with Send.
//
// A Process is safe for concurrent use, but Expect takes lines out of one
// shared record: let one goroutine (the test's) do the expecting.
type Process struct {
	name string // "CuratorMutex#3", for messages

	stdinMu sync.Mutex
	stdin   io.WriteCloser

	pid     int
	exited  chan struct{} // closed when the JVM has exited and been reaped
	exitErr error         // valid after exited is closed
	stderr  *tailBuffer

	mu      sync.Mutex
	lines   []Line
	taken   []bool
	first   int           // lines before first are all taken
	changed chan struct{} // closed and replaced when a line arrives
	partial []byte

	killOnce sync.Once
}

var procCount struct {
	sync.Mutex
	n int
}

// Start compiles the programs (once per test binary) and starts prog with
// args as a child process of the test. It fails the test with an error naming
// InstallCommand when java, javac or Curator is missing. It does not wait for
// the program's READY line (see StartMutex and StartLatch, which do).
//
// The JVM runs in its own process group with a parent-death signal, so it dies
// with the test binary; at t.Cleanup its stdin is closed (the programs then
// close their Curator client, ending the session at once, and exit) and after a
// few seconds the group is killed. When the test failed, the cleanup logs the
// program's last stdout lines and the tail of its stderr.
//
// Start must be called from the test's goroutine.
func Start(t testing.TB, prog Program, args ...string) *Process {
	t.Helper()
	p, err := start(prog, args...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// A slow or failed quit is logged, not failed: a test may have
		// stopped the server, and the Curator client's close then waits.
		if err := p.quit(); err != nil || t.Failed() {
			t.Logf("%s (pid %d): %s; quit: %v\n--- stdout tail:\n%s\n--- stderr tail:\n%s",
				p.name, p.pid, p.describeExit(), err, p.linesTail(40), p.stderr.tail(60))
		}
	})
	return p
}

func start(prog Program, args ...string) (*Process, error) {
	if _, err := sources.ReadFile("java/" + string(prog) + ".java"); err != nil {
		return nil, fmt.Errorf("%w: %q", errNoSuchProgram, prog)
	}
	inst, classes, err := compiled()
	if err != nil {
		return nil, err
	}
	procCount.Lock()
	procCount.n++
	n := procCount.n
	procCount.Unlock()

	p := &Process{
		name:    fmt.Sprintf("%s#%d", prog, n),
		exited:  make(chan struct{}),
		stderr:  newTailBuffer(64 << 10),
		changed: make(chan struct{}),
	}
	jargs := append(append([]string(nil), jvmFlags...), "-cp", inst.classpath(classes), string(prog))
	cmd := exec.Command(inst.Java, append(jargs, args...)...)
	cmd.Stdout = lineWriter{p}
	cmd.Stderr = p.stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	// The JVM starts no children of its own; WaitDelay only guards against
	// one keeping the output pipes open after the JVM is gone.
	cmd.WaitDelay = 2 * time.Second
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("curatortest: %w", err)
	}
	p.stdin = stdin

	// Linux delivers the parent-death signal when the thread that started
	// the child exits, not the process. So the child is started from a
	// goroutine locked to its OS thread that lives exactly as long as the
	// child (it waits for it); the thread goes away only after the child.
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: see above
		if err := cmd.Start(); err != nil {
			p.exitErr = err
			close(p.exited)
			started <- err
			return
		}
		p.pid = cmd.Process.Pid
		started <- nil
		p.exitErr = cmd.Wait()
		p.mu.Lock()
		if len(p.partial) > 0 {
			p.addLocked(string(p.partial))
			p.partial = nil
		}
		p.mu.Unlock()
		close(p.exited)
	}()
	if err := <-started; err != nil {
		return nil, fmt.Errorf("curatortest: start %s: %w", inst.Java, err)
	}
	return p, nil
}

// Name returns the program's name and a per-test-binary number, for messages.
func (p *Process) Name() string { return p.name }

// Pid returns the JVM's process id (also its process group id).
func (p *Process) Pid() int { return p.pid }

// Exited is closed when the JVM has exited.
func (p *Process) Exited() <-chan struct{} { return p.exited }

// Send writes one command line to the program's stdin.
func (p *Process) Send(command string) error {
	if strings.ContainsAny(command, "\r\n") {
		return fmt.Errorf("curatortest: %s: command %q holds a newline", p.name, command)
	}
	select {
	case <-p.exited:
		return fmt.Errorf("curatortest: %s: send %q: %s", p.name, command, p.describeExit())
	default:
	}
	p.stdinMu.Lock()
	defer p.stdinMu.Unlock()
	if _, err := io.WriteString(p.stdin, command+"\n"); err != nil {
		return fmt.Errorf("curatortest: %s: send %q: %w", p.name, command, err)
	}
	return nil
}

// Expect waits for the earliest line not yet taken whose text is prefix or
// starts with prefix followed by a space (so "LEADER" does not match
// "LEADERS" and "STATUS LEADER" matches "STATUS LEADER /x"), takes it and
// returns it. Lines it passes over stay for later calls. An "ERR" line not yet
// taken ends the wait with an error (and is taken) unless prefix asks for ERR.
// Expect returns an error when ctx ends or the program exits first; the error
// quotes the last lines.
func (p *Process) Expect(ctx context.Context, prefix string) (Line, error) {
	return p.ExpectAny(ctx, prefix)
}

// ExpectAny is Expect for the earliest line matching any of the prefixes.
func (p *Process) ExpectAny(ctx context.Context, prefixes ...string) (Line, error) {
	wantErr := false
	for _, prefix := range prefixes {
		wantErr = wantErr || prefix == "ERR" || strings.HasPrefix(prefix, "ERR ")
	}
	matches := func(text string) bool {
		for _, prefix := range prefixes {
			if text == prefix || strings.HasPrefix(text, prefix+" ") {
				return true
			}
		}
		return false
	}
	exited := false
	for {
		p.mu.Lock()
		for i := p.first; i < len(p.lines); i++ {
			if p.taken[i] {
				continue
			}
			l := p.lines[i]
			if matches(l.Text) {
				p.takeLocked(i)
				p.mu.Unlock()
				return l, nil
			}
			if !wantErr && l.Word() == "ERR" {
				p.takeLocked(i)
				p.mu.Unlock()
				return l, fmt.Errorf("curatortest: %s: waiting for %q: got %q", p.name, prefixes, l.Text)
			}
		}
		changed := p.changed
		p.mu.Unlock()
		if exited {
			return Line{}, fmt.Errorf("curatortest: %s: waiting for %q: %s; last lines:\n%s", p.name, prefixes, p.describeExit(), p.linesTail(10))
		}
		select {
		case <-changed:
		case <-p.exited:
			exited = true // scan the last lines once more
		case <-ctx.Done():
			return Line{}, fmt.Errorf("curatortest: %s: waiting for %q: %w; last lines:\n%s", p.name, prefixes, ctx.Err(), p.linesTail(10))
		}
	}
}

// Call sends command and expects a line starting with reply (see Expect).
func (p *Process) Call(ctx context.Context, command, reply string) (Line, error) {
	if err := p.Send(command); err != nil {
		return Line{}, err
	}
	return p.Expect(ctx, reply)
}

// Lines returns every line printed so far, taken or not, in order.
func (p *Process) Lines() []Line {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Line(nil), p.lines...)
}

// Stderr returns the last n lines the program wrote to stderr (Curator's and
// ZooKeeper's log).
func (p *Process) Stderr(n int) string { return p.stderr.tail(n) }

// Kill kills the program's process group with SIGKILL and waits for it to
// exit. Its ZooKeeper session is not closed: the server expires it after the
// session timeout. Kill is idempotent; Start's cleanup calls it too.
func (p *Process) Kill() {
	p.killOnce.Do(func() {
		select {
		case <-p.exited:
			return
		default:
		}
		if err := syscall.Kill(-p.pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
			_ = syscall.Kill(p.pid, syscall.SIGKILL)
		}
	})
	<-p.exited
}

// quit closes stdin (the programs close their Curator client and exit) and
// waits up to quitTimeout, then kills. It returns an error when the program
// had to be killed or its exit status was not 0 after a graceful quit.
func (p *Process) quit() error {
	select {
	case <-p.exited:
		return nil // exited before (killed by the test, or crashed: logged by the caller on failure)
	default:
	}
	p.stdinMu.Lock()
	_ = p.stdin.Close()
	p.stdinMu.Unlock()
	timer := time.NewTimer(quitTimeout)
	defer timer.Stop()
	select {
	case <-p.exited:
		if p.exitErr != nil {
			return fmt.Errorf("exit after end of input: %w", p.exitErr)
		}
		return nil
	case <-timer.C:
		p.Kill()
		return fmt.Errorf("did not exit within %v of end of input; killed", quitTimeout)
	}
}

func (p *Process) describeExit() string {
	select {
	case <-p.exited:
		if p.exitErr == nil {
			return "exited with status 0"
		}
		return "exited: " + p.exitErr.Error()
	default:
		return "running"
	}
}

func (p *Process) linesTail(n int) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	ls := p.lines
	if len(ls) > n {
		ls = ls[len(ls)-n:]
	}
	var b strings.Builder
	for _, l := range ls {
		fmt.Fprintf(&b, "  %s %s\n", l.At.Format("15:04:05.000"), l.Text)
	}
	return strings.TrimRight(b.String(), "\n")
}

func (p *Process) takeLocked(i int) {
	p.taken[i] = true
	for p.first < len(p.taken) && p.taken[p.first] {
		p.first++
	}
}

func (p *Process) addLocked(text string) {
	p.lines = append(p.lines, Line{Text: strings.TrimRight(text, "\r"), At: time.Now()})
	p.taken = append(p.taken, false)
	close(p.changed)
	p.changed = make(chan struct{})
}

// lineWriter receives the program's stdout (from os/exec's copying goroutine,
// which Wait joins) and splits it into lines.
type lineWriter struct{ p *Process }

func (w lineWriter) Write(b []byte) (int, error) {
	p := w.p
	p.mu.Lock()
	defer p.mu.Unlock()
	p.partial = append(p.partial, b...)
	for {
		i := bytes.IndexByte(p.partial, '\n')
		if i < 0 {
			break
		}
		p.addLocked(string(p.partial[:i]))
		p.partial = p.partial[i+1:]
	}
	return len(b), nil
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func newTailBuffer(max int) *tailBuffer { return &tailBuffer{max: max} }

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if over := len(b.buf) - b.max; over > 0 {
		b.buf = append(b.buf[:0:0], b.buf[over:]...)
	}
	return len(p), nil
}

// tail returns the last n lines.
func (b *tailBuffer) tail(n int) string {
	b.mu.Lock()
	s := strings.TrimRight(string(b.buf), "\n")
	b.mu.Unlock()
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
