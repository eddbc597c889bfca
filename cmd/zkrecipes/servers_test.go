package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/zktest"
)

// unresolvable is a server whose name never resolves (.invalid is reserved
// for that): a Kubernetes pod being rescheduled has no DNS record for a
// while, and a command started then must still reach the other members.
const unresolvable = "zk-9.no-such-host.invalid:2181"

// A server list in which one name does not resolve: the command skips it
// (saying so under -v), connects to the server that answers, runs its job
// holding the lock and exits with the job's code. With only names that do
// not resolve, it exits 69 within its connect timeout and names the lookup
// failure.
func TestLockSkipsUnresolvableServer(t *testing.T) {
	ns := zktest.NewNamespace(t)
	zc := ns.Conn(t)
	dir := t.TempDir()
	job := script(t, dir, "job.sh", `echo "$ZKRECIPES_NODE" > "$1/ran"
exit 3
`)
	for _, servers := range [][]string{
		append([]string{unresolvable}, ns.Servers()...),
		append(append([]string(nil), ns.Servers()...), unresolvable),
	} {
		list := strings.Join(servers, ",")
		if err := os.Remove(filepath.Join(dir, "ran")); err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Fatal(err)
		}
		code, _, stderr := runCmd(t, nil, "lock", "-v", "--servers", list, "--namespace", ns.Root,
			"--session-timeout", "10s", "--connect-timeout", "20s", "/unresolved", "--", "sh", job, dir)
		if code != 3 || !exists(filepath.Join(dir, "ran")) {
			t.Fatalf("--servers %s: exit %d, job ran %v: want the job run and its exit code 3\nstderr:\n%s", list, code, exists(filepath.Join(dir, "ran")), stderr)
		}
		if !strings.Contains(stderr, "does not resolve") {
			t.Errorf("--servers %s: -v does not report the name that does not resolve:\n%s", list, stderr)
		}
	}
	if kids := children(zc, ns, "/unresolved"); len(kids) != 0 {
		t.Errorf("lock nodes left: %v", kids)
	}

	marker := filepath.Join(dir, "never")
	const connectTimeout = 2 * time.Second
	t0 := time.Now()
	code, _, stderr := runCmd(t, nil, "lock", "--servers", unresolvable+",zk-8.no-such-host.invalid:2181",
		"--connect-timeout", connectTimeout.String(), "/unresolved", "--", "touch", marker)
	took := time.Since(t0)
	if code != exitNoConnection || !strings.Contains(stderr, "no such host") || !strings.Contains(stderr, "zk-9.no-such-host.invalid") {
		t.Errorf("no name resolves: exit %d, stderr %q: want %d naming the lookup failure", code, stderr, exitNoConnection)
	}
	if exists(marker) {
		t.Error("a job ran without a session")
	}
	if took > connectTimeout+10*time.Second {
		t.Errorf("no name resolves: exited after %v, want within --connect-timeout %v", took.Round(time.Millisecond), connectTimeout)
	}
}

// A rolling restart of a three-member ensemble (each member restarted once,
// one at a time, the next only once the last serves again and the command
// is connected again) while the command's job runs: the command is cut off
// at least once (it is always connected to some member), but every
// reconnection comes before the lease deadline, so the job is never
// stopped: it ends when the test lets it, the command exits with its code,
// and the lock node, on the same session, was there throughout.
func TestLockJobRidesRollingRestart(t *testing.T) {
	// A long session timeout: the lease deadline is at least a third of it
	// after a disconnect, 10 s, which covers the election that follows
	// the leader's restart on a busy machine.
	const sessionTimeout = 30 * time.Second
	e := zktest.StartEnsembleT(t, 3, zktest.WithConfig("maxSessionTimeout", "30000"))
	dir := t.TempDir()
	job := script(t, dir, "job.sh", `date +%s.%N > "$1/job.start"
trap 'date +%s.%N > "$1/job.end"; exit 1' TERM
while [ ! -e "$1/stop" ]; do sleep 0.02; done
exit 3
`)
	a := start(t, "holder", nil, "lock", "-v", "--servers", strings.Join(e.Servers(), ","),
		"--session-timeout", sessionTimeout.String(), "/rolling", "--", "sh", job, dir)
	zktest.Eventually(t, waitLong, func() bool { return exists(filepath.Join(dir, "job.start")) }, "the job did not start")

	zc := zktest.Conn(t, e.Servers(), 10*time.Second)
	node, owner := lockNode(t, zc, "/rolling")
	if owner == 0 {
		t.Fatalf("lock node %s is not ephemeral", node)
	}

	for i := 0; i < 3; i++ {
		t0 := time.Now()
		if err := e.Member(i).Restart(); err != nil {
			t.Fatalf("restart member %d: %v", i, err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), waitLong)
		err := e.WaitReady(ctx)
		cancel()
		if err != nil {
			t.Fatalf("after restarting member %d: %v", i, err)
		}
		// The command is connected again once it has reported as many
		// reconnections as suspensions.
		zktest.Eventually(t, waitLong, func() bool {
			s := a.stderr.String()
			return !a.running() || stateCount(s, "Reconnected") >= stateCount(s, "Suspended")
		}, "the command did not reconnect")
		if !a.running() || exists(filepath.Join(dir, "job.end")) {
			t.Fatalf("the job was stopped by the restart of member %d:\n%s", i, a.stderr.String())
		}
		t.Logf("member %d restarted and the command connected in %v (%d suspensions so far)",
			i, time.Since(t0).Round(time.Millisecond), stateCount(a.stderr.String(), "Suspended"))
	}
	stderr := a.stderr.String()
	if stateCount(stderr, "Suspended") == 0 {
		t.Fatalf("the rolling restart never cut the command off: nothing was tested\n%s", stderr)
	}
	if n, o := lockNode(t, zc, "/rolling"); n != node || o != owner {
		t.Errorf("lock node %s of session 0x%x after the rolling restart, want %s of 0x%x", n, o, node, owner)
	}

	if err := os.WriteFile(filepath.Join(dir, "stop"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if code := a.wait(t); code != 3 {
		t.Fatalf("command: exit %d, want the job's 3\nstderr:\n%s", code, a.stderr.String())
	}
	stderr = a.stderr.String()
	if strings.Contains(stderr, "lease ended") || stateCount(stderr, "Lost") > 0 || exists(filepath.Join(dir, "job.end")) {
		t.Errorf("the lease or the session ended across the rolling restart:\n%s", stderr)
	}
	if !strings.Contains(stderr, "released /rolling") {
		t.Errorf("the lock was not released after the job:\n%s", stderr)
	}
}

// stateCount counts the session's state changes to state in a -v log.
func stateCount(stderr, state string) int {
	return strings.Count(stderr, `"state": "`+state+`"`)
}

// lockNode returns the only child of p on the server and its ephemeral
// owner, reading again while the ensemble settles.
func lockNode(t *testing.T, zc *zk.Conn, p string) (string, int64) {
	t.Helper()
	var node string
	var owner int64
	zktest.Eventually(t, waitLong, func() bool {
		kids, _, err := zc.Children(p)
		if err != nil || len(kids) != 1 {
			return false
		}
		_, st, err := zc.Get(p + "/" + kids[0])
		if err != nil {
			return false
		}
		node, owner = kids[0], st.EphemeralOwner
		return true
	}, "cannot read the lock node")
	return node, owner
}
