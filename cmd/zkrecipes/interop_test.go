package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/internal/testkit/curatortest"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// A Java Curator InterProcessMutex holding the path keeps the command
// waiting: the command queues its node behind Curator's, its job does not
// start, and it starts only after Curator releases.
func TestCuratorHolderKeepsCommandWaiting(t *testing.T) {
	ctx := testContext(t)
	ns := zktest.NewNamespace(t)
	zc := ns.Conn(t)
	java := curatortest.StartMutex(t, ns.Servers(), ns.Path("/shared"))
	node, err := java.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	job := script(t, dir, "job.sh", `date +%s.%N > "$1/start"`)
	p := start(t, "lock", nil, args([]string{"lock"}, conn(ns, 10*time.Second), []string{"/shared", "--", "sh", job, dir})...)
	zktest.Eventually(t, waitLong, func() bool { return len(children(zc, ns, "/shared")) == 2 }, "the command did not queue behind Curator")
	code, out, _ := runCmd(t, nil, args([]string{"holders"}, conn(ns, 10*time.Second), []string{"/shared"})...)
	t.Logf("holders while Curator holds (exit %d):\n%s", code, out)
	if exists(filepath.Join(dir, "start")) || !p.running() {
		t.Fatal("the job ran while Curator held the lock")
	}
	first, _, _ := strings.Cut(out, "\n")
	if code != 0 || !strings.HasPrefix(first, "holds\t") || !strings.Contains(first, "\t"+node.Name+"\t") {
		t.Errorf("holders does not show Curator's node %s holding:\n%s", node.Name, out)
	}
	if !strings.Contains(out, fmt.Sprintf("waits\t%s:%d\t", hostname(t), p.cmd.Process.Pid)) {
		t.Errorf("holders does not show the command waiting with the default id host:pid:\n%s", out)
	}
	released := time.Now()
	rctx, cancel := context.WithTimeout(ctx, waitLong)
	defer cancel()
	if err := java.Release(rctx); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(t); code != 0 {
		t.Fatalf("exit %d after Curator released", code)
	}
	if started := readStamp(t, filepath.Join(dir, "start")); !started.After(released) {
		t.Errorf("the job started at %v, before Curator's release at %v", started, released)
	}
}

func hostname(t *testing.T) string {
	t.Helper()
	h, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	return h
}
