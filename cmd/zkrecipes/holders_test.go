package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/internal/testkit/curatortest"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// holders -n lists a semaphore's waiters after its holder, in queue order:
// the first waiter holds the semaphore's mutex and waits for a lease, the
// second queues behind it in PATH/locks. Once the holder is gone, the first
// waiter holds and the second still waits.
func TestHoldersListsSemaphoreWaiters(t *testing.T) {
	ns := zktest.NewNamespace(t)
	zc := ns.Conn(t)
	dir := t.TempDir()
	job := script(t, dir, "job.sh", `: > "$1/run.$ZKRECIPES_ID"; while [ ! -e "$1/go.$ZKRECIPES_ID" ]; do sleep 0.02; done`)
	c := conn(ns, 10*time.Second)
	sem := func(id string) *proc {
		return start(t, id, nil, args([]string{"sem", "-n", "1", "--id", id}, c, []string{"/pool", "--", "sh", job, dir})...)
	}
	ps := map[string]*proc{"h": sem("h")}
	zktest.Eventually(t, waitLong, func() bool { return exists(filepath.Join(dir, "run.h")) }, "the holder's job did not start")
	ps["w1"] = sem("w1")
	zktest.Eventually(t, waitLong, func() bool { return len(children(zc, ns, "/pool/locks")) == 1 }, "w1 does not queue")
	ps["w2"] = sem("w2")
	zktest.Eventually(t, waitLong, func() bool { return len(children(zc, ns, "/pool/locks")) == 2 }, "w2 does not queue")

	holders := func(want ...string) {
		t.Helper()
		code, out, stderr := runCmd(t, nil, args([]string{"holders", "-n", "1"}, c, []string{"/pool"})...)
		if code != 0 {
			t.Fatalf("holders -n 1: exit %d: %s", code, stderr)
		}
		var got []string
		for _, l := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
			f := strings.Split(l, "\t")
			got = append(got, f[0]+" "+f[1])
		}
		if strings.Join(got, ", ") != strings.Join(want, ", ") {
			t.Errorf("holders -n 1: %q, want %q:\n%s", got, want, out)
		}
		code, out, stderr = runCmd(t, nil, args([]string{"holders", "-n", "1", "--json"}, c, []string{"/pool"})...)
		var js []participantJSON
		if err := json.Unmarshal([]byte(out), &js); code != 0 || err != nil {
			t.Fatalf("holders -n 1 --json: exit %d, %v: %s%s", code, err, out, stderr)
		}
		got = got[:0]
		for _, p := range js {
			got = append(got, map[bool]string{true: "holds", false: "waits"}[p.Holds]+" "+p.ID)
		}
		if strings.Join(got, ", ") != strings.Join(want, ", ") {
			t.Errorf("holders -n 1 --json: %q, want %q:\n%s", got, want, out)
		}
	}
	holders("holds h", "waits w1", "waits w2")

	release := func(id string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, "go."+id), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if code := ps[id].wait(t); code != 0 {
			t.Fatalf("%s: exit %d", id, code)
		}
	}
	release("h")
	zktest.Eventually(t, waitLong, func() bool {
		return exists(filepath.Join(dir, "run.w1")) && len(children(zc, ns, "/pool/locks")) == 1
	}, "w1 does not take the lease with w2 queued")
	holders("holds w1", "waits w2")
	release("w1")
	zktest.Eventually(t, waitLong, func() bool { return exists(filepath.Join(dir, "run.w2")) }, "w2 does not take the lease")
	release("w2")
	if code, out, _ := runCmd(t, nil, args([]string{"holders", "-n", "1"}, c, []string{"/pool"})...); code != 0 || out != "" {
		t.Errorf("holders -n 1 of a free semaphore: exit %d, %q", code, out)
	}
}

// A Curator acquirer waits with a lease node while it holds the semaphore's
// mutex: holders -n lists it once, as the first waiter, before a command
// queued in PATH/locks.
func TestHoldersListsCuratorSemaphoreWaiter(t *testing.T) {
	ctx := testContext(t)
	ns := zktest.NewNamespace(t)
	zc := ns.Conn(t)
	dir := t.TempDir()
	job := script(t, dir, "job.sh", `: > "$1/run.$ZKRECIPES_ID"; while [ ! -e "$1/go.$ZKRECIPES_ID" ]; do sleep 0.02; done`)
	c := conn(ns, 10*time.Second)
	sem := func(id string) *proc {
		return start(t, id, nil, args([]string{"sem", "-n", "1", "--id", id}, c, []string{"/mixed", "--", "sh", job, dir})...)
	}
	h := sem("h")
	java := curatortest.StartSemaphore(t, ns.Servers(), ns.Path("/mixed"), curatortest.ModeMax, "1")
	zktest.Eventually(t, waitLong, func() bool { return exists(filepath.Join(dir, "run.h")) }, "the holder's job did not start")
	if err := java.BeginAcquire(1); err != nil {
		t.Fatal(err)
	}
	zktest.Eventually(t, waitLong, func() bool {
		return len(children(zc, ns, "/mixed/leases")) == 2 && len(children(zc, ns, "/mixed/locks")) == 1
	}, "Curator does not wait with its lease node")
	w := sem("w")
	zktest.Eventually(t, waitLong, func() bool { return len(children(zc, ns, "/mixed/locks")) == 2 }, "w does not queue")

	code, out, stderr := runCmd(t, nil, args([]string{"holders", "-n", "1"}, c, []string{"/mixed"})...)
	if code != 0 {
		t.Fatalf("holders -n 1: exit %d: %s", code, stderr)
	}
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "holds\th\t") ||
		!strings.HasPrefix(lines[1], "waits\t") || !strings.Contains(lines[1], "-lease-") ||
		!strings.HasPrefix(lines[2], "waits\tw\t") {
		t.Errorf("holders -n 1: want h holding, Curator's lease node waiting, then w:\n%s", out)
	}

	if err := os.WriteFile(filepath.Join(dir, "go.h"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if code := h.wait(t); code != 0 {
		t.Fatalf("h: exit %d", code)
	}
	if _, err := java.WaitAcquired(ctx); err != nil {
		t.Fatal(err)
	}
	if err := java.Release(ctx); err != nil {
		t.Fatal(err)
	}
	zktest.Eventually(t, waitLong, func() bool { return exists(filepath.Join(dir, "run.w")) }, "w does not take the lease")
	if err := os.WriteFile(filepath.Join(dir, "go.w"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if code := w.wait(t); code != 0 {
		t.Fatalf("w: exit %d", code)
	}
}

// An unknown command and help of an unknown command say once where the help is.
func TestUnknownCommandHintOnce(t *testing.T) {
	for _, argv := range [][]string{{"x"}, {"help", "x"}} {
		code, out, stderr := runCmd(t, nil, argv...)
		want := fmt.Sprintf("zkrecipes: %s \"x\" (see zkrecipes help)\n", map[bool]string{true: "unknown command", false: "no command"}[len(argv) == 1])
		if code != exitUsage || out != "" || stderr != want {
			t.Errorf("zkrecipes %s: exit %d, stdout %q, stderr %q: want exit %d and %q", strings.Join(argv, " "), code, out, stderr, exitUsage, want)
		}
	}
}
