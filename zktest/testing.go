package zktest

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"
)

// sharedServer is the package's shared server, set by Main.
var sharedServer struct {
	mu  sync.Mutex
	srv *Server
}

// sharedTLSServer is the package's shared TLS server, started by the first
// SharedTLS and stopped by Main. err is the first start's error, given to
// every later caller rather than paying for another failed start.
var sharedTLSServer struct {
	mu  sync.Mutex
	srv *Server
	err error
}

// nsCounter makes namespace roots unique within a test binary.
var nsCounter atomic.Int64

// tailLines is how many lines of a server's log a failing test prints.
const tailLines = 40

// tailsShown records which tests printed which server's log tail, so that a
// failing test prints a server's tail once, however many namespaces (and
// Shared, StartServerT cleanups) it has on that server, and Main does not
// print a tail again at the end of the run.
var tailsShown struct {
	mu  sync.Mutex
	m   map[*Server]map[string]bool // server -> test names
	any bool                        // some test printed a tail in this run
}

// logTailOnce logs the tail of s's log in t, unless t has already logged it.
func logTailOnce(t TB, s *Server) {
	t.Helper()
	tailsShown.mu.Lock()
	if tailsShown.m == nil {
		tailsShown.m = make(map[*Server]map[string]bool)
	}
	tests := tailsShown.m[s]
	if tests == nil {
		tests = make(map[string]bool)
		tailsShown.m[s] = tests
	}
	shown := tests[t.Name()]
	tests[t.Name()] = true
	tailsShown.any = true
	tailsShown.mu.Unlock()
	if !shown {
		t.Logf("%s: log tail:\n%s", s, s.LogTail(tailLines))
	}
}

// forgetTails drops what logTailOnce recorded about s (once s is stopped).
func forgetTails(s *Server) {
	tailsShown.mu.Lock()
	defer tailsShown.mu.Unlock()
	delete(tailsShown.m, s)
}

// anyTailShown reports whether a test printed a server's log tail in this
// run.
func anyTailShown() bool {
	tailsShown.mu.Lock()
	defer tailsShown.mu.Unlock()
	return tailsShown.any
}

// Main runs a test package against a shared ZooKeeper server; call it from
// TestMain (m is the *testing.M):
//
//	func TestMain(m *testing.M) { zktest.Main(m) }
//
// It parses flags, finds ZooKeeper (if it is missing it prints a message
// naming InstallCommand and exits 1, or exits 0 with a SKIP note under
// -short), starts the shared standalone server (see Shared), runs the tests,
// stops the server (printing its log tail if tests failed and none of them
// printed a server's log tail already) and, when the
// tests passed, checks for leaked goroutines (goroutines alive before the
// tests are ignored; those still exiting get a few seconds), exiting 1 on a
// leak and printing their stacks. It never returns.
func Main(m interface{ Run() int }) {
	os.Exit(runMain(m))
}

func runMain(m interface{ Run() int }) int {
	if !flag.Parsed() {
		flag.Parse()
	}
	if _, err := FindInstall(); err != nil {
		if shortFlag() {
			fmt.Fprintf(os.Stderr, "SKIP: %v\n", err)
			return 0
		}
		fmt.Fprintf(os.Stderr, "FAIL: %v\n", err)
		return 1
	}
	before := snapshotGoroutines()
	srv, err := StartServer()
	if err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: zktest: cannot start the shared ZooKeeper server: %v\n", err)
		return 1
	}
	sharedServer.mu.Lock()
	sharedServer.srv = srv
	sharedServer.mu.Unlock()

	code := m.Run()

	// A failing test that used a server (through Shared, NewNamespace,
	// StartServerT...) printed that server's log tail already, in its own
	// output; print the shared server's here only when no test printed any,
	// as for a failing Example, which has no *testing.T.
	forgetTails(srv)
	if code != 0 && !anyTailShown() {
		fmt.Fprintf(os.Stderr, "zktest: shared %s, log tail:\n%s\n", srv, srv.LogTail(tailLines))
	}
	sharedServer.mu.Lock()
	sharedServer.srv = nil
	sharedServer.mu.Unlock()
	if err := srv.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "zktest: stopping the shared server: %v\n", err)
	}
	sharedTLSServer.mu.Lock()
	tlsSrv := sharedTLSServer.srv
	sharedTLSServer.srv, sharedTLSServer.err = nil, nil
	sharedTLSServer.mu.Unlock()
	if tlsSrv != nil {
		forgetTails(tlsSrv)
		if err := tlsSrv.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "zktest: stopping the shared TLS server: %v\n", err)
		}
	}
	if code == 0 {
		if leaked := findLeaks(before, leakWait); len(leaked) > 0 {
			fmt.Fprintf(os.Stderr, "FAIL: zktest: %s", formatLeaks(leaked))
			return 1
		}
	}
	return code
}

// shortFlag reports whether the test binary runs with -test.short. It reads
// the flag that the testing package registers rather than calling
// testing.Short, so that zktest does not import testing; outside a test
// binary there is no such flag and it reports false.
func shortFlag() bool {
	f := flag.Lookup("test.short")
	if f == nil {
		return false
	}
	g, ok := f.Value.(flag.Getter)
	if !ok {
		return false
	}
	short, _ := g.Get().(bool)
	return short
}

// Shared returns the package's shared standalone server started by Main. It
// fails the test if TestMain does not call Main. Tests must not stop, kill or
// freeze it (use StartServerT for destructive tests); they isolate their data
// with NewNamespace. If the test fails, the tail of the server's log is
// printed in its output, once per test however many helpers ask for it.
func Shared(t TB) *Server {
	t.Helper()
	sharedServer.mu.Lock()
	srv := sharedServer.srv
	sharedServer.mu.Unlock()
	if srv == nil {
		t.Fatalf("zktest: no shared server: TestMain must call zktest.Main(m)")
	}
	t.Cleanup(func() {
		if t.Failed() {
			logTailOnce(t, srv)
		}
	})
	return srv
}

// SharedTLS returns the package's shared TLS server: a standalone server
// started WithTLS by the first call (so packages that never call it pay
// nothing) and stopped by Main after the tests. Like Shared it fails the test
// if TestMain does not call Main, must not be stopped, killed or frozen, and
// prints the server's log tail if the test fails. Its plaintext address
// (Servers) serves namespaces (NewNamespaceOn) and zktest's probes; clients
// under test connect to SecureServers with TLS().ClientConfig(). If the
// server cannot start, every test that asks for it fails with that error.
func SharedTLS(t TB) *Server {
	t.Helper()
	sharedServer.mu.Lock()
	running := sharedServer.srv != nil
	sharedServer.mu.Unlock()
	if !running {
		t.Fatalf("zktest: no shared server: TestMain must call zktest.Main(m)")
	}
	sharedTLSServer.mu.Lock()
	if sharedTLSServer.srv == nil && sharedTLSServer.err == nil {
		sharedTLSServer.srv, sharedTLSServer.err = StartServer(WithTLS())
	}
	srv, err := sharedTLSServer.srv, sharedTLSServer.err
	sharedTLSServer.mu.Unlock()
	if err != nil {
		t.Fatalf("zktest: cannot start the shared TLS server: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			logTailOnce(t, srv)
		}
	})
	return srv
}

// SharedServers returns the addresses of the package's shared server started
// by Main, or nil when Main has not started one. It is for Example functions,
// which get no *testing.T; tests use Shared.
func SharedServers() []string {
	sharedServer.mu.Lock()
	srv := sharedServer.srv
	sharedServer.mu.Unlock()
	if srv == nil {
		return nil
	}
	return srv.Servers()
}

// StartServerT starts a fresh standalone server for a destructive test; it is
// stopped in t.Cleanup, which prints the tail of its log if the test failed.
func StartServerT(t TB, opts ...Option) *Server {
	t.Helper()
	s, err := StartServer(opts...)
	if err != nil {
		t.Fatalf("%v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			logTailOnce(t, s)
		}
		forgetTails(s)
		if err := s.Stop(); err != nil {
			t.Errorf("zktest: stop %s: %v", s, err)
		}
	})
	return s
}

// Namespace is a test's own root path on a server: "/zktest/<test name>-<n>".
// Paths under Root belong to the test; Root and everything below it is
// removed at the end of the test.
type Namespace struct {
	// Server is the server holding the namespace.
	Server *Server
	// Root is the namespace's absolute path, without a trailing slash.
	Root string
}

// NewNamespace creates a unique persistent root "/zktest/<sanitised test
// name>-<n>" on the shared server (see Shared) and removes it recursively in
// t.Cleanup (cleanups run last-in first-out, so sessions the test closes in
// its own cleanups are gone by then). If the test failed, the cleanup also
// logs the tail of the server's log (once per test and server).
func NewNamespace(t TB) *Namespace {
	t.Helper()
	return NewNamespaceOn(t, Shared(t))
}

// NewNamespaceOn is NewNamespace on the given server; a nil server fails the
// test.
func NewNamespaceOn(t TB, s *Server) *Namespace {
	t.Helper()
	if s == nil {
		t.Fatalf("zktest: NewNamespaceOn: nil server")
		return nil
	}
	ns := &Namespace{
		Server: s,
		Root:   fmt.Sprintf("/zktest/%s-%d", sanitize(t.Name()), nsCounter.Add(1)),
	}
	conn, err := dialRaw(s.Servers(), 10*time.Second, 10*time.Second, discardLogger{})
	if err != nil {
		t.Fatalf("zktest: namespace %s: %v", ns.Root, err)
	}
	defer conn.Close()
	for _, p := range []string{"/zktest", ns.Root} {
		if _, err := conn.Create(p, nil, 0, zk.WorldACL(zk.PermAll)); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			t.Fatalf("zktest: namespace: create %s: %v", p, err)
		}
	}
	t.Cleanup(func() {
		if t.Failed() {
			logTailOnce(t, s)
		}
		conn, err := dialRaw(s.Servers(), 10*time.Second, 5*time.Second, discardLogger{})
		if err != nil {
			t.Logf("zktest: namespace %s not removed: %v", ns.Root, err)
			return
		}
		defer conn.Close()
		var derr error
		for i := 0; i < 5; i++ {
			if derr = deleteTree(conn, ns.Root); derr == nil {
				return
			}
		}
		t.Logf("zktest: namespace %s not removed: %v", ns.Root, derr)
	})
	return ns
}

// Servers returns the addresses of the namespace's server.
func (ns *Namespace) Servers() []string { return ns.Server.Servers() }

// Path joins Root and p ("" or "/" give Root): ns.Path("a/b") is Root+"/a/b".
func (ns *Namespace) Path(p string) string {
	p = strings.Trim(p, "/")
	if p == "" {
		return ns.Root
	}
	return ns.Root + "/" + p
}

// Conn returns a raw go-zookeeper connection to the namespace's server for
// inspection and third-party actions (paths are absolute: use ns.Root). It
// returns once the session is established and is closed in t.Cleanup.
// go-zookeeper's log goes to t.Logf while the test runs.
func (ns *Namespace) Conn(t TB) *zk.Conn {
	t.Helper()
	return ConnT(t, ns.Servers(), 0)
}

// ConnT connects a raw go-zookeeper client to servers with the given session
// timeout (0 means 10 s), waits for its session and closes it in t.Cleanup. opts are go-zookeeper options such as
// zk.WithDialer(tap.Dialer()). go-zookeeper's log goes to t.Logf while the test
// runs.
func ConnT(t TB, servers []string, sessionTimeout time.Duration, opts ...func(*zk.Conn)) *zk.Conn {
	t.Helper()
	if sessionTimeout <= 0 {
		sessionTimeout = 10 * time.Second
	}
	lg := ZKLogger(t)
	conn, err := dialRaw(servers, sessionTimeout, 20*time.Second, lg, opts...)
	if err != nil {
		t.Fatalf("zktest: connect %v: %v", servers, err)
	}
	t.Cleanup(conn.Close)
	return conn
}

// dialRaw connects and waits for StateHasSession.
func dialRaw(servers []string, sessionTimeout, wait time.Duration, lg zk.Logger, opts ...func(*zk.Conn)) (*zk.Conn, error) {
	conn, events, err := zk.Connect(servers, sessionTimeout, connOptions(zk.WithLogger(lg), opts)...)
	if err != nil {
		return nil, err
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	for {
		select {
		case ev := <-events:
			if ev.State == zk.StateHasSession {
				return conn, nil
			}
		case <-t.C:
			conn.Close()
			return nil, fmt.Errorf("zktest: no session with %v within %v", servers, wait)
		}
	}
}

// connOptions turns plain functions into go-zookeeper's unexported option
// type (zk.WithDialer(...) and friends are assignable to func(*zk.Conn)).
func connOptions[T ~func(*zk.Conn)](first T, rest []func(*zk.Conn)) []T {
	out := []T{first}
	for _, o := range rest {
		out = append(out, T(o))
	}
	return out
}

func deleteTree(conn *zk.Conn, p string) error {
	children, _, err := conn.Children(p)
	if errors.Is(err, zk.ErrNoNode) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, c := range children {
		if err := deleteTree(conn, p+"/"+c); err != nil {
			return err
		}
	}
	err = conn.Delete(p, -1)
	if errors.Is(err, zk.ErrNoNode) {
		return nil
	}
	return err
}

func sanitize(name string) string {
	b := []byte(name)
	for i, c := range b {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '-', c == '_', c == '.':
		default:
			b[i] = '_'
		}
	}
	if len(b) > 100 {
		b = b[:100]
	}
	return string(b)
}

// Eventually polls cond every 10 ms until it returns true, and fails the test
// with t.Fatalf and msgAndArgs (a format string and its arguments) if that
// does not happen within timeout. Call it only from the test's goroutine. A
// nil cond fails the test at once.
func Eventually(t TB, timeout time.Duration, cond func() bool, msgAndArgs ...any) {
	t.Helper()
	if cond == nil {
		t.Fatalf("zktest: Eventually: nil cond: %s", formatMsg(msgAndArgs))
		return
	}
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		if cond() {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("zktest: condition not met within %v: %s", timeout, formatMsg(msgAndArgs))
		}
		<-tick.C
	}
}

func formatMsg(msgAndArgs []any) string {
	if len(msgAndArgs) == 0 {
		return "(no message)"
	}
	if f, ok := msgAndArgs[0].(string); ok {
		return fmt.Sprintf(f, msgAndArgs[1:]...)
	}
	return fmt.Sprint(msgAndArgs...)
}

// ZKLogger returns a go-zookeeper logger that writes to t.Logf while the test
// runs and discards messages after it ends (t.Logf would panic then).
func ZKLogger(t TB) zk.Logger {
	l := &tLogger{t: t}
	t.Cleanup(func() {
		l.mu.Lock()
		l.done = true
		l.mu.Unlock()
	})
	return l
}

type tLogger struct {
	mu   sync.Mutex
	t    TB
	done bool
}

func (l *tLogger) Printf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.done {
		l.t.Helper()
		l.t.Logf("zk: "+format, args...)
	}
}

type discardLogger struct{}

func (discardLogger) Printf(string, ...any) {}
