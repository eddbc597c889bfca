package main

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/zktest"
)

// Six commands on a semaphore of two leases, each job recording its own
// interval: never more than two jobs at once, every command exits 0, and
// holders -n shows at most two holders while they run.
func TestSemaphoreNeverMoreThanN(t *testing.T) {
	ns := zktest.NewNamespace(t)
	dir := t.TempDir()
	job := script(t, dir, "job.sh", `s=$(date +%s.%N)
sleep 0.3
echo "$s $(date +%s.%N)" > "$1/interval.$2"
`)
	const n, jobs = 2, 6
	var ps []*proc
	for i := 0; i < jobs; i++ {
		ps = append(ps, start(t, fmt.Sprint("sem", i), nil,
			args([]string{"sem", "-n", fmt.Sprint(n)}, conn(ns, 10*time.Second), []string{"/exports", "--", "sh", job, dir, fmt.Sprint(i)})...))
	}
	maxHolders := 0
	for _, p := range ps {
		for p.running() {
			code, out, stderr := runCmd(t, nil, args([]string{"holders", "-n", fmt.Sprint(n)}, conn(ns, 10*time.Second), []string{"/exports"})...)
			if code != 0 {
				t.Fatalf("holders -n: exit %d: %s", code, stderr)
			}
			maxHolders = max(maxHolders, strings.Count(out, "holds\t"))
		}
		if code := p.wait(t); code != 0 {
			t.Fatalf("%s: exit %d", p.name, code)
		}
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
	running, most := 0, 0
	for _, e := range edges {
		running += e.delta
		most = max(most, running)
	}
	t.Logf("%d jobs on %d leases: at most %d ran at once; holders showed at most %d holders", jobs, n, most, maxHolders)
	if most > n {
		t.Errorf("%d jobs ran at once on a semaphore of %d", most, n)
	}
	if maxHolders > n {
		t.Errorf("holders -n showed %d holders of %d leases", maxHolders, n)
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
