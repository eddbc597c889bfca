package zksession_test

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/internal/testkit/sessiontest"
	"github.com/zkrecipes/zkrecipes/session"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// Bounds of the TLS failure tests: Connect gets tlsFailCtx and must return
// within it plus tlsFailTolerance. The tolerance covers Connect's documented
// exception (go-zookeeper's Close may wait a second for its closeSession
// when no server ever answered) plus scheduling on a loaded 2-core machine.
const (
	tlsFailCtx       = 2 * time.Second
	tlsFailTolerance = 1500 * time.Millisecond
)

// firstByteDialer is a user's dialer that records the first byte each
// connection it opened writes: 0x16 is a TLS handshake record, ZooKeeper's
// plaintext handshake starts with a length (0x00).
type firstByteDialer struct {
	mu    sync.Mutex
	first []byte
}

func (d *firstByteDialer) dial(network, address string, timeout time.Duration) (net.Conn, error) {
	c, err := net.DialTimeout(network, address, timeout)
	if err != nil {
		return nil, err
	}
	return &firstByteConn{Conn: c, d: d}, nil
}

func (d *firstByteDialer) firsts() []byte {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]byte(nil), d.first...)
}

type firstByteConn struct {
	net.Conn
	d    *firstByteDialer
	once sync.Once
}

func (c *firstByteConn) Write(b []byte) (int, error) {
	if len(b) > 0 {
		c.once.Do(func() {
			c.d.mu.Lock()
			c.d.first = append(c.d.first, b[0])
			c.d.mu.Unlock()
		})
	}
	return c.Conn.Write(b)
}

// A Session with WithTLS works on a TLS-only port: it establishes a session,
// creates and verifies an ephemeral node, which a plaintext client of the
// same server sees. The TLS handshake runs on the connections of the user's
// own dialer (given before WithTLS: order does not matter), whose first byte
// written is a TLS record, and the user's config is not modified (its empty
// ServerName was filled in on a clone, from the address's host).
func TestTLSConnectOnTopOfDialer(t *testing.T) {
	ns := sessiontest.NamespaceTLS(t)
	d := &firstByteDialer{}
	cfg := ns.Server.TLS().ClientConfig()
	s := sessiontest.ConnectTo(t, ns.Server.SecureServers(), ns.Root,
		session.WithDialer(d.dial), session.WithTLS(cfg))
	ctx := ctxT(t, wait)
	dir, err := s.Path("/tls")
	if err != nil {
		t.Fatal(err)
	}
	if err := sessiontest.Core(s).EnsureContainers(ctx, dir); err != nil {
		t.Fatal(err)
	}
	ep := sessiontest.Core(s).Epoch()
	p, st, err := sessiontest.Core(s).CreateEphemeral(ctx, ep, dir+"/n-", []byte("over tls"), zk.FlagSequence)
	if err != nil {
		t.Fatal(err)
	}
	if st.EphemeralOwner != ep.SessionID() {
		t.Fatalf("owner 0x%x, want 0x%x", st.EphemeralOwner, ep.SessionID())
	}
	data, _, err := ns.Conn(t).Get(p)
	if err != nil || string(data) != "over tls" {
		t.Fatalf("plaintext client reads %s: %q, %v", p, data, err)
	}
	firsts := d.firsts()
	if len(firsts) == 0 {
		t.Fatal("the user's dialer opened no connection")
	}
	for i, b := range firsts {
		if b != 0x16 {
			t.Errorf("connection %d began with byte 0x%02x, want a TLS handshake record (0x16)", i, b)
		}
	}
	if cfg.ServerName != "" {
		t.Errorf("the user's config was modified: ServerName = %q", cfg.ServerName)
	}
}

// With an empty ServerName the host of each address is verified: the test
// certificate names localhost, so "localhost:port" connects.
func TestTLSServerNameFromAddress(t *testing.T) {
	srv := zktest.SharedTLS(t)
	_, port, _ := net.SplitHostPort(srv.SecureAddr())
	local := net.JoinHostPort("localhost", port)
	s := sessiontest.ConnectTo(t, []string{local}, "", session.WithTLS(srv.TLS().ClientConfig()))
	if sessiontest.Core(s).Epoch().SessionID() == 0 {
		t.Fatal("no session id")
	}
}

// The name verified is the host of the configured name, not the address it
// resolves to: a name the certificate does not carry fails, though its
// address (127.0.0.1) is in the certificate; "localhost", resolved by the
// same resolver to the same address, connects.
func TestTLSVerifiesNameNotAddress(t *testing.T) {
	srv := zktest.SharedTLS(t)
	host, port, _ := net.SplitHostPort(srv.SecureAddr())
	var r zktest.Resolver
	r.Set("zk-tls.unnamed.test", host)
	r.Set("localhost", host)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := session.Connect(ctx, []string{net.JoinHostPort("zk-tls.unnamed.test", port)},
		session.WithResolver(&r), session.WithTLS(srv.TLS().ClientConfig()), session.WithConnectTimeout(2*time.Second))
	if err == nil {
		s.Close()
		t.Fatal("connected to a name the certificate does not carry")
	}
	if !strings.Contains(err.Error(), "zk-tls.unnamed.test") || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("error %q does not name the name and the certificate", err)
	}
	s = sessiontest.ConnectTo(t, []string{net.JoinHostPort("localhost", port)}, "",
		session.WithResolver(&r), session.WithTLS(srv.TLS().ClientConfig()))
	if sessiontest.Core(s).Epoch().SessionID() == 0 {
		t.Fatal("no session id")
	}
}

// Every way a TLS connection cannot be made fails Connect at its ctx's end
// (within a tolerance), with an error naming the servers and TLS:
//   - wrongCA: the client trusts another CA; the error names the failed
//     handshake and the unknown authority (the case the bound is measured
//     for: the "Connect returned after" line);
//   - plaintextOnSecurePort: a client without WithTLS gets no answer (the
//     server closes the connection without a TLS alert); the error says so
//     and points at WithTLS;
//   - tlsOnPlaintextPort: the handshake fails as the server closes the
//     connection; the error asks whether the port is a plaintext one;
//   - noClientCertificate: the server requires one (ZooKeeper's default);
//   - wrongServerName: the certificate does not name cfg.ServerName.
//
// The cases run in parallel: each only waits for its ctx.
func TestTLSConnectFailures(t *testing.T) {
	srv := zktest.SharedTLS(t)
	other, err := zktest.NewTLS()
	if err != nil {
		t.Fatal(err)
	}
	noCert := srv.TLS().ClientConfig()
	noCert.Certificates = nil
	badName := srv.TLS().ClientConfig()
	badName.ServerName = "zk.invalid"
	cases := []struct {
		name    string
		servers []string
		opts    []session.Option
		want    []string
	}{
		{"wrongCA", srv.SecureServers(), []session.Option{session.WithTLS(other.ClientConfig())},
			[]string{"TLS handshake", "certificate signed by unknown authority"}},
		{"plaintextOnSecurePort", srv.SecureServers(), nil,
			[]string{"closed the connection before it answered", "serves only TLS", "WithTLS"}},
		{"tlsOnPlaintextPort", srv.Servers(), []session.Option{session.WithTLS(srv.TLS().ClientConfig())},
			[]string{"TLS handshake", "plaintext port"}},
		{"noClientCertificate", srv.SecureServers(), []session.Option{session.WithTLS(noCert)},
			[]string{"TLS", "remote error: tls: "}},
		{"wrongServerName", srv.SecureServers(), []session.Option{session.WithTLS(badName)},
			[]string{"TLS handshake", "zk.invalid"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			err := connectFails(t, c.servers, c.opts...)
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("err = %v, want one containing %q", err, w)
				}
			}
		})
	}
}

// connectFails connects with a ctx of tlsFailCtx, expects Connect to fail
// within tlsFailCtx+tlsFailTolerance with an error that matches
// context.DeadlineExceeded and names the servers, and returns that error.
func connectFails(t *testing.T, servers []string, opts ...session.Option) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), tlsFailCtx)
	defer cancel()
	start := time.Now()
	s, err := session.Connect(ctx, servers, opts...)
	took := time.Since(start)
	if err == nil {
		s.Close()
		t.Fatalf("Connect to %v succeeded", servers)
	}
	t.Logf("Connect returned after %v (ctx %v, %v past it): %v", took.Round(time.Millisecond), tlsFailCtx,
		(took - tlsFailCtx).Round(time.Millisecond), err)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("err = %v, want one matching context.DeadlineExceeded", err)
	}
	for _, a := range servers {
		if !strings.Contains(err.Error(), a) {
			t.Errorf("err = %v, want one naming %s", err, a)
		}
	}
	if took > tlsFailCtx+tlsFailTolerance {
		t.Errorf("Connect returned %v after it began, with a ctx of %v: want at most %v", took.Round(time.Millisecond), tlsFailCtx, tlsFailCtx+tlsFailTolerance)
	}
	return err
}

// A cut of a TLS connection (through the proxy, which relays the encrypted
// bytes) gives Suspended and then Reconnected on the same session, as over
// plaintext; the session then works.
func TestTLSProxyCutSuspendsAndReconnects(t *testing.T) {
	ns := sessiontest.NamespaceTLS(t)
	s, px := sessiontest.ConnectTLSProxy(t, ns, session.WithSessionTimeout(4*time.Second))
	rec := sessiontest.Record(t, s)
	ep := sessiontest.Core(s).Epoch()
	px.Cut()
	rec.Wait(t, wait, session.Suspended)
	rec.Wait(t, wait, session.Reconnected)
	if got := sessiontest.Core(s).Epoch(); got != ep || got.Err() != nil {
		t.Fatalf("epoch after a short cut = %v (err %v), want the same live epoch %v; states %v", got, got.Err(), ep, rec.States())
	}
	ctx := ctxT(t, wait)
	dir, err := s.Path("/after-cut")
	if err != nil {
		t.Fatal(err)
	}
	if err := sessiontest.Core(s).EnsureContainers(ctx, dir); err != nil {
		t.Fatalf("EnsureContainers after the reconnect: %v", err)
	}
}

// slowServerDialer is a user's dialer whose connections hold back the first
// read (the server's half of the TLS handshake) for twice the dial timeout
// go-zookeeper passes: a server that needs longer than that for its
// handshake, as a JVM serving its first TLS connection on a loaded machine
// does.
type slowServerDialer struct {
	mu    sync.Mutex
	dials int
}

func (d *slowServerDialer) dial(network, address string, timeout time.Duration) (net.Conn, error) {
	d.mu.Lock()
	d.dials++
	d.mu.Unlock()
	c, err := net.DialTimeout(network, address, timeout)
	if err != nil {
		return nil, err
	}
	return &slowFirstReadConn{Conn: c, delay: 2 * timeout, closed: make(chan struct{})}, nil
}

type slowFirstReadConn struct {
	net.Conn
	delay     time.Duration
	once      sync.Once
	closed    chan struct{}
	closeOnce sync.Once
}

func (c *slowFirstReadConn) Read(b []byte) (int, error) {
	c.once.Do(func() {
		// The delay is the server's slowness under test, not a
		// synchronisation: it starts after the handshake's deadline is set.
		select {
		case <-time.After(c.delay):
		case <-c.closed:
		}
	})
	return c.Conn.Read(b)
}

func (c *slowFirstReadConn) Close() error {
	c.closeOnce.Do(func() { close(c.closed) })
	return c.Conn.Close()
}

// A server whose TLS handshake takes longer than go-zookeeper's dial timeout
// (a fixed second) is still connected to: the handshake gets the same bound
// as the answer to the ZooKeeper handshake (the session timeout divided among
// the servers), not the dial's. Were it cut at the dial timeout, every
// attempt would fail the same way and Connect would only end at its timeout.
func TestTLSSlowHandshakeConnects(t *testing.T) {
	srv := zktest.SharedTLS(t)
	d := &slowServerDialer{}
	ctx := ctxT(t, wait)
	s, err := session.Connect(ctx, srv.SecureServers(),
		session.WithDialer(d.dial), session.WithTLS(srv.TLS().ClientConfig()))
	if err != nil {
		t.Fatalf("Connect through a server slower than the dial timeout: %v", err)
	}
	defer s.Close()
	d.mu.Lock()
	t.Logf("connected after %d dial(s)", d.dials)
	d.mu.Unlock()
	if s.SessionID() == 0 {
		t.Fatal("no session id")
	}
}

// WithTLS(nil) is a bad option, reported before anything is started.
func TestTLSNilConfig(t *testing.T) {
	s, err := session.Connect(context.Background(), []string{"127.0.0.1:1"}, session.WithTLS((*tls.Config)(nil)))
	if s != nil || !errors.Is(err, session.ErrBadArgument) || !strings.Contains(err.Error(), "TLS") {
		t.Fatalf("Connect(WithTLS(nil)) = %v, %v; want ErrBadArgument naming TLS", s, err)
	}
}
