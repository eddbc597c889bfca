package zksession_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/go-zookeeper/zk"
	"github.com/zkrecipes/zkrecipes/internal/testkit/sessiontest"
	"github.com/zkrecipes/zkrecipes/internal/zksession"
	"github.com/zkrecipes/zkrecipes/session"
	"github.com/zkrecipes/zkrecipes/zktest"
)

func TestBadConnectInputs(t *testing.T) {
	ok := []string{"127.0.0.1:1"}
	cases := []struct {
		name    string
		servers []string
		opts    []session.Option
		want    error
		text    string
	}{
		{"nil servers", nil, nil, session.ErrBadArgument, "empty"},
		{"empty servers", []string{}, nil, session.ErrBadArgument, "empty"},
		{"blank servers", []string{"", " , "}, nil, session.ErrBadArgument, "empty"},
		{"chroot in server", []string{"127.0.0.1:2181/app"}, nil, session.ErrBadArgument, "WithNamespace"},
		{"zero timeout", ok, []session.Option{session.WithSessionTimeout(0)}, session.ErrBadArgument, "session timeout"},
		{"negative timeout", ok, []session.Option{session.WithSessionTimeout(-time.Second)}, session.ErrBadArgument, "session timeout"},
		{"sub-ms timeout", ok, []session.Option{session.WithSessionTimeout(time.Microsecond)}, session.ErrBadArgument, "session timeout"},
		{"nil logger", ok, []session.Option{session.WithLogger(nil)}, session.ErrBadArgument, "nil logger"},
		{"nil dialer", ok, []session.Option{session.WithDialer(nil)}, session.ErrBadArgument, "nil dialer"},
		{"nil option", ok, []session.Option{nil}, session.ErrBadArgument, "nil option"},
		{"empty digest user", ok, []session.Option{session.WithDigestAuth("", "x")}, session.ErrBadArgument, "digest user"},
		{"colon digest user", ok, []session.Option{session.WithDigestAuth("a:b", "x")}, session.ErrBadArgument, "digest user"},
		{"empty auth scheme", ok, []session.Option{session.WithAuth("", nil)}, session.ErrBadArgument, "scheme"},
		{"empty ACL", ok, []session.Option{session.WithACL(nil)}, session.ErrBadArgument, "ACL"},
		{"relative namespace", ok, []session.Option{session.WithNamespace("app")}, session.ErrBadArgument, "namespace"},
		{"trailing slash namespace", ok, []session.Option{session.WithNamespace("/app/")}, session.ErrBadArgument, "trailing"},
		{"bad policy", ok, []session.Option{session.WithLossPolicy(7)}, session.ErrBadArgument, "policy"},
		{"nil retry", ok, []session.Option{session.WithRetry(nil)}, session.ErrBadArgument, "retry"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, err := session.Connect(context.Background(), c.servers, c.opts...)
			if s != nil {
				s.Close()
				t.Fatal("Connect succeeded")
			}
			if !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.text) {
				t.Fatalf("err = %v, want %v mentioning %q", err, c.want, c.text)
			}
		})
	}
}

func TestValidatePath(t *testing.T) {
	cases := []struct {
		path   string
		reason string // "" = valid
	}{
		{"/a", ""},
		{"/a/b-c_d.e/f", ""},
		{"/.a/b..", ""},
		{"/zk/é/日本", ""},
		{"", "empty"},
		{"a/b", "must start with '/'"},
		{"/", "root"},
		{"/a/", "trailing '/'"},
		{"//a", "empty segment"},
		{"/a//b", "empty segment"},
		{"/a/./b", `"." segment`},
		{"/a/..", `".." segment`},
		{"/a\x00b", "NUL"},
		{"/a\x01", "control character"},
		{"/a\u0085", "control character"},
		{"/a\ufff5", "ZooKeeper rejects"},
		{"/a\xff", "UTF-8"},
	}
	for _, c := range cases {
		err := zksession.ValidatePath(c.path)
		switch {
		case c.reason == "" && err != nil:
			t.Errorf("ValidatePath(%q) = %v, want nil", c.path, err)
		case c.reason != "" && (!errors.Is(err, session.ErrBadArgument) || !strings.Contains(err.Error(), c.reason)):
			t.Errorf("ValidatePath(%q) = %v, want ErrBadArgument mentioning %q", c.path, err, c.reason)
		}
	}
}

func TestConnectNamesServersOnTimeout(t *testing.T) {
	// A listener that accepts nothing useful: a closed port refuses at once.
	srv := zktest.StartServerT(t)
	addr := srv.Addr()
	if err := srv.Kill(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	start := time.Now()
	s, err := session.Connect(ctx, []string{addr})
	if s != nil {
		s.Close()
		t.Fatal("Connect succeeded without a server")
	}
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), addr) {
		t.Fatalf("err = %v, want DeadlineExceeded naming %s", err, addr)
	}
	if !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("err = %v, want the last dial error", err)
	}
	t.Logf("Connect gave up after %v: %v", time.Since(start).Round(time.Millisecond), err)
}

func TestBadCallInputs(t *testing.T) {
	ns := zktest.NewNamespace(t)
	s := sessiontest.Connect(t, ns)
	other := sessiontest.Connect(t, ns)
	ctx := ctxT(t, 10*time.Second)
	ep := sessiontest.Core(s).Epoch()

	if _, err := s.Path("locks"); !errors.Is(err, session.ErrBadArgument) {
		t.Errorf("Path(relative) = %v", err)
	}
	if _, err := s.Path("/../x"); !errors.Is(err, session.ErrBadArgument) {
		t.Errorf("Path(..) = %v", err)
	}
	if err := sessiontest.Core(s).EnsureContainers(ctx, "/elsewhere"); !errors.Is(err, session.ErrBadArgument) || !strings.Contains(err.Error(), "namespace") {
		t.Errorf("EnsureContainers outside the namespace = %v", err)
	}
	dir := ns.Root + "/d"
	if err := sessiontest.Core(s).EnsureContainers(ctx, dir); err != nil {
		t.Fatal(err)
	}
	if _, _, err := sessiontest.Core(s).CreateEphemeral(ctx, nil, dir+"/x", nil, 0); !errors.Is(err, zksession.ErrBadEpoch) {
		t.Errorf("nil epoch: %v", err)
	}
	if _, _, err := sessiontest.Core(s).CreateEphemeral(ctx, sessiontest.Core(other).Epoch(), dir+"/x", nil, 0); !errors.Is(err, zksession.ErrBadEpoch) {
		t.Errorf("foreign epoch: %v", err)
	}
	if _, _, err := sessiontest.Core(s).CreateEphemeral(ctx, ep, dir+"/x", nil, zk.FlagContainer); !errors.Is(err, session.ErrBadArgument) {
		t.Errorf("container flag: %v", err)
	}
	if _, _, err := sessiontest.Core(s).CreateEphemeral(ctx, ep, dir+"/x/", nil, 0); !errors.Is(err, session.ErrBadArgument) {
		t.Errorf("bad path: %v", err)
	}
	if _, _, err := sessiontest.Core(s).CreateEphemeral(ctx, ep, dir+"/missing/x", nil, 0); !errors.Is(err, zk.ErrNoNode) {
		t.Errorf("missing parent: %v", err)
	}
	if err := sessiontest.Core(s).Retry(ctx, nil, func(*zk.Conn) error { return nil }); !errors.Is(err, zksession.ErrBadEpoch) {
		t.Errorf("Retry nil epoch: %v", err)
	}
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	if _, _, err := sessiontest.Core(s).CreateEphemeral(canceled, ep, dir+"/x", nil, 0); !errors.Is(err, context.Canceled) {
		t.Errorf("canceled ctx: %v", err)
	}
	// Never panics, never blocks.
	sessiontest.Core(s).GuaranteedDelete(nil, dir+"/x", -1)
	sessiontest.Core(s).GuaranteedDelete(ep, "bad", -1)
	sessiontest.Core(s).GuaranteedDelete(sessiontest.Core(other).Epoch(), dir+"/x", -1)
}

func TestRetry(t *testing.T) {
	ns := zktest.NewNamespace(t)
	fast := session.WithRetry(func() backoff.BackOff { return backoff.NewConstantBackOff(5 * time.Millisecond) })
	s := sessiontest.Connect(t, ns, fast)
	ctx := ctxT(t, 10*time.Second)
	ep := sessiontest.Core(s).Epoch()

	calls := 0
	err := sessiontest.Core(s).Retry(ctx, ep, func(*zk.Conn) error { calls++; return zk.ErrNoNode })
	if !errors.Is(err, zk.ErrNoNode) || calls != 1 {
		t.Errorf("permanent error: %v after %d calls", err, calls)
	}
	calls = 0
	err = sessiontest.Core(s).Retry(ctx, ep, func(*zk.Conn) error {
		calls++
		switch calls {
		case 1:
			return zk.ErrConnectionClosed
		case 2:
			return zk.ErrSessionMoved
		case 3:
			return zk.ErrNoServer
		}
		return nil
	})
	if err != nil || calls != 4 {
		t.Errorf("retryable errors: %v after %d calls", err, calls)
	}
	calls = 0
	stop := session.WithRetry(func() backoff.BackOff { return backoff.WithMaxRetries(&backoff.ZeroBackOff{}, 2) })
	s2 := sessiontest.Connect(t, ns, stop)
	err = sessiontest.Core(s2).Retry(ctx, sessiontest.Core(s2).Epoch(), func(*zk.Conn) error { calls++; return zk.ErrConnectionClosed })
	if !errors.Is(err, zk.ErrConnectionClosed) || calls != 3 || !strings.Contains(err.Error(), "gave up") {
		t.Errorf("backoff.Stop: %v after %d calls", err, calls)
	}
	// Long enough for the first call to happen before the deadline on a
	// loaded machine: the error must wrap the last attempt's. The deadline
	// may end an attempt in flight, which then goes on on a goroutine of the
	// Session: count atomically.
	var shortCalls atomic.Int32
	short, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	err = sessiontest.Core(s).Retry(short, ep, func(*zk.Conn) error { shortCalls.Add(1); return zk.ErrConnectionClosed })
	if n := shortCalls.Load(); !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, zk.ErrConnectionClosed) || n == 0 {
		t.Errorf("ctx ends while retrying: %v after %d calls", err, n)
	}
	err = sessiontest.Core(s).Retry(ctx, ep, func(*zk.Conn) error { return zk.ErrSessionExpired })
	if !errors.Is(err, session.ErrLost) || !errors.Is(err, zk.ErrSessionExpired) {
		t.Errorf("session expired: %v", err)
	}
}

// Credentials the server rejects make Connect fail and name the scheme.
func TestConnectBadAuthScheme(t *testing.T) {
	ns := zktest.NewNamespace(t)
	ctx := ctxT(t, wait)
	s, err := session.Connect(ctx, ns.Servers(), session.WithAuth("nosuchscheme", []byte("x")))
	if s != nil {
		s.Close()
	}
	if err == nil || !strings.Contains(err.Error(), "nosuchscheme") {
		t.Fatalf("err = %v", err)
	}
	t.Logf("%v", err)
}

func TestIsConnectionError(t *testing.T) {
	opErr := &net.OpError{Op: "write", Net: "tcp", Err: syscall.EPIPE}
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{zk.ErrConnectionClosed, true},
		{zk.ErrNoServer, true},
		{zk.ErrSessionMoved, true},
		{fmt.Errorf("wrapped: %w", zk.ErrConnectionClosed), true},
		{opErr, true},
		{io.EOF, true},
		{syscall.ECONNRESET, true},
		{zk.ErrNoNode, false},
		{zk.ErrNodeExists, false},
		{zk.ErrNoAuth, false},
		{zk.ErrSessionExpired, false},
		{context.Canceled, false},
		{errors.New("other"), false},
		{&net.OpError{Op: "write", Net: "tcp", Err: fmt.Errorf("write: %w", syscall.EPIPE)}, true},
	} {
		if got := zksession.IsConnectionError(tc.err); got != tc.want {
			t.Errorf("IsConnectionError(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}
