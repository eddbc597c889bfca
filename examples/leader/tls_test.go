package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/zkrecipes/zkrecipes/examples/internal/demo"
	"github.com/zkrecipes/zkrecipes/session"
	"github.com/zkrecipes/zkrecipes/zktest"
)

func TestMain(m *testing.M) { zktest.Main(m) }

// The whole demo runs over TLS against a TLS server, as with -zk and the
// -tls-* flags: its workers' sessions connect through their fault proxies to
// the secure port, the leader steps down when partitioned and another takes
// over, and the demo ends with its summary.
func TestDemoOverTLS(t *testing.T) {
	srv := zktest.SharedTLS(t)
	dir := t.TempDir()
	f := demo.TLSFiles{
		CA:   filepath.Join(dir, "ca.pem"),
		Cert: filepath.Join(dir, "client.pem"),
		Key:  filepath.Join(dir, "client-key.pem"),
	}
	pki := srv.TLS()
	for name, data := range map[string][]byte{f.CA: pki.CACertPEM, f.Cert: pki.ClientCertPEM, f.Key: pki.ClientKeyPEM} {
		if err := os.WriteFile(name, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cfg, err := demo.TLSConfig(f, srv.SecureServers())
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	env := &demo.Env{
		Servers: srv.SecureServers(),
		Options: []session.Option{session.WithTLS(cfg)},
		Logger:  zap.NewNop(),
		Out:     demo.NewPrinter(&out),
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	start := time.Now()
	err = run(ctx, env)
	t.Logf("demo over TLS took %v:\n%s", time.Since(start).Round(time.Millisecond), out.String())
	if err != nil {
		t.Fatalf("demo: %v", err)
	}
	for _, want := range []string{"stepped down", "never two leaders at once"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the demo's output lacks %q", want)
		}
	}
}
