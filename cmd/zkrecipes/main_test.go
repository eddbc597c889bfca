package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/zktest"
)

// binPath is the zkrecipes binary the tests run, built by TestMain's runner.
var binPath, buildErr = "", error(nil)

// builder builds the command once before the tests and removes it after.
type builder struct{ m *testing.M }

func (b builder) Run() int {
	dir, err := os.MkdirTemp("", "zkrecipes-test-")
	if err != nil {
		buildErr = err
		return b.m.Run()
	}
	defer os.RemoveAll(dir)
	binPath = filepath.Join(dir, "zkrecipes")
	out, err := exec.Command("go", "build", "-o", binPath, ".").CombinedOutput()
	if err != nil {
		buildErr = fmt.Errorf("go build: %v\n%s", err, out)
	}
	return b.m.Run()
}

func TestMain(m *testing.M) { zktest.Main(builder{m}) }

// waitLong bounds every wait of these tests: generous, for a loaded machine.
const waitLong = 60 * time.Second

// syncBuffer is a bytes.Buffer safe for the writes of a child's output
// while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// proc is one run of the zkrecipes binary.
type proc struct {
	name           string
	cmd            *exec.Cmd
	stdout, stderr syncBuffer
	started        time.Time
	done           chan struct{}
	ended          time.Time
	code           int
}

// start runs the binary with args and the extra environment env; the
// process is stopped (SIGTERM, which it forwards to its job, then SIGKILL)
// in t.Cleanup if it still runs.
func start(t *testing.T, name string, env []string, args ...string) *proc {
	t.Helper()
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	p := &proc{name: name, done: make(chan struct{})}
	p.cmd = exec.Command(binPath, args...)
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Stdout, p.cmd.Stderr = &p.stdout, &p.stderr
	// A process that outlives the command and holds its output open must
	// not keep Wait, and so the test, waiting.
	p.cmd.WaitDelay = 10 * time.Second
	p.started = time.Now()
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		err := p.cmd.Wait()
		p.ended = time.Now()
		p.code = p.cmd.ProcessState.ExitCode()
		if err != nil && !errors.As(err, new(*exec.ExitError)) {
			p.code = -1
		}
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = p.cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-p.done:
			case <-time.After(15 * time.Second):
				_ = p.cmd.Process.Kill()
				<-p.done
			}
		}
		if t.Failed() {
			t.Logf("%s %s: exit %d\nstdout:\n%sstderr:\n%s", p.name, strings.Join(args, " "), p.code, p.stdout.String(), p.stderr.String())
		}
	})
	return p
}

// wait waits for the process to exit and returns its exit code.
func (p *proc) wait(t *testing.T) int {
	t.Helper()
	select {
	case <-p.done:
		return p.code
	case <-time.After(waitLong):
		t.Fatalf("%s still runs after %v\nstderr:\n%s", p.name, waitLong, p.stderr.String())
	}
	return 0
}

// running reports whether the process still runs.
func (p *proc) running() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// runCmd runs the binary to its end and returns its exit code, stdout and
// stderr.
func runCmd(t *testing.T, env []string, args ...string) (int, string, string) {
	t.Helper()
	p := start(t, "zkrecipes", env, args...)
	code := p.wait(t)
	return code, p.stdout.String(), p.stderr.String()
}

// conn returns the connection flags for ns's server.
func conn(ns *zktest.Namespace, sessionTimeout time.Duration) []string {
	return []string{"--servers", strings.Join(ns.Servers(), ","), "--namespace", ns.Root,
		"--session-timeout", sessionTimeout.String()}
}

// args joins flag lists.
func args(parts ...[]string) []string {
	var out []string
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// script writes a shell script into dir and returns its path.
func script(t *testing.T, dir, name, text string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(text), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

// exists reports whether path exists.
func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// readStamp reads a time written by `date +%s.%N` into path.
func readStamp(t *testing.T, path string) time.Time {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return parseStamp(t, strings.TrimSpace(string(b)))
}

func parseStamp(t *testing.T, s string) time.Time {
	t.Helper()
	sec, frac, ok := strings.Cut(s, ".")
	if !ok || len(frac) != 9 {
		t.Fatalf("time stamp %q: want seconds.nanoseconds", s)
	}
	a, err1 := strconv.ParseInt(sec, 10, 64)
	b, err2 := strconv.ParseInt(frac, 10, 64)
	if err1 != nil || err2 != nil {
		t.Fatalf("time stamp %q: %v %v", s, err1, err2)
	}
	return time.Unix(a, b)
}

// readPID reads a process id written into path.
func readPID(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

// alive reports whether process pid exists and is not a zombie.
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// pid (comm) state ...: the state follows the last ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && i+2 < len(s) && s[i+2] != 'Z'
}

// children lists the children of the server path p (none when it is absent).
func children(c *zk.Conn, ns *zktest.Namespace, p string) []string {
	kids, _, err := c.Children(ns.Path(p))
	if err != nil {
		return nil
	}
	return kids
}

// testContext is a context for the waits of one test.
func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*waitLong)
	t.Cleanup(cancel)
	return ctx
}
