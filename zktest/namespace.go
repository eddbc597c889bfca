package zktest

import (
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"
)

// nsCounter makes namespace roots unique within a process.
var nsCounter atomic.Int64

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
// name>-<n>" on the package's shared server (started by Main; the test fails
// if TestMain does not call Main) and removes it recursively in t.Cleanup
// (cleanups run last-in first-out, so sessions the test closes in its own
// cleanups are gone by then). Tests must not stop, kill or freeze the shared
// server (start their own with StartServerT for that). If the test fails,
// the cleanup also logs the tail of the server's log, once per test and
// server however many helpers use it.
func NewNamespace(t TB) *Namespace {
	t.Helper()
	return NewNamespaceOn(t, shared(t))
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
	return Conn(t, ns.Servers(), 0)
}

// Proxy returns a proxy in front of the namespace's server, closed in
// t.Cleanup.
func (ns *Namespace) Proxy(t TB) *Proxy {
	t.Helper()
	return NewProxyT(t, ns.Servers()...)
}

// Conn connects a raw go-zookeeper client to servers with the given session
// timeout (0 means 10 s), waits for its session and closes it in t.Cleanup.
// opts are go-zookeeper options such as zk.WithDialer(tap.Dialer()).
// go-zookeeper's log goes to t.Logf while the test runs.
func Conn(t TB, servers []string, sessionTimeout time.Duration, opts ...func(*zk.Conn)) *zk.Conn {
	t.Helper()
	if sessionTimeout <= 0 {
		sessionTimeout = 10 * time.Second
	}
	conn, err := dialRaw(servers, sessionTimeout, 20*time.Second, testLogger(t), opts...)
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
