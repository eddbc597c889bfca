package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/zktest"
)

// Six commands on a semaphore of two leases; each job blocks until the test
// writes its "go" file. Exactly two jobs run at a time while the others
// queue (their nodes wait in the semaphore's lock, their jobs have not
// started, holders -n shows two holders), each release lets exactly one more in, every command exits
// 0, and the jobs' own intervals never overlap more than two deep.
func TestSemaphoreRunsExactlyN(t *testing.T) {
	ns := zktest.NewNamespace(t)
	zc := ns.Conn(t)
	dir := t.TempDir()
	job := script(t, dir, "job.sh", `s=$(date +%s.%N)
: > "$1/run.$2"
while [ ! -e "$1/go.$2" ]; do sleep 0.02; done
rm "$1/run.$2"
echo "$s $(date +%s.%N)" > "$1/interval.$2"
`)
	const n, jobs = 2, 6
	c := conn(ns, 10*time.Second)
	var ps []*proc
	for i := 0; i < jobs; i++ {
		ps = append(ps, start(t, fmt.Sprint("sem", i), nil,
			args([]string{"sem", "-n", fmt.Sprint(n)}, c, []string{"/exports", "--", "sh", job, dir, fmt.Sprint(i)})...))
	}
	running := func() []int {
		var out []int
		for i := 0; i < jobs; i++ {
			if exists(filepath.Join(dir, fmt.Sprint("run.", i))) {
				out = append(out, i)
			}
		}
		return out
	}
	queued := func(done map[int]bool, run []int) []int {
		var out []int
		for i := 0; i < jobs; i++ {
			if !done[i] && !slices.Contains(run, i) {
				out = append(out, i)
			}
		}
		return out
	}
	done := map[int]bool{}
	for len(done) < jobs {
		want := min(n, jobs-len(done))
		var run []int
		zktest.Eventually(t, waitLong, func() bool { run = running(); return len(run) >= want }, "%d jobs do not run", want)
		if len(run) != want {
			t.Fatalf("jobs %v run at once on a semaphore of %d", run, n)
		}
		// The others queue: each has its node in <PATH>/locks (the
		// semaphore's internal lock, where the acquirers wait), and still
		// the same jobs run.
		waiting := queued(done, run)
		zktest.Eventually(t, waitLong, func() bool { return len(children(zc, ns, "/exports/locks")) == len(waiting) },
			"%d commands do not queue", len(waiting))
		if now := running(); !slices.Equal(now, run) {
			t.Fatalf("jobs %v run once the others queued, after %v", now, run)
		}
		for _, i := range waiting {
			if !ps[i].running() || exists(filepath.Join(dir, fmt.Sprint("interval.", i))) {
				t.Fatalf("%s does not queue while jobs %v run", ps[i].name, run)
			}
		}
		code, out, stderr := runCmd(t, nil, args([]string{"holders", "-n", fmt.Sprint(n)}, c, []string{"/exports"})...)
		if code != 0 {
			t.Fatalf("holders -n: exit %d: %s", code, stderr)
		}
		if h := strings.Count(out, "holds\t"); h != want {
			t.Errorf("holders -n shows %d holders while jobs %v run:\n%s", h, run, out)
		}
		t.Logf("running %v, queued %v", run, waiting)
		i := run[0]
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprint("go.", i)), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if code := ps[i].wait(t); code != 0 {
			t.Fatalf("%s: exit %d", ps[i].name, code)
		}
		done[i] = true
	}
	type edge struct {
		at    time.Time
		delta int
	}
	var edges []edge
	for i := 0; i < jobs; i++ {
		b, err := os.ReadFile(filepath.Join(dir, fmt.Sprint("interval.", i)))
		if err != nil {
			t.Fatal(err)
		}
		s, e, _ := strings.Cut(strings.TrimSpace(string(b)), " ")
		edges = append(edges, edge{parseStamp(t, s), +1}, edge{parseStamp(t, e), -1})
	}
	sort.Slice(edges, func(i, j int) bool {
		if edges[i].at.Equal(edges[j].at) {
			return edges[i].delta < edges[j].delta // an end before a start at the same instant
		}
		return edges[i].at.Before(edges[j].at)
	})
	cur, most := 0, 0
	for _, e := range edges {
		cur += e.delta
		most = max(most, cur)
	}
	if most != n {
		t.Errorf("at most %d jobs ran at once on a semaphore of %d, want exactly %d", most, n, n)
	}
}

// A third party deletes the lease node of a running sem job: the command
// stops the job and exits 79.
func TestSemaphoreLost(t *testing.T) {
	ns := zktest.NewNamespace(t)
	zc := ns.Conn(t)
	dir := t.TempDir()
	job := script(t, dir, "job.sh", `trap 'echo got > "$1/term"; exit 0' TERM
echo "$ZKRECIPES_NODE" > "$1/node.tmp"; mv "$1/node.tmp" "$1/node"
while :; do sleep 0.02; done
`)
	p := start(t, "sem", nil, args([]string{"sem", "-n", "2", "-v"}, conn(ns, 10*time.Second), []string{"/pool", "--", "sh", job, dir})...)
	zktest.Eventually(t, waitLong, func() bool { return exists(filepath.Join(dir, "node")) }, "the job did not start")
	node, err := os.ReadFile(filepath.Join(dir, "node"))
	if err != nil {
		t.Fatal(err)
	}
	if err := zc.Delete(ns.Path("/pool/leases/"+strings.TrimSpace(string(node))), -1); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(t); code != exitLost {
		t.Fatalf("exit %d, want %d", code, exitLost)
	}
	if !exists(filepath.Join(dir, "term")) {
		t.Error("the job got no SIGTERM")
	}
	if !strings.Contains(p.stderr.String(), "lost while the job ran") {
		t.Errorf("stderr does not say the lease was lost:\n%s", p.stderr.String())
	}
}

// sem --try exits 75 while every lease is taken, and runs the job once one
// is free.
func TestSemaphoreTry(t *testing.T) {
	ns := zktest.NewNamespace(t)
	dir := t.TempDir()
	hold := script(t, dir, "hold.sh", `: > "$1/held"; while [ ! -e "$1/go" ]; do sleep 0.02; done`)
	c := args([]string{"sem", "-n", "1"}, conn(ns, 10*time.Second))
	holder := start(t, "holder", nil, args(c, []string{"/one", "--", "sh", hold, dir})...)
	zktest.Eventually(t, waitLong, func() bool { return exists(filepath.Join(dir, "held")) }, "the holder's job did not start")
	marker := filepath.Join(dir, "ran")
	code, _, stderr := runCmd(t, nil, args([]string{"sem", "--try", "-n", "1"}, conn(ns, 10*time.Second), []string{"/one", "--", "touch", marker})...)
	if code != exitNotAcquired || exists(marker) {
		t.Errorf("--try on a taken semaphore: exit %d, job ran %v, stderr %q: want %d", code, exists(marker), stderr, exitNotAcquired)
	}
	if err := os.WriteFile(filepath.Join(dir, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if code := holder.wait(t); code != 0 {
		t.Fatalf("holder: exit %d", code)
	}
	code, _, _ = runCmd(t, nil, args([]string{"sem", "--try", "-n", "1"}, conn(ns, 10*time.Second), []string{"/one", "--", "touch", marker})...)
	if code != 0 || !exists(marker) {
		t.Errorf("--try on a free semaphore: exit %d, job ran %v", code, exists(marker))
	}
}
