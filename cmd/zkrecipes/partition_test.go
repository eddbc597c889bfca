package main

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/zktest"
)

// Two commands on one lock. The first one's connection goes through a fault
// proxy; its job is a shell that starts a grandchild, and both write their
// own start and end times. The second command queues directly. The proxy
// then partitions the first one: its job and the grandchild must both be
// dead before the second command's job starts, and before the server could
// at the earliest have expired the first session (the last request the
// proxy relayed from it, plus the session timeout).
func TestPartitionStopsJobBeforeNextHolder(t *testing.T) {
	ns := zktest.NewNamespace(t)
	zc := ns.Conn(t)
	proxy := ns.Proxy(t)
	var mu sync.Mutex
	var lastRelayed time.Time // the last request from the first command the proxy relayed
	proxy.OnRequest(func(zktest.Request) zktest.Action {
		now := time.Now()
		mu.Lock()
		lastRelayed = now
		mu.Unlock()
		return zktest.Forward
	})

	const sessionTimeout = 3 * time.Second
	const grace = 500 * time.Millisecond
	dir := t.TempDir()
	first := script(t, dir, "first.sh", `date +%s.%N > "$1/job.start"
sh -c 'trap "date +%s.%N > \"$1/gc.end\"; exit 0" TERM
date +%s.%N > "$1/gc.start"
while :; do sleep 0.02; done' gc "$1" &
trap 'date +%s.%N > "$1/job.end"; exit 0' TERM
while :; do sleep 0.02; done
`)
	second := script(t, dir, "second.sh", `date +%s.%N > "$1/second.start"`)
	flags := []string{"--namespace", ns.Root, "--session-timeout", sessionTimeout.String(), "--grace", grace.String(), "-v"}

	a := start(t, "first", nil, args([]string{"lock", "--servers", proxy.Addr()}, flags, []string{"/deploy", "--", "sh", first, dir})...)
	zktest.Eventually(t, waitLong, func() bool {
		return exists(filepath.Join(dir, "job.start")) && exists(filepath.Join(dir, "gc.start"))
	}, "the first job did not start")
	b := start(t, "second", nil, args([]string{"lock", "--servers", strings.Join(ns.Servers(), ",")}, flags, []string{"/deploy", "--", "sh", second, dir})...)
	zktest.Eventually(t, waitLong, func() bool { return len(children(zc, ns, "/deploy")) == 2 }, "the second command did not queue")

	mu.Lock()
	partitioned := time.Now()
	proxy.Partition()
	relayed := lastRelayed
	mu.Unlock()

	if code := a.wait(t); code != exitLost {
		t.Fatalf("first command: exit %d, want %d", code, exitLost)
	}
	if code := b.wait(t); code != 0 {
		t.Fatalf("second command: exit %d, want 0", code)
	}
	proxy.Heal()

	jobEnd, gcEnd := readStamp(t, filepath.Join(dir, "job.end")), readStamp(t, filepath.Join(dir, "gc.end"))
	secondStart := readStamp(t, filepath.Join(dir, "second.start"))
	leaseEnd := logTime(t, a.stderr.String(), "lease ended")
	groupGone := logTime(t, a.stderr.String(), "process group [0-9]+ gone")
	earliestExpiry := relayed.Add(sessionTimeout)
	at := func(tm time.Time) string { return tm.UTC().Format("15:04:05.000") }
	t.Logf(`transcript (session timeout %v, grace %v):
  %s  last request of the first session relayed by the proxy
  %s  partition
  %s  first command: lease ended (suspended), SIGTERM to the job's process group
  %s  first job's grandchild dead (its own end time)
  %s  first job dead (its own end time)
  %s  first command: process group gone (reaped)
  %s  earliest possible expiry of the first session (last relayed request + %v)
  %s  second job started (its own start time)
margins: job dead %v and grandchild dead %v before the earliest expiry; second job %v after the later of them`,
		sessionTimeout, grace, at(relayed), at(partitioned), at(leaseEnd), at(gcEnd), at(jobEnd), at(groupGone),
		at(earliestExpiry), sessionTimeout, at(secondStart),
		earliestExpiry.Sub(jobEnd).Round(time.Millisecond), earliestExpiry.Sub(gcEnd).Round(time.Millisecond),
		secondStart.Sub(later(jobEnd, gcEnd)).Round(time.Millisecond))

	for _, c := range []struct {
		what string
		end  time.Time
	}{{"first job", jobEnd}, {"its grandchild", gcEnd}, {"the first job's process group", groupGone}} {
		if !c.end.Before(secondStart) {
			t.Errorf("%s ended at %s, not before the second job started at %s", c.what, at(c.end), at(secondStart))
		}
		if !c.end.Before(earliestExpiry) {
			t.Errorf("%s ended at %s, not before the earliest possible expiry %s", c.what, at(c.end), at(earliestExpiry))
		}
	}
	if !strings.Contains(a.stderr.String(), "suspended") {
		t.Errorf("the first lease did not end at the suspension:\n%s", a.stderr.String())
	}
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// logTime returns the time of the first -v line of stderr matching re
// ("zkrecipes lock: 15:04:05.000000 <re>...") on today's UTC date.
func logTime(t *testing.T, stderr, re string) time.Time {
	t.Helper()
	m := regexp.MustCompile(`: (\d\d:\d\d:\d\d\.\d{6}) ` + re).FindStringSubmatch(stderr)
	if m == nil {
		t.Fatalf("no -v line matching %q in:\n%s", re, stderr)
	}
	now := time.Now().UTC()
	tm, err := time.Parse("2006-01-02 15:04:05.000000", fmt.Sprintf("%s %s", now.Format("2006-01-02"), m[1]))
	if err != nil {
		t.Fatal(err)
	}
	if tm.After(now) { // the line was written before midnight
		tm = tm.AddDate(0, 0, -1)
	}
	return tm
}
