package main

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/internal/testkit/sessiontest"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// A server that grants a shorter session timeout than asked lowers the
// grace to a quarter of the granted one: the command says so, and SIGKILL
// follows SIGTERM after the lowered grace.
func TestGraceLoweredToGrantedTimeout(t *testing.T) {
	srv := zktest.StartServerT(t, zktest.WithConfig("maxSessionTimeout", "2000"))
	ns := zktest.NewNamespaceOn(t, srv)
	zc := ns.Conn(t)
	dir := t.TempDir()
	job := script(t, dir, "job.sh", `trap '' TERM
echo "$ZKRECIPES_NODE" > "$1/node.tmp"; mv "$1/node.tmp" "$1/node"
while :; do sleep 0.02; done
`)
	// Asked: 8 s, so the default grace is 1.6 s; granted: 2 s, so 500 ms.
	p := start(t, "lock", nil, args([]string{"lock", "-v"}, conn(ns, 8*time.Second), []string{"/g", "--", "sh", job, dir})...)
	zktest.Eventually(t, waitLong, func() bool { return exists(filepath.Join(dir, "node")) }, "the job did not start")
	b, err := os.ReadFile(filepath.Join(dir, "node"))
	if err != nil {
		t.Fatal(err)
	}
	if err := zc.Delete(ns.Path("/g/"+strings.TrimSpace(string(b))), -1); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(t); code != exitLost {
		t.Fatalf("exit %d, want %d", code, exitLost)
	}
	stderr := p.stderr.String()
	if !strings.Contains(stderr, "granted a session timeout of 2s: grace lowered from 1.6s to 500ms") {
		t.Errorf("stderr does not report the lowered grace:\n%s", stderr)
	}
	term, kill := logTime(t, stderr, "sent SIGTERM"), logTime(t, stderr, "sent SIGKILL")
	if d := kill.Sub(term); d < 500*time.Millisecond || d >= 1600*time.Millisecond {
		t.Errorf("SIGKILL %v after SIGTERM: want the lowered grace, 500ms (not 1.6s)", d)
	}
}

// The TLS flags connect to the server's secure port; a CA that did not sign
// the server's certificate, or a --tls-server-name the certificate does not
// carry, gives exit 69, naming the failed handshake.
func TestTLSFlags(t *testing.T) {
	srv := zktest.SharedTLS(t)
	ns := zktest.NewNamespaceOn(t, srv)
	dir := t.TempDir()
	write := func(name string, pem []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, pem, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tl := srv.TLS()
	ca, cert, key := write("ca.pem", tl.CACertPEM), write("cert.pem", tl.ClientCertPEM), write("key.pem", tl.ClientKeyPEM)
	other, err := zktest.NewTLS()
	if err != nil {
		t.Fatal(err)
	}
	wrongCA := write("other-ca.pem", other.CACertPEM)
	// A cold TLS server's first handshakes can be slow on a loaded machine;
	// the failures need no more than a couple of seconds to show.
	good, bad := []string{"--connect-timeout", "60s"}, []string{"--connect-timeout", "2s"}
	flags := []string{"--servers", srv.SecureAddr(), "--namespace", ns.Root, "--tls-cert", cert, "--tls-key", key}
	marker := filepath.Join(dir, "ran")
	code, _, stderr := runCmd(t, nil, args([]string{"lock", "--tls-ca", ca}, good, flags, []string{"/tls", "--", "touch", marker})...)
	if code != 0 || !exists(marker) {
		t.Fatalf("with the right CA: exit %d, job ran %v; stderr:\n%s", code, exists(marker), stderr)
	}
	code, out, stderr := runCmd(t, nil, args([]string{"holders", "--tls-ca", ca, "--tls-server-name", "localhost"}, good, flags, []string{"/tls"})...)
	if code != 0 {
		t.Errorf("--tls-server-name localhost (in the certificate): exit %d, stdout %q, stderr:\n%s", code, out, stderr)
	}
	code, _, stderr = runCmd(t, nil, args([]string{"holders", "--tls-ca", ca, "--tls-server-name", "elsewhere.example"}, bad, flags, []string{"/tls"})...)
	if code != exitNoConnection || !strings.Contains(stderr, "elsewhere.example") {
		t.Errorf("--tls-server-name elsewhere.example (not in the certificate): exit %d, want %d naming it; stderr:\n%s", code, exitNoConnection, stderr)
	}
	code, _, stderr = runCmd(t, []string{"ZKRECIPES_TLS_CA=" + wrongCA}, args([]string{"holders"}, bad, flags, []string{"/tls"})...)
	if code != exitNoConnection || !strings.Contains(stderr, "certificate") {
		t.Errorf("with another CA (from ZKRECIPES_TLS_CA): exit %d, want %d naming the certificate; stderr:\n%s", code, exitNoConnection, stderr)
	}
}

// --auth (or ZKRECIPES_AUTH) sends digest credentials: on a directory whose
// ACL admits only them, the command runs its job with them and exits 70,
// naming the refusal, without them.
func TestDigestAuth(t *testing.T) {
	ns := zktest.NewNamespace(t)
	zc := sessiontest.DigestConn(t, ns, "ops", "secret")
	if _, err := zc.Create(ns.Path("/secured"), nil, 0, zk.DigestACL(zk.PermAll, "ops", "secret")); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	marker := filepath.Join(dir, "ran")
	c := conn(ns, 10*time.Second)
	code, _, stderr := runCmd(t, nil, args([]string{"lock"}, c, []string{"/secured/job", "--", "touch", marker})...)
	if code != exitFailure || !strings.Contains(stderr, "not authenticated") || exists(marker) {
		t.Errorf("without credentials: exit %d, job ran %v, stderr %q: want %d naming the refusal", code, exists(marker), stderr, exitFailure)
	}
	code, _, stderr = runCmd(t, []string{"ZKRECIPES_AUTH=ops:secret"}, args([]string{"lock"}, c, []string{"/secured/job", "--", "touch", marker})...)
	if code != 0 || !exists(marker) {
		t.Errorf("with ZKRECIPES_AUTH: exit %d, job ran %v; stderr:\n%s", code, exists(marker), stderr)
	}
	if err := os.Remove(marker); err != nil {
		t.Fatal(err)
	}
	code, _, stderr = runCmd(t, nil, args([]string{"lock", "--auth", "ops:secret"}, c, []string{"/secured/job", "--", "touch", marker})...)
	if code != 0 || !exists(marker) {
		t.Errorf("with --auth: exit %d, job ran %v; stderr:\n%s", code, exists(marker), stderr)
	}
}

// An elect whose leadership ends while its job runs (a third party deletes
// its node) stops the job and exits 79.
func TestElectLost(t *testing.T) {
	ns := zktest.NewNamespace(t)
	zc := ns.Conn(t)
	dir := t.TempDir()
	job := script(t, dir, "job.sh", `trap 'date +%s.%N > "$1/end"; exit 0' TERM
echo "$ZKRECIPES_NODE" > "$1/node.tmp"; mv "$1/node.tmp" "$1/node"
while :; do sleep 0.02; done
`)
	p := start(t, "elect", nil, args([]string{"elect"}, conn(ns, 10*time.Second), []string{"/el", "--", "sh", job, dir})...)
	zktest.Eventually(t, waitLong, func() bool { return exists(filepath.Join(dir, "node")) }, "the job did not start")
	b, err := os.ReadFile(filepath.Join(dir, "node"))
	if err != nil {
		t.Fatal(err)
	}
	if err := zc.Delete(ns.Path("/el/"+strings.TrimSpace(string(b))), -1); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(t); code != exitLost {
		t.Fatalf("exit %d, want %d", code, exitLost)
	}
	if !exists(filepath.Join(dir, "end")) || !strings.Contains(p.stderr.String(), "lost while the job ran") {
		t.Errorf("the job got no SIGTERM, or stderr does not say why:\n%s", p.stderr.String())
	}
}

// elect --requeue campaigns again after its leadership is lost: the job,
// stopped when a third party deletes its node, runs again under a new term.
func TestElectRequeueAfterLoss(t *testing.T) {
	ns := zktest.NewNamespace(t)
	zc := ns.Conn(t)
	dir := t.TempDir()
	job := script(t, dir, "job.sh", `echo run >> "$1/runs"
n=$(wc -l < "$1/runs")
trap 'exit 0' TERM
echo "$ZKRECIPES_NODE" > "$1/node.tmp"; mv "$1/node.tmp" "$1/node.$n"
while :; do sleep 0.02; done
`)
	p := start(t, "elect", nil, args([]string{"elect", "--requeue"}, conn(ns, 10*time.Second), []string{"/rq", "--", "sh", job, dir})...)
	zktest.Eventually(t, waitLong, func() bool { return exists(filepath.Join(dir, "node.1")) }, "the job did not start")
	b, err := os.ReadFile(filepath.Join(dir, "node.1"))
	if err != nil {
		t.Fatal(err)
	}
	if err := zc.Delete(ns.Path("/rq/"+strings.TrimSpace(string(b))), -1); err != nil {
		t.Fatal(err)
	}
	zktest.Eventually(t, waitLong, func() bool { return exists(filepath.Join(dir, "node.2")) }, "the job did not run again after the loss")
	b2, err := os.ReadFile(filepath.Join(dir, "node.2"))
	if err != nil {
		t.Fatal(err)
	}
	if string(b2) == string(b) {
		t.Errorf("the second run has the first term's node %s", b)
	}
	if !p.running() {
		t.Fatalf("the command exited (%d) instead of campaigning again", p.code)
	}
	if err := p.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	// sh runs the job with SIGINT at its default: the job dies of it.
	if code := p.wait(t); code != 128+int(syscall.SIGINT) {
		t.Errorf("exit %d, want the job's %d", code, 128+int(syscall.SIGINT))
	}
	if !strings.Contains(p.stderr.String(), "lost while the job ran") {
		t.Errorf("stderr does not report the loss:\n%s", p.stderr.String())
	}
}
