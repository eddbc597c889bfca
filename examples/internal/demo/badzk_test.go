package demo

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/zktest"
)

// slack is what a loaded 2-core machine may add to a bound on top of the
// connect timeout.
const slack = 10 * time.Second

// deadAddr returns a loopback address where nothing listens.
func deadAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}

// silentAddr returns the address of a listener that accepts connections and
// never answers (a port that is open but is no ZooKeeper server). Its
// goroutines end in t.Cleanup.
func silentAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, _ = io.Copy(io.Discard, c) // read the handshake, answer nothing
			}()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return l.Addr().String()
}

// runBad runs mainRun with -zk addr and returns its exit code, its stdout and
// stderr, whether run was called and how long it took.
func runBad(t *testing.T, addr string, connectTimeout time.Duration) (code int, stdout, stderr string, called bool, took time.Duration) {
	t.Helper()
	var out, errOut bytes.Buffer
	t0 := time.Now()
	code = mainRun(config{
		name: "demo-test", zk: addr, connectTimeout: connectTimeout, timeout: time.Minute,
		stdout: &out, stderr: &errOut,
	}, func(ctx context.Context, env *Env) error {
		called = true
		return errors.New("run called")
	})
	return code, out.String(), errOut.String(), called, time.Since(t0)
}

// With -zk pointing where nothing listens, the program fails within the
// default connect timeout (plus slack), naming the user's address and the
// dial error, and never starts the example.
func TestBadZKRefused(t *testing.T) {
	addr := deadAddr(t)
	code, stdout, stderr, called, took := runBad(t, addr, 0)
	t.Logf("exit %d after %v\nstdout:\n%sstderr:\n%s", code, took.Round(time.Millisecond), stdout, stderr)
	if code != 1 || called {
		t.Fatalf("exit code %d, run called %v: want 1 and false", code, called)
	}
	if !strings.Contains(stderr, addr) || !strings.Contains(stderr, "connection refused") {
		t.Errorf("stderr does not name %s and the refused dial:\n%s", addr, stderr)
	}
	if !strings.Contains(stdout, addr) {
		t.Errorf("stdout does not say which address it tries:\n%s", stdout)
	}
	if took > DefaultConnectTimeout+slack {
		t.Errorf("took %v, want about -connect-timeout (%v)", took, DefaultConnectTimeout)
	}
}

// With -zk pointing at an open port where no ZooKeeper answers, the program
// fails within -connect-timeout, naming the address and saying that no
// session came.
func TestBadZKSilent(t *testing.T) {
	addr := silentAddr(t)
	const connectTimeout = 2 * time.Second
	code, stdout, stderr, called, took := runBad(t, addr, connectTimeout)
	t.Logf("exit %d after %v\nstdout:\n%sstderr:\n%s", code, took.Round(time.Millisecond), stdout, stderr)
	if code != 1 || called {
		t.Fatalf("exit code %d, run called %v: want 1 and false", code, called)
	}
	if !strings.Contains(stderr, addr) || !strings.Contains(stderr, "no session") || !strings.Contains(stderr, "-connect-timeout 2s reached") {
		t.Errorf("stderr does not name %s, the missing session and the timeout:\n%s", addr, stderr)
	}
	if took > connectTimeout+slack {
		t.Errorf("took %v, want about -connect-timeout (%v)", took, connectTimeout)
	}
}

// With -zk pointing at a real server the check passes and the example runs
// on the user's addresses.
func TestGoodZK(t *testing.T) {
	servers := zktest.NewNamespace(t).Servers()
	var out, errOut bytes.Buffer
	var got []string
	code := mainRun(config{
		name: "demo-test", zk: strings.Join(servers, ","), timeout: time.Minute,
		stdout: &out, stderr: &errOut,
	}, func(ctx context.Context, env *Env) error {
		got = env.Servers
		return nil
	})
	t.Logf("stdout:\n%sstderr:\n%s", out.String(), errOut.String())
	if code != 0 || !slices.Equal(got, servers) {
		t.Fatalf("exit code %d, run saw servers %v: want 0 and %v", code, got, servers)
	}
	if !strings.Contains(out.String(), "answers") {
		t.Errorf("stdout does not report the check:\n%s", out.String())
	}
}

// Each example program, built and run with a dead -zk, exits 1 within a few
// seconds and prints the user's address and the dial error (not the port of
// its internal fault proxy).
func TestExamplesBadZK(t *testing.T) {
	goTool, err := goCommand()
	if err != nil {
		t.Fatalf("cannot build the examples: %v", err)
	}
	dir := t.TempDir()
	for _, ex := range []string{"leader", "locks", "lockload", "keyload"} {
		t.Run(ex, func(t *testing.T) {
			bin := filepath.Join(dir, ex)
			build := exec.Command(goTool, "build", "-o", bin, "github.com/zkrecipes/zkrecipes/examples/"+ex)
			build.Env = os.Environ()
			if out, err := build.CombinedOutput(); err != nil {
				t.Fatalf("go build %s: %v\n%s", ex, err, out)
			}
			addr := deadAddr(t)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, bin, "-zk", addr, "-connect-timeout", "2s")
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			t0 := time.Now()
			err := cmd.Run()
			took := time.Since(t0)
			t.Logf("%s -zk %s: %v after %v\nstdout:\n%sstderr:\n%s", ex, addr, err, took.Round(time.Millisecond), stdout.String(), stderr.String())
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() != 1 {
				t.Fatalf("exit: %v, want exit status 1", err)
			}
			if !strings.Contains(stderr.String(), addr) || !strings.Contains(stderr.String(), "connection refused") {
				t.Errorf("stderr does not name %s and the refused dial:\n%s", addr, stderr.String())
			}
			if took > 2*time.Second+slack {
				t.Errorf("took %v, want about -connect-timeout (2s)", took)
			}
		})
	}
}

// goCommand returns the go command that builds the examples: the one on PATH
// (go test puts its own GOROOT's bin first), else the one in $GOROOT/bin,
// else the one of the GOROOT this test was built with. A test that needs it
// fails without it, and says what is missing: a skip would count as a pass.
func goCommand() (string, error) {
	p, err := exec.LookPath("go")
	if err == nil {
		return p, nil
	}
	tried := []string{"go on PATH: " + err.Error()}
	for _, root := range []string{os.Getenv("GOROOT"), runtime.GOROOT()} {
		if root == "" {
			continue
		}
		p := filepath.Join(root, "bin", "go")
		fi, err := os.Stat(p)
		if err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
		tried = append(tried, p)
	}
	return "", fmt.Errorf("no go command (tried %s): put Go's bin directory on PATH or set GOROOT", strings.Join(tried, ", "))
}

// TestGoCommandWithoutPath: with no go on PATH (a test binary run by hand,
// outside go test), the go command is still found, through GOROOT or the
// GOROOT the test was built with, and it runs.
func TestGoCommandWithoutPath(t *testing.T) {
	for _, goroot := range []string{os.Getenv("GOROOT"), ""} {
		t.Setenv("PATH", t.TempDir())
		t.Setenv("GOROOT", goroot)
		p, err := goCommand()
		if err != nil {
			t.Fatalf("GOROOT=%q: %v", goroot, err)
		}
		out, err := exec.Command(p, "version").CombinedOutput()
		if err != nil || !strings.HasPrefix(string(out), "go version") {
			t.Fatalf("GOROOT=%q: %s version: %v\n%s", goroot, p, err, out)
		}
	}
}
