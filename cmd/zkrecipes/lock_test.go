package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/zktest"
)

// The job runs holding the lock, with its token, path and id in the
// environment (holders, while it runs, reports the same node, id and token);
// the command exits with the job's code and the lock is free afterwards.
// The connection settings come from the environment here.
func TestLockRunsJob(t *testing.T) {
	ns := zktest.NewNamespace(t)
	zc := ns.Conn(t)
	dir := t.TempDir()
	job := script(t, dir, "job.sh", `env | grep ^ZKRECIPES_ | grep -v -e SERVERS -e NAMESPACE > "$1/env.tmp"
mv "$1/env.tmp" "$1/env"
while [ ! -e "$1/go" ]; do sleep 0.02; done
exit 7
`)
	// The variables of an outer zkrecipes (a job that runs zkrecipes) are
	// replaced, not duplicated.
	env := []string{"ZKRECIPES_SERVERS=" + strings.Join(ns.Servers(), ","), "ZKRECIPES_NAMESPACE=" + ns.Root,
		"ZKRECIPES_TOKEN=1", "ZKRECIPES_ID=outer", "ZKRECIPES_PATH=/outer", "ZKRECIPES_NODE=outer-node"}
	p := start(t, "lock", env, "lock", "--id", "cron@host1", "/jobs/report", "--", "sh", job, dir)
	zktest.Eventually(t, waitLong, func() bool { return exists(filepath.Join(dir, "env")) }, "the job did not start")

	b, err := os.ReadFile(filepath.Join(dir, "env"))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		k, v, _ := strings.Cut(l, "=")
		if _, dup := got[k]; dup {
			t.Errorf("the job's environment has %s twice", k)
		}
		got[k] = v
	}
	code, out, stderr := runCmd(t, env, "holders", "--json", "/jobs/report")
	if code != 0 {
		t.Fatalf("holders: exit %d: %s", code, stderr)
	}
	var hs []participantJSON
	if err := json.Unmarshal([]byte(out), &hs); err != nil {
		t.Fatalf("holders --json %q: %v", out, err)
	}
	if len(hs) != 1 || !hs[0].Holds || hs[0].ID != "cron@host1" || hs[0].Kind != "lock" {
		t.Fatalf("holders: %+v, want one holder cron@host1", hs)
	}
	if got["ZKRECIPES_ID"] != "cron@host1" || got["ZKRECIPES_PATH"] != "/jobs/report" ||
		got["ZKRECIPES_NODE"] != hs[0].Node || got["ZKRECIPES_TOKEN"] != strconv.FormatInt(hs[0].Token, 10) || hs[0].Token <= 0 {
		t.Errorf("job environment %v; holders says %+v", got, hs[0])
	}
	code, out, _ = runCmd(t, env, "holders", "/jobs/report")
	if code != 0 || !strings.HasPrefix(out, "holds\tcron@host1\t"+hs[0].Node+"\t") {
		t.Errorf("holders (text): exit %d, %q", code, out)
	}

	if err := os.WriteFile(filepath.Join(dir, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(t); code != 7 {
		t.Fatalf("exit %d, want the job's 7; stderr:\n%s", code, p.stderr.String())
	}
	if kids := children(zc, ns, "/jobs/report"); len(kids) != 0 {
		t.Errorf("lock nodes left after the command: %v", kids)
	}
	code, out, _ = runCmd(t, env, "holders", "--json", "/jobs/report")
	if code != 0 || strings.TrimSpace(out) != "[]" {
		t.Errorf("holders after the release: exit %d, %q", code, out)
	}

	// env prints its environment as it got it (a shell would merge
	// duplicates): each variable once, with this command's value.
	code, out, _ = runCmd(t, env, "lock", "--id", "inner", "/jobs/inner", "--", "env")
	seen := map[string]int{}
	for _, l := range strings.Split(out, "\n") {
		if k, v, ok := strings.Cut(l, "="); ok && strings.HasPrefix(k, "ZKRECIPES_") {
			seen[k]++
			if k == "ZKRECIPES_ID" && v != "inner" || k == "ZKRECIPES_PATH" && v != "/jobs/inner" {
				t.Errorf("the job's %s is %q", k, v)
			}
		}
	}
	for _, k := range []string{"ZKRECIPES_TOKEN", "ZKRECIPES_ID", "ZKRECIPES_PATH", "ZKRECIPES_NODE"} {
		if seen[k] != 1 {
			t.Errorf("exit %d: the job's environment has %s %d times, want once", code, k, seen[k])
		}
	}
}

// A command that cannot be found exits 127, one that cannot be executed
// 126, like a shell's, and neither leaves a node.
func TestLockCommandNotStarted(t *testing.T) {
	ns := zktest.NewNamespace(t)
	zc := ns.Conn(t)
	notExec := filepath.Join(t.TempDir(), "not-executable")
	if err := os.WriteFile(notExec, []byte("true\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		command string
		code    int
	}{{"no-such-command-zkr", 127}, {notExec, 126}} {
		code, _, stderr := runCmd(t, nil, args([]string{"lock"}, conn(ns, 10*time.Second), []string{"/nf", "--", tc.command})...)
		if code != tc.code || !strings.Contains(stderr, tc.command) {
			t.Errorf("%s: exit %d, stderr %q: want %d naming the command", tc.command, code, stderr, tc.code)
		}
	}
	if kids := children(zc, ns, "/nf"); len(kids) != 0 {
		t.Errorf("lock nodes left: %v", kids)
	}
}

// While one command holds the lock, --try exits 75 at once and --timeout
// exits 75 after its time; both leave no node, and the holder is unaffected.
func TestLockTryAndTimeout(t *testing.T) {
	ns := zktest.NewNamespace(t)
	zc := ns.Conn(t)
	dir := t.TempDir()
	hold := script(t, dir, "hold.sh", `: > "$1/held"; while [ ! -e "$1/go" ]; do sleep 0.02; done`)
	c := conn(ns, 10*time.Second)
	holder := start(t, "holder", nil, args([]string{"lock"}, c, []string{"/busy", "--", "sh", hold, dir})...)
	zktest.Eventually(t, waitLong, func() bool { return exists(filepath.Join(dir, "held")) }, "the holder's job did not start")

	marker := filepath.Join(dir, "ran")
	code, _, stderr := runCmd(t, nil, args([]string{"lock", "--try"}, c, []string{"/busy", "--", "touch", marker})...)
	if code != exitNotAcquired || !strings.Contains(stderr, "taken") {
		t.Errorf("--try: exit %d, stderr %q: want %d", code, stderr, exitNotAcquired)
	}
	t0 := time.Now()
	code, _, stderr = runCmd(t, nil, args([]string{"lock", "--timeout", "1s"}, c, []string{"/busy", "--", "touch", marker})...)
	took := time.Since(t0)
	if code != exitNotAcquired || !strings.Contains(stderr, "within --timeout 1s") {
		t.Errorf("--timeout: exit %d, stderr %q: want %d", code, stderr, exitNotAcquired)
	}
	if took < time.Second {
		t.Errorf("--timeout 1s returned after %v", took)
	}
	// A signal while waiting: exit 128+15, no job, no node left behind.
	waiter := start(t, "waiter", nil, args([]string{"lock"}, c, []string{"/busy", "--", "touch", marker})...)
	zktest.Eventually(t, waitLong, func() bool { return len(children(zc, ns, "/busy")) == 2 }, "the waiter did not queue")
	if err := waiter.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := waiter.wait(t); code != 128+int(syscall.SIGTERM) {
		t.Errorf("SIGTERM while waiting: exit %d, want %d", code, 128+int(syscall.SIGTERM))
	}
	if exists(marker) {
		t.Error("a job ran without the lock")
	}
	if kids := children(zc, ns, "/busy"); len(kids) != 1 {
		t.Errorf("lock nodes %v: want the holder's only", kids)
	}
	if err := os.WriteFile(filepath.Join(dir, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if code := holder.wait(t); code != 0 {
		t.Errorf("holder: exit %d", code)
	}
	code, _, _ = runCmd(t, nil, args([]string{"lock", "--try"}, c, []string{"/busy", "--", "touch", marker})...)
	if code != 0 || !exists(marker) {
		t.Errorf("--try on a free lock: exit %d, job ran %v", code, exists(marker))
	}
}

// SIGINT, SIGTERM and SIGHUP to the command reach the job's process group, the
// lock is still held while the job handles the signal (the job itself asks
// holders), the command exits with the job's code, and the lock is free
// afterwards. SIGTERM reaches the grandchild too; a background grandchild of
// sh ignores SIGINT (POSIX), so with SIGINT it is stopped as a process the
// job left behind; either way it is dead when the command exits.
func TestLockForwardsSignals(t *testing.T) {
	ns := zktest.NewNamespace(t)
	zc := ns.Conn(t)
	env := []string{"ZKRECIPES_SERVERS=" + strings.Join(ns.Servers(), ","), "ZKRECIPES_NAMESPACE=" + ns.Root}
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP} {
		t.Run(signalName(sig), func(t *testing.T) {
			dir := t.TempDir()
			name := signalName(sig)[3:]
			job := script(t, dir, "job.sh", `sh -c 'echo $$ > "$1/gc.pid"; trap "echo got > \"$1/gc.sig\"; exit 0" TERM; while :; do sleep 0.02; done' gc "$1" &
trap '"$2" holders "$ZKRECIPES_PATH" > "$1/holders"; echo got > "$1/job.sig"; exit 5' `+name+`
: > "$1/ready"
while :; do sleep 0.02; done
`)
			path := "/sig-" + name
			p := start(t, "lock", env, "lock", path, "--", "sh", job, dir, binPath)
			zktest.Eventually(t, waitLong, func() bool {
				return exists(filepath.Join(dir, "ready")) && exists(filepath.Join(dir, "gc.pid"))
			}, "the job did not start")
			if err := p.cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			if code := p.wait(t); code != 5 {
				t.Fatalf("exit %d, want the job's 5", code)
			}
			if !exists(filepath.Join(dir, "job.sig")) {
				t.Fatal("the job got no signal")
			}
			b, err := os.ReadFile(filepath.Join(dir, "holders"))
			if err != nil || !strings.HasPrefix(string(b), "holds\t") {
				t.Errorf("holders as the job handled the signal: %q, %v: want the lock held", b, err)
			}
			if sig == syscall.SIGTERM && !exists(filepath.Join(dir, "gc.sig")) {
				t.Error("the grandchild got no SIGTERM")
			}
			if gc := readPID(t, filepath.Join(dir, "gc.pid")); alive(gc) {
				t.Errorf("the grandchild (pid %d) outlived the command", gc)
			}
			if kids := children(zc, ns, path); len(kids) != 0 {
				t.Errorf("lock nodes left: %v", kids)
			}
		})
	}
}

// When the lease ends while the job ignores SIGTERM (here: a third party
// deletes the lock node), the command sends SIGTERM to the whole group, then
// SIGKILL after --grace, and exits 79 once the job and its grandchild are
// dead.
func TestLockLostKillsIgnoringJob(t *testing.T) {
	ns := zktest.NewNamespace(t)
	zc := ns.Conn(t)
	dir := t.TempDir()
	job := script(t, dir, "job.sh", `trap '' TERM
echo $$ > "$1/job.pid"
sh -c 'echo $$ > "$1/gc.pid.tmp"; mv "$1/gc.pid.tmp" "$1/gc.pid"; while :; do sleep 0.02; done' gc "$1" &
echo "$ZKRECIPES_NODE" > "$1/node.tmp"; mv "$1/node.tmp" "$1/node"
while :; do sleep 0.02; done
`)
	const grace = 400 * time.Millisecond
	p := start(t, "lock", nil, args([]string{"lock", "-v", "--grace", grace.String()}, conn(ns, 10*time.Second), []string{"/del", "--", "sh", job, dir})...)
	zktest.Eventually(t, waitLong, func() bool {
		return exists(filepath.Join(dir, "node")) && exists(filepath.Join(dir, "gc.pid"))
	}, "the job did not start")
	b, err := os.ReadFile(filepath.Join(dir, "node"))
	if err != nil {
		t.Fatal(err)
	}
	jobPID, gcPID := readPID(t, filepath.Join(dir, "job.pid")), readPID(t, filepath.Join(dir, "gc.pid"))
	deleted := time.Now()
	if err := zc.Delete(ns.Path("/del/"+strings.TrimSpace(string(b))), -1); err != nil {
		t.Fatal(err)
	}
	code := p.wait(t)
	took := p.ended.Sub(deleted)
	t.Logf("node deleted; command exited %d after %v\n%s", code, took.Round(time.Millisecond), p.stderr.String())
	if code != exitLost {
		t.Fatalf("exit %d, want %d", code, exitLost)
	}
	if took < grace {
		t.Errorf("exited %v after the deletion: before --grace %v, so SIGKILL came early", took, grace)
	}
	if !strings.Contains(p.stderr.String(), "SIGKILL") || !strings.Contains(p.stderr.String(), "node deleted") {
		t.Errorf("stderr does not report the SIGKILL and the cause")
	}
	if alive(jobPID) || alive(gcPID) {
		t.Errorf("job (pid %d) alive %v, grandchild (pid %d) alive %v after the command exited", jobPID, alive(jobPID), gcPID, alive(gcPID))
	}
}

// A job that exits leaving a background process in its group: the command
// stops that process before it releases the lock, and exits with the job's
// code.
func TestLockStopsLeftovers(t *testing.T) {
	ns := zktest.NewNamespace(t)
	dir := t.TempDir()
	job := script(t, dir, "job.sh", `sleep 1000 &
echo $! > "$1/gc.pid"
exit 3
`)
	p := start(t, "lock", nil, args([]string{"lock", "-v"}, conn(ns, 10*time.Second), []string{"/left", "--", "sh", job, dir})...)
	if code := p.wait(t); code != 3 {
		t.Fatalf("exit %d, want the job's 3", code)
	}
	gc := readPID(t, filepath.Join(dir, "gc.pid"))
	if alive(gc) {
		t.Errorf("the job's background sleep (pid %d) outlived the command", gc)
	}
	stderr := p.stderr.String()
	stopped, released := strings.Index(stderr, "the job left behind"), strings.Index(stderr, "released /left")
	if stopped < 0 || released < stopped {
		t.Errorf("stderr does not show the leftover stopped before the release:\n%s", stderr)
	}
}
