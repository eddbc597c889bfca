package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/zktest"
)

// A job starts a process that leaves its group (setsid) and writes its own
// end time when it gets SIGTERM. A third party deletes the lock node: that
// process is dead (reaped) when the command exits 79, its end time comes
// before the exit, and another command's job starts after it.
func TestLockLostStopsProcessOutsideGroup(t *testing.T) {
	ns := zktest.NewNamespace(t)
	zc := ns.Conn(t)
	dir := t.TempDir()
	job := script(t, dir, "job.sh", `setsid sh -c 'trap "date +%s.%N > \"$1/sid.end\"; exit 0" TERM
echo $$ > "$1/sid.pid.tmp"; mv "$1/sid.pid.tmp" "$1/sid.pid"
while :; do sleep 0.02; done' sid "$1" &
echo "$ZKRECIPES_NODE" > "$1/node.tmp"; mv "$1/node.tmp" "$1/node"
while :; do sleep 0.02; done
`)
	c := conn(ns, 10*time.Second)
	p := start(t, "lock", nil, args([]string{"lock", "-v", "--grace", "1s"}, c, []string{"/sid", "--", "sh", job, dir})...)
	zktest.Eventually(t, waitLong, func() bool {
		return exists(filepath.Join(dir, "node")) && exists(filepath.Join(dir, "sid.pid"))
	}, "the job did not start")
	sid := readPID(t, filepath.Join(dir, "sid.pid"))
	t.Cleanup(func() { _ = syscall.Kill(sid, syscall.SIGKILL) })
	if pgid, err := syscall.Getpgid(sid); err != nil || pgid == p.cmd.Process.Pid {
		t.Fatalf("the setsid process is in group %d (%v)", pgid, err)
	}
	node, err := os.ReadFile(filepath.Join(dir, "node"))
	if err != nil {
		t.Fatal(err)
	}
	if err := zc.Delete(ns.Path("/sid/"+strings.TrimSpace(string(node))), -1); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(t); code != exitLost {
		t.Fatalf("exit %d, want %d", code, exitLost)
	}
	if alive(sid) {
		t.Fatalf("the setsid process (pid %d) outlived the command", sid)
	}
	if !exists(filepath.Join(dir, "sid.end")) {
		t.Fatal("the setsid process got no SIGTERM")
	}
	sidEnd := readStamp(t, filepath.Join(dir, "sid.end"))
	if !sidEnd.Before(p.ended) {
		t.Errorf("the setsid process ended at %v, after the command exited at %v", sidEnd, p.ended)
	}
	second := script(t, dir, "second.sh", `date +%s.%N > "$1/second.start"`)
	if code, _, stderr := runCmd(t, nil, args([]string{"lock"}, c, []string{"/sid", "--", "sh", second, dir})...); code != 0 {
		t.Fatalf("second command: exit %d: %s", code, stderr)
	}
	if secondStart := readStamp(t, filepath.Join(dir, "second.start")); !sidEnd.Before(secondStart) {
		t.Errorf("the setsid process ended at %v, after the next job started at %v", sidEnd, secondStart)
	}
}

// A job stopped by SIGSTOP (as one that reads from the terminal is by
// SIGTTIN) gets SIGCONT right after SIGTERM, so it acts on SIGTERM at once
// instead of being killed after the grace.
func TestLockLostContinuesStoppedJob(t *testing.T) {
	ns := zktest.NewNamespace(t)
	zc := ns.Conn(t)
	dir := t.TempDir()
	// The shell forks nothing once it is ready: dash starts a command with
	// vfork, and a SIGSTOP that lands between a vfork and its exec stops
	// the child and leaves the shell waiting for it, uninterruptible ('D'),
	// not stopped. It waits for one child started before instead.
	job := script(t, dir, "job.sh", `trap 'date +%s.%N > "$1/term"; exit 0' TERM
sleep 1000 &
echo $$ > "$1/job.pid"
echo "$ZKRECIPES_NODE" > "$1/node.tmp"; mv "$1/node.tmp" "$1/node"
wait
`)
	const grace = 2 * time.Second
	p := start(t, "lock", nil, args([]string{"lock", "-v", "--grace", grace.String()}, conn(ns, 10*time.Second), []string{"/stopped", "--", "sh", job, dir})...)
	zktest.Eventually(t, waitLong, func() bool { return exists(filepath.Join(dir, "node")) }, "the job did not start")
	node, err := os.ReadFile(filepath.Join(dir, "node"))
	if err != nil {
		t.Fatal(err)
	}
	// The job's shell leads its group; stop all of it.
	pgid := readPID(t, filepath.Join(dir, "job.pid"))
	if err := syscall.Kill(-pgid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	zktest.Eventually(t, waitLong, func() bool { return procState(pgid) == 'T' }, "the job did not stop")
	deleted := time.Now()
	if err := zc.Delete(ns.Path("/stopped/"+strings.TrimSpace(string(node))), -1); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(t); code != exitLost {
		t.Fatalf("exit %d, want %d", code, exitLost)
	}
	if !exists(filepath.Join(dir, "term")) {
		t.Fatalf("the stopped job never acted on SIGTERM (killed after the grace):\n%s", p.stderr.String())
	}
	if term := readStamp(t, filepath.Join(dir, "term")); term.Sub(deleted) >= grace {
		t.Errorf("the job handled SIGTERM %v after the deletion, not before the grace %v", term.Sub(deleted), grace)
	}
}

// procState returns the state letter of process pid, 0 if it is gone.
func procState(pid int) byte {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+2 >= len(s) {
		return 0
	}
	return s[i+2]
}

// A process of the job that SIGKILL cannot end (frozen by the cgroup v1
// freezer, in uninterruptible sleep as after a hung NFS read): the command
// gives up after its kill bound and exits 70 without releasing the lock or
// closing its session, so the node stays until the session expires.
func TestLockUnkillableLeftoverKeepsNode(t *testing.T) {
	freezer := freezerGroup(t)
	ns := zktest.NewNamespace(t)
	zc := ns.Conn(t)
	dir := t.TempDir()
	job := script(t, dir, "job.sh", `sleep 1000 </dev/null >/dev/null 2>&1 &
echo $! > "$1/gc.pid.tmp"; mv "$1/gc.pid.tmp" "$1/gc.pid"
while [ ! -e "$1/go" ]; do sleep 0.02; done
`)
	const sessionTimeout = 2 * time.Second
	p := start(t, "lock", nil, args([]string{"lock", "-v", "--grace", "100ms"}, conn(ns, sessionTimeout), []string{"/frozen", "--", "sh", job, dir})...)
	zktest.Eventually(t, waitLong, func() bool { return exists(filepath.Join(dir, "gc.pid")) }, "the job did not start")
	gc := readPID(t, filepath.Join(dir, "gc.pid"))
	freezer.freeze(t, gc)
	if err := os.WriteFile(filepath.Join(dir, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	code := p.wait(t)
	kids := children(zc, ns, "/frozen")
	t.Logf("exit %d; lock nodes right after: %v\n%s", code, kids, p.stderr.String())
	if code != exitFailure {
		t.Errorf("exit %d, want %d", code, exitFailure)
	}
	if !strings.Contains(p.stderr.String(), "without releasing") {
		t.Errorf("stderr does not say the lock was left to the session's expiry")
	}
	if len(kids) != 1 {
		t.Fatalf("lock nodes %v right after the exit: want the node left to the session's expiry", kids)
	}
	zktest.Eventually(t, waitLong, func() bool { return len(children(zc, ns, "/frozen")) == 0 }, "the node outlived the session")
}

// cgroupFreezer is a cgroup v1 freezer group of one test.
type cgroupFreezer struct{ dir string }

// freezerGroup makes a freezer cgroup, thawed and removed in t.Cleanup with
// the processes in it killed. It needs root and the cgroup v1 freezer
// (/sys/fs/cgroup/freezer): only there does a frozen process stay after
// SIGKILL, as one in uninterruptible sleep does.
func freezerGroup(t *testing.T) *cgroupFreezer {
	t.Helper()
	root := "/sys/fs/cgroup/freezer"
	dir := filepath.Join(root, fmt.Sprintf("zkrecipes-test-%d-%d", os.Getpid(), time.Now().UnixNano()))
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatalf("this test needs root and the cgroup v1 freezer at %s to hold a process that SIGKILL cannot end: %v", root, err)
	}
	t.Cleanup(func() {
		_ = os.WriteFile(filepath.Join(dir, "freezer.state"), []byte("THAWED"), 0o644)
		b, _ := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		zktest.Eventually(t, waitLong, func() bool {
			return os.Remove(dir) == nil || !exists(dir)
		}, "cgroup %s not removed", dir)
	})
	return &cgroupFreezer{dir}
}

// freeze moves pid into the group and freezes it.
func (f *cgroupFreezer) freeze(t *testing.T, pid int) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(f.dir, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(f.dir, "freezer.state"), []byte("FROZEN"), 0o644); err != nil {
		t.Fatal(err)
	}
	zktest.Eventually(t, waitLong, func() bool {
		b, err := os.ReadFile(filepath.Join(f.dir, "freezer.state"))
		return err == nil && strings.TrimSpace(string(b)) == "FROZEN"
	}, "pid %d not frozen", pid)
}
