package demo

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/session"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// writeTLSFiles writes pki's CA certificate and client key pair into dir, as
// a user's -tls-ca, -tls-cert and -tls-key files.
func writeTLSFiles(t *testing.T, pki *zktest.TLS) TLSFiles {
	t.Helper()
	dir := t.TempDir()
	f := TLSFiles{
		CA:   filepath.Join(dir, "ca.pem"),
		Cert: filepath.Join(dir, "client.pem"),
		Key:  filepath.Join(dir, "client-key.pem"),
	}
	for name, data := range map[string][]byte{f.CA: pki.CACertPEM, f.Cert: pki.ClientCertPEM, f.Key: pki.ClientKeyPEM} {
		if err := os.WriteFile(name, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

// runTLS runs mainRun with -zk addr, -connect-timeout connectTimeout and the
// given -tls-* files; run is the example.
func runTLS(t *testing.T, addr string, connectTimeout time.Duration, f TLSFiles, run func(ctx context.Context, env *Env) error) (code int, stdout, stderr string, took time.Duration) {
	t.Helper()
	var out, errOut bytes.Buffer
	t0 := time.Now()
	code = mainRun(config{
		name: "demo-test", zk: addr, connectTimeout: connectTimeout, timeout: time.Minute, tls: f,
		stdout: &out, stderr: &errOut,
	}, run)
	took = time.Since(t0)
	t.Logf("exit %d after %v\nstdout:\n%sstderr:\n%s", code, took.Round(time.Millisecond), out.String(), errOut.String())
	return code, out.String(), errOut.String(), took
}

// The -tls-* flags make the -zk check and the example's sessions (which take
// env.Options) connect over TLS, also through a fault proxy on 127.0.0.1 as
// the examples' workers do.
//
// -connect-timeout is only a sanity bound here, as long as runTLS's
// -timeout: this is often the first TLS handshake the shared server's JVM
// serves, which on a loaded 2-core machine takes longer than go-zookeeper's
// one-second dial timeout (which bounds each handshake, see
// session.WithTLS), so the check needs several attempts, a second apart
// (seen: up to 7 s at a load of 20).
func TestTLSFlagsConnect(t *testing.T) {
	srv := zktest.SharedTLS(t)
	f := writeTLSFiles(t, srv.TLS())
	var connected bool
	code, stdout, _, _ := runTLS(t, srv.SecureAddr(), time.Minute, f, func(ctx context.Context, env *Env) error {
		p, err := zktest.NewProxy(env.Servers...)
		if err != nil {
			return err
		}
		defer p.Close()
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		s, err := session.Connect(cctx, p.Servers(), env.Options...)
		if err != nil {
			return err
		}
		connected = true
		return s.Close()
	})
	if code != 0 || !connected {
		t.Fatalf("exit code %d, connected %v: want 0 and true", code, connected)
	}
	if !strings.Contains(stdout, "over TLS") || !strings.Contains(stdout, "answers") {
		t.Errorf("stdout does not report the TLS check:\n%s", stdout)
	}
}

// A -tls-ca that did not sign the servers' certificates fails the -zk check
// within -connect-timeout, naming the address and the TLS failure; the
// example does not run.
func TestTLSFlagsWrongCA(t *testing.T) {
	srv := zktest.SharedTLS(t)
	other, err := zktest.NewTLS()
	if err != nil {
		t.Fatal(err)
	}
	f := writeTLSFiles(t, srv.TLS())
	f.CA = writeTLSFiles(t, other).CA
	called := false
	code, _, stderr, took := runTLS(t, srv.SecureAddr(), 2*time.Second, f, func(context.Context, *Env) error {
		called = true
		return errors.New("run called")
	})
	if code != 1 || called {
		t.Fatalf("exit code %d, run called %v: want 1 and false", code, called)
	}
	for _, want := range []string{srv.SecureAddr(), "TLS handshake", "unknown authority"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr does not contain %q:\n%s", want, stderr)
		}
	}
	if took > 2*time.Second+slack {
		t.Errorf("took %v, want about -connect-timeout (2s)", took)
	}
}

// Bad -tls-* flags are usage errors (exit 2) before anything connects: they
// need -zk, -tls-cert and -tls-key go together, and the files must hold PEM.
func TestTLSFlagsUsage(t *testing.T) {
	pki, err := zktest.NewTLS()
	if err != nil {
		t.Fatal(err)
	}
	good := writeTLSFiles(t, pki)
	notPEM := filepath.Join(t.TempDir(), "not.pem")
	if err := os.WriteFile(notPEM, []byte("hello"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		zk   string
		f    TLSFiles
		want string
	}{
		{"noZK", "", good, "need -zk"},
		{"certWithoutKey", "127.0.0.1:1", TLSFiles{CA: good.CA, Cert: good.Cert}, "-tls-cert and -tls-key go together"},
		{"caNotPEM", "127.0.0.1:1", TLSFiles{CA: notPEM}, "-tls-ca"},
		{"caMissing", "127.0.0.1:1", TLSFiles{CA: notPEM + ".missing"}, "-tls-ca"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			called := false
			code, _, stderr, _ := runTLS(t, c.zk, 2*time.Second, c.f, func(context.Context, *Env) error {
				called = true
				return nil
			})
			if code != 2 || called || !strings.Contains(stderr, c.want) {
				t.Fatalf("exit code %d, run called %v, stderr %q: want 2, false and %q", code, called, stderr, c.want)
			}
		})
	}
}

// Without -tls-server-name the certificate must be signed by -tls-ca and
// name one of the -zk hosts (the examples dial their proxies on 127.0.0.1,
// so crypto/tls cannot check the name itself); with it, crypto/tls checks
// that name.
func TestTLSConfigVerifiesAnyZKHost(t *testing.T) {
	pki, err := zktest.NewTLS()
	if err != nil {
		t.Fatal(err)
	}
	other, err := zktest.NewTLS()
	if err != nil {
		t.Fatal(err)
	}
	blk, _ := pem.Decode(pki.ServerCertPEM)
	leaf, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	state := tls.ConnectionState{PeerCertificates: []*x509.Certificate{leaf}}
	f := writeTLSFiles(t, pki)

	cfg, err := TLSConfig(f, []string{"zk1.invalid:2281", "localhost:2281"})
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.VerifyConnection(state); err != nil {
		t.Errorf("a certificate naming localhost, with localhost among the hosts: %v", err)
	}
	if len(cfg.Certificates) != 1 {
		t.Errorf("%d client certificates, want 1", len(cfg.Certificates))
	}
	cfg, err = TLSConfig(f, []string{"zk1.invalid:2281", "zk2.invalid:2281"})
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.VerifyConnection(state); err == nil || !strings.Contains(err.Error(), "-tls-server-name") {
		t.Errorf("a certificate naming none of the hosts: %v, want an error pointing at -tls-server-name", err)
	}
	wrong := f
	wrong.CA = writeTLSFiles(t, other).CA
	cfg, err = TLSConfig(wrong, []string{"localhost:2281"})
	if err != nil {
		t.Fatal(err)
	}
	var unknown x509.UnknownAuthorityError
	if err := cfg.VerifyConnection(state); !errors.As(err, &unknown) {
		t.Errorf("a certificate of another CA: %v, want x509.UnknownAuthorityError", err)
	}

	named := f
	named.ServerName = "zk.example"
	cfg, err = TLSConfig(named, []string{"localhost:2281"})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.ServerName != "zk.example" || cfg.InsecureSkipVerify || cfg.VerifyConnection != nil {
		t.Errorf("with -tls-server-name: ServerName %q, InsecureSkipVerify %v, custom verification %v; want crypto/tls's own check of zk.example",
			cfg.ServerName, cfg.InsecureSkipVerify, cfg.VerifyConnection != nil)
	}
}
