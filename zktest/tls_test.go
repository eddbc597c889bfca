package zktest_test

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// tlsDialer is a go-zookeeper dialer that runs a TLS handshake with cfg (its
// ServerName filled in from the address) on each connection. It counts the
// handshakes that succeeded.
func tlsDialer(cfg *tls.Config, ok *atomic.Int64) zk.Dialer {
	return func(network, address string, timeout time.Duration) (net.Conn, error) {
		raw, err := net.DialTimeout(network, address, timeout)
		if err != nil {
			return nil, err
		}
		c := cfg.Clone()
		c.ServerName, _, _ = net.SplitHostPort(address)
		tc := tls.Client(raw, c)
		_ = raw.SetDeadline(time.Now().Add(5 * time.Second))
		if err := tc.Handshake(); err != nil {
			raw.Close()
			return nil, err
		}
		_ = raw.SetDeadline(time.Time{})
		if ok != nil {
			ok.Add(1)
		}
		return tc, nil
	}
}

// The generated PKI: the server certificate verifies against its own CA for
// 127.0.0.1 and localhost, with server usage; the client certificate for
// client usage; and not against the CA of another NewTLS.
func TestNewTLSCertificates(t *testing.T) {
	a, err := zktest.NewTLS()
	if err != nil {
		t.Fatal(err)
	}
	b, err := zktest.NewTLS()
	if err != nil {
		t.Fatal(err)
	}
	parse := func(p []byte) *x509.Certificate {
		t.Helper()
		blk, _ := pem.Decode(p)
		if blk == nil {
			t.Fatalf("no PEM block in %q", p)
		}
		c, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	pool := func(pki *zktest.TLS) *x509.CertPool {
		p := x509.NewCertPool()
		if !p.AppendCertsFromPEM(pki.CACertPEM) {
			t.Fatalf("no CA certificate in %q", pki.CACertPEM)
		}
		return p
	}
	srv, cli := parse(a.ServerCertPEM), parse(a.ClientCertPEM)
	for _, name := range []string{"127.0.0.1", "localhost", "::1"} {
		if _, err := srv.Verify(x509.VerifyOptions{Roots: pool(a), DNSName: name}); err != nil {
			t.Errorf("server certificate for %s: %v", name, err)
		}
	}
	if _, err := srv.Verify(x509.VerifyOptions{Roots: pool(b), DNSName: "127.0.0.1"}); err == nil {
		t.Error("server certificate verifies against another NewTLS's CA")
	}
	if _, err := cli.Verify(x509.VerifyOptions{Roots: pool(a), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("client certificate: %v", err)
	}
	if cfg := a.ClientConfig(); len(cfg.Certificates) != 1 || cfg.RootCAs == nil || cfg.ServerName != "" {
		t.Errorf("ClientConfig = %+v, want the client certificate, the CA and no ServerName", cfg)
	}
	if _, err := tls.X509KeyPair(a.ServerCertPEM, a.ServerKeyPEM()); err != nil {
		t.Errorf("server key pair: %v", err)
	}
}

// The shared TLS server serves TLS on its secure port and plaintext on its
// client port, one data tree: a TLS client's node is read by a plaintext
// client. The shared plaintext server has no secure port.
func TestSharedTLSServesBothPorts(t *testing.T) {
	srv := zktest.SharedTLS(t)
	if srv.TLS() == nil || srv.SecureAddr() == "" || srv.SecureAddr() == srv.Addr() || len(srv.SecureServers()) != 1 || srv.SecureServers()[0] != srv.SecureAddr() {
		t.Fatalf("TLS server: TLS %v, secure address %q, secure servers %v, plaintext %q", srv.TLS(), srv.SecureAddr(), srv.SecureServers(), srv.Addr())
	}
	if again := zktest.SharedTLS(t); again != srv {
		t.Fatal("SharedTLS started a second server")
	}
	if plain := zktest.NewNamespace(t).Server; plain.TLS() != nil || plain.SecureServers() != nil || plain.SecureAddr() != "" {
		t.Fatal("the plaintext shared server reports TLS")
	}
	ns := zktest.NewNamespaceOn(t, srv)
	var handshakes atomic.Int64
	c := zktest.Conn(t, srv.SecureServers(), 4*time.Second, zk.WithDialer(tlsDialer(srv.TLS().ClientConfig(), &handshakes)))
	p := ns.Path("tls")
	if _, err := c.Create(p, []byte("secret"), 0, acl); err != nil {
		t.Fatal(err)
	}
	if handshakes.Load() == 0 {
		t.Fatal("no TLS handshake counted")
	}
	data, _, err := ns.Conn(t).Get(p)
	if err != nil || string(data) != "secret" {
		t.Fatalf("plaintext get %s = %q, %v", p, data, err)
	}
}

// The server requires a client certificate (ssl.clientAuth=need, ZooKeeper's
// default): a TLS client without one is refused, in the handshake (TLS 1.2)
// or at its first read (TLS 1.3).
func TestTLSServerRequiresClientCertificate(t *testing.T) {
	srv := zktest.SharedTLS(t)
	cfg := srv.TLS().ClientConfig()
	cfg.Certificates = nil
	cfg.ServerName = "127.0.0.1"
	raw, err := net.DialTimeout("tcp", srv.SecureAddr(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	_ = raw.SetDeadline(time.Now().Add(15 * time.Second))
	tc := tls.Client(raw, cfg)
	err = tc.Handshake()
	if err == nil {
		_, err = tc.Read(make([]byte, 1))
	}
	var ne net.Error
	if err == nil || (errors.As(err, &ne) && ne.Timeout()) {
		t.Fatalf("a client without a certificate: %v, want the server's refusal", err)
	}
	t.Logf("refused: %v", err)
}

// The proxy relays TLS (it cannot read it, so it relays raw bytes): a Cut
// gives Disconnected and then the same session back, as over plaintext.
func TestTLSThroughProxyCut(t *testing.T) {
	srv := zktest.SharedTLS(t)
	ns := zktest.NewNamespaceOn(t, srv)
	px := zktest.NewProxyT(t, srv.SecureServers()...)
	rec := &recorder{}
	var handshakes atomic.Int64
	c := zktest.Conn(t, px.Servers(), 4*time.Second, zk.WithEventCallback(rec.cb),
		zk.WithDialer(tlsDialer(srv.TLS().ClientConfig(), &handshakes)))
	id := c.SessionID()
	if _, err := c.Create(ns.Path("e"), nil, zk.FlagEphemeral, acl); err != nil {
		t.Fatal(err)
	}
	m := rec.mark()
	px.Cut()
	zktest.Eventually(t, 15*time.Second, func() bool {
		return rec.seq(m, zk.StateDisconnected, zk.StateHasSession)
	}, "no Disconnected then HasSession after a cut: %v", rec.all())
	if got := c.SessionID(); got != id {
		t.Fatalf("session id changed across a cut: %x -> %x", id, got)
	}
	if _, _, err := c.Get(ns.Path("e")); err != nil {
		t.Fatalf("get after cut: %v", err)
	}
	if n := handshakes.Load(); n < 2 {
		t.Fatalf("%d TLS handshakes, want one per connection (2)", n)
	}
	if s := px.Sessions(); len(s) != 0 {
		t.Fatalf("the proxy read session credentials from a TLS stream: %+v", s)
	}
}

// An ensemble started WithTLS serves TLS on every member with one CA: a
// write through one member's secure port is read through another's.
func TestTLSEnsemble(t *testing.T) {
	e := zktest.StartEnsembleT(t, 3, zktest.WithTLS())
	pki := e.Member(0).TLS()
	if pki == nil {
		t.Fatal("ensemble member 0 has no TLS")
	}
	cfg := pki.ClientConfig()
	conn := func(i int) *zk.Conn {
		if e.Member(i).TLS() != pki || len(e.Member(i).SecureServers()) != 1 {
			t.Fatalf("member %d: TLS %v (member 0's %v), secure servers %v", i, e.Member(i).TLS(), pki, e.Member(i).SecureServers())
		}
		return zktest.Conn(t, []string{e.Member(i).SecureAddr()}, 4*time.Second, zk.WithDialer(tlsDialer(cfg, nil)))
	}
	conns := []*zk.Conn{conn(0), conn(1), conn(2)}
	if _, err := conns[0].Create("/tls-ensemble", []byte("v1"), 0, acl); err != nil {
		t.Fatal(err)
	}
	for i, c := range conns[1:] {
		if _, err := c.Sync("/tls-ensemble"); err != nil {
			t.Fatal(err)
		}
		if data, _, err := c.Get("/tls-ensemble"); err != nil || string(data) != "v1" {
			t.Fatalf("get through member %d = %q, %v", i+2, data, err)
		}
	}
}
