package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/zktest"
)

// Two elect commands on one election: the first leads and runs its job,
// the second waits; leader names the first; when the first job exits, the
// first command exits with its code and the second leads and runs its job.
// observe --json, running throughout, prints the first, then the second,
// then nobody, and exits 0 on SIGINT.
func TestElect(t *testing.T) {
	ns := zktest.NewNamespace(t)
	zc := ns.Conn(t)
	c := conn(ns, 10*time.Second)
	dir := t.TempDir()
	job := script(t, dir, "job.sh", `: > "$1/$2.leads"
while [ ! -e "$1/$2.go" ]; do sleep 0.02; done
exit $3
`)
	obs := start(t, "observe", nil, args([]string{"observe", "--json"}, c, []string{"/sched"})...)
	a := start(t, "elect-a", nil, args([]string{"elect", "--id", "a"}, c, []string{"/sched", "--", "sh", job, dir, "a", "4"})...)
	zktest.Eventually(t, waitLong, func() bool { return exists(filepath.Join(dir, "a.leads")) }, "a did not lead")
	observed := func(want string) {
		t.Helper()
		zktest.Eventually(t, waitLong, func() bool { return strings.HasSuffix(observedLeaders(obs), want) }, "observe did not print %s", want)
	}
	observed("a")
	b := start(t, "elect-b", nil, args([]string{"elect", "--id", "b"}, c, []string{"/sched", "--", "sh", job, dir, "b", "0"})...)
	zktest.Eventually(t, waitLong, func() bool { return len(children(zc, ns, "/sched")) == 2 }, "b did not enter the election")

	code, out, _ := runCmd(t, nil, args([]string{"leader", "--json"}, c, []string{"/sched"})...)
	var p participantJSON
	if err := json.Unmarshal([]byte(out), &p); code != 0 || err != nil || p.ID != "a" || !p.Holds || p.Kind != "latch" {
		t.Fatalf("leader --json: exit %d, %q (%v): want a", code, out, err)
	}
	if exists(filepath.Join(dir, "b.leads")) {
		t.Fatal("b's job runs while a leads")
	}
	// A third one, --requeue, stopped by SIGTERM while it campaigns: 128+15,
	// its node gone, no job run.
	third := start(t, "elect-c", nil, args([]string{"elect", "--requeue", "--id", "c"}, c, []string{"/sched", "--", "sh", job, dir, "c", "0"})...)
	zktest.Eventually(t, waitLong, func() bool { return len(children(zc, ns, "/sched")) == 3 }, "c did not enter the election")
	if err := third.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := third.wait(t); code != 128+int(syscall.SIGTERM) {
		t.Errorf("c, stopped while campaigning: exit %d, want %d", code, 128+int(syscall.SIGTERM))
	}
	if n := len(children(zc, ns, "/sched")); n != 2 || exists(filepath.Join(dir, "c.leads")) {
		t.Errorf("after c stopped: %d participants, c's job ran %v", n, exists(filepath.Join(dir, "c.leads")))
	}
	if err := os.WriteFile(filepath.Join(dir, "a.go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if code := a.wait(t); code != 4 {
		t.Fatalf("a: exit %d, want its job's 4", code)
	}
	zktest.Eventually(t, waitLong, func() bool { return exists(filepath.Join(dir, "b.leads")) }, "b did not lead after a")
	code, out, _ = runCmd(t, nil, args([]string{"leader"}, c, []string{"/sched"})...)
	if code != 0 || !strings.HasPrefix(out, "holds\tb\t") {
		t.Errorf("leader: exit %d, %q: want b", code, out)
	}
	observed("a b")
	if err := os.WriteFile(filepath.Join(dir, "b.go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if code := b.wait(t); code != 0 {
		t.Fatalf("b: exit %d", code)
	}
	code, out, _ = runCmd(t, nil, args([]string{"leader", "--json"}, c, []string{"/sched"})...)
	if code != 1 || strings.TrimSpace(out) != "null" {
		t.Errorf("leader with nobody leading: exit %d, %q: want 1 and null", code, out)
	}

	observed("a b -")
	if err := obs.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if code := obs.wait(t); code != 0 {
		t.Errorf("observe: exit %d after SIGINT", code)
	}
	t.Logf("observe printed:\n%s", obs.stdout.String())
}

// observedLeaders returns the leaders observe --json printed, in order,
// repeats merged: "a b -" ("-": nobody).
func observedLeaders(obs *proc) string {
	var ids []string
	for _, l := range strings.Split(strings.TrimSpace(obs.stdout.String()), "\n") {
		var v observeJSON
		if json.Unmarshal([]byte(l), &v) != nil {
			continue
		}
		id := "-"
		if v.Leader != nil {
			id = v.Leader.ID
		}
		if len(ids) == 0 || ids[len(ids)-1] != id {
			ids = append(ids, id)
		}
	}
	return strings.Join(ids, " ")
}

// elect --requeue campaigns again after its job exits, and runs the job again
// while it leads alone; SIGTERM then goes to the running job, whose exit code
// the command returns.
func TestElectRequeue(t *testing.T) {
	ns := zktest.NewNamespace(t)
	dir := t.TempDir()
	job := script(t, dir, "job.sh", `echo run >> "$1/runs"
n=$(wc -l < "$1/runs")
if [ "$n" -lt 2 ]; then exit 0; fi
trap 'exit 9' TERM
: > "$1/second"
while :; do sleep 0.02; done
`)
	p := start(t, "elect", nil, args([]string{"elect", "--requeue"}, conn(ns, 10*time.Second), []string{"/svc", "--", "sh", job, dir})...)
	zktest.Eventually(t, waitLong, func() bool { return exists(filepath.Join(dir, "second")) }, "the job did not run a second time")
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(t); code != 9 {
		t.Fatalf("exit %d, want the running job's 9", code)
	}
}
