package zktest

import (
	"flag"
	"fmt"
	"os"
	"sync"
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

// tailLines is how many lines of a server's log a failing test prints.
const tailLines = 40

// tailsShown records which tests printed which server's log tail, so that a
// failing test prints a server's tail once, however many namespaces (and
// StartServerT cleanups) it has on that server, and Main does not print a
// tail again at the end of the run.
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
		t.Logf("%s: log tail:\n%s", s, s.logTail(tailLines))
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
// naming the command that installs it and exits 1, or exits 0 with a SKIP
// note under -test.short), starts the shared standalone server that
// NewNamespace and SharedServers use, runs the tests, stops the server
// (printing its log tail if tests failed and none of them printed a server's
// log tail already) and, when the tests passed, checks that they leaked no
// goroutine (see docs/zktest.md), exiting 1 on a leak. It never returns.
func Main(m interface{ Run() int }) {
	os.Exit(runMain(m))
}

func runMain(m interface{ Run() int }) int {
	if !flag.Parsed() {
		flag.Parse()
	}
	if err := FindInstall(); err != nil {
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

	// A failing test that used a server (through NewNamespace,
	// StartServerT...) printed that server's log tail already, in its own
	// output; print the shared server's here only when no test printed any,
	// as for a failing Example, which has no *testing.T.
	forgetTails(srv)
	if code != 0 && !anyTailShown() {
		fmt.Fprintf(os.Stderr, "zktest: shared %s, log tail:\n%s\n", srv, srv.logTail(tailLines))
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

// shared returns the package's shared standalone server started by Main, and
// fails the test if TestMain does not call Main. If the test fails, the tail
// of the server's log is printed in its output, once per test however many
// helpers ask for it.
func shared(t TB) *Server {
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
// nothing) and stopped by Main after the tests. It fails the test if
// TestMain does not call Main; tests must not stop, kill or freeze it; its
// log tail is printed if the test fails. Its plaintext address (Servers)
// serves namespaces (NewNamespaceOn) and zktest's probes; clients under test
// connect to SecureServers with TLS().ClientConfig(). If the server cannot
// start, every test that asks for it fails with that error.
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
// which get no *testing.T; tests use NewNamespace.
func SharedServers() []string {
	sharedServer.mu.Lock()
	srv := sharedServer.srv
	sharedServer.mu.Unlock()
	if srv == nil {
		return nil
	}
	return srv.Servers()
}
