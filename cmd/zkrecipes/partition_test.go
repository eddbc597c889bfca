package main

import (
	"fmt"
	"os"
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
	stopsJobBeforeNextHolder(t, (*zktest.Proxy).Partition, 0)
}

// The same with a connection reset followed by silence (the proxy refuses
// every new connection) instead of a silent partition: the lease does not
// end at the reset but at its deadline, two thirds of the session timeout
// after the newest answered request (the session pings every third of the
// timeout, so at least a sixth of it after the reset), and the job is dead
// before the server could expire the session.
func TestResetThenSilenceStopsJobBeforeNextHolder(t *testing.T) {
	stopsJobBeforeNextHolder(t, func(p *zktest.Proxy) {
		p.Refuse(true)
		p.Cut()
	}, 500*time.Millisecond)
}

// stopsJobBeforeNextHolder runs the tests above, with fault cutting the
// first command off; its lease must end no sooner than keptFor after it.
func stopsJobBeforeNextHolder(t *testing.T, fault func(*zktest.Proxy), keptFor time.Duration) {
	dir := t.TempDir()
	first := script(t, dir, "first.sh", `date +%s.%N > "$1/job.start"
sh -c 'trap "date +%s.%N > \"$1/gc.end\"; exit 0" TERM
date +%s.%N > "$1/gc.start"
while :; do sleep 0.02; done' gc "$1" &
trap 'date +%s.%N > "$1/job.end"; exit 0' TERM
while :; do sleep 0.02; done
`)
	pr := partitionFirst(t, dir, first, 500*time.Millisecond, fault)
	a, relayed, partitioned, sessionTimeout, grace := pr.first, pr.relayed, pr.partitioned, pr.sessionTimeout, pr.grace

	jobEnd, gcEnd := readStamp(t, filepath.Join(dir, "job.end")), readStamp(t, filepath.Join(dir, "gc.end"))
	secondStart := pr.secondStart
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
	if held := leaseEnd.Sub(partitioned); held < keptFor {
		t.Errorf("the first lease ended %v after the fault, want its deadline, at least %v after it", held.Round(time.Millisecond), keptFor)
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

// partitioned is what partitionFirst saw.
type partitioned struct {
	first                 *proc
	relayed, partitioned  time.Time // the proxy's last relayed request; the partition
	secondStart           time.Time // the second job's own start time
	sessionTimeout, grace time.Duration
}

// partitionFirst runs the first command, through a fault proxy, with job
// firstJob (sh firstJob dir) and a session timeout of 3 s, waits for dir/job.start and dir/gc.start,
// queues a second command directly, cuts the first off (fault: a partition,
// or a reset and a refusal), and returns once both commands have exited: the
// first with 79, the second with 0 after its job wrote dir/second.start.
func partitionFirst(t *testing.T, dir, firstJob string, grace time.Duration, fault func(*zktest.Proxy)) partitioned {
	t.Helper()
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
	pr := partitioned{sessionTimeout: 3 * time.Second, grace: grace}
	second := script(t, dir, "second.sh", `date +%s.%N > "$1/second.start"`)
	flags := []string{"--namespace", ns.Root, "--session-timeout", pr.sessionTimeout.String(), "--grace", pr.grace.String(), "-v"}

	a := start(t, "first", nil, args([]string{"lock", "--servers", proxy.Addr()}, flags, []string{"/deploy", "--", "sh", firstJob, dir})...)
	zktest.Eventually(t, waitLong, func() bool {
		return exists(filepath.Join(dir, "job.start")) && exists(filepath.Join(dir, "gc.start"))
	}, "the first job did not start")
	b := start(t, "second", nil, args([]string{"lock", "--servers", strings.Join(ns.Servers(), ",")}, flags, []string{"/deploy", "--", "sh", second, dir})...)
	zktest.Eventually(t, waitLong, func() bool { return len(children(zc, ns, "/deploy")) == 2 }, "the second command did not queue")

	mu.Lock()
	pr.partitioned = time.Now()
	fault(proxy)
	pr.relayed = lastRelayed
	mu.Unlock()

	if code := a.wait(t); code != exitLost {
		t.Fatalf("first command: exit %d, want %d", code, exitLost)
	}
	if code := b.wait(t); code != 0 {
		t.Fatalf("second command: exit %d, want 0", code)
	}
	proxy.Heal()
	pr.first = a
	pr.secondStart = readStamp(t, filepath.Join(dir, "second.start"))
	return pr
}

// The same partition with a job and a grandchild that ignore SIGTERM and
// write a heartbeat every 20 ms, and --grace at the documented maximum, a
// quarter of the session timeout (the case the timing bound promises, with
// T/12 left for SIGKILL): SIGKILL after the grace kills both, and the group
// is gone, and the heartbeats have stopped, before the earliest possible
// expiry and before the second job starts.
func TestPartitionKillsIgnoringJobBeforeNextHolder(t *testing.T) {
	dir := t.TempDir()
	first := script(t, dir, "first.sh", `trap '' TERM
date +%s.%N > "$1/job.start"
sh -c 'date +%s.%N > "$1/gc.start"; while :; do date +%s.%N >> "$1/gc.beats"; sleep 0.02; done' gc "$1" &
while :; do date +%s.%N >> "$1/job.beats"; sleep 0.02; done
`)
	pr := partitionFirst(t, dir, first, maxGrace(3*time.Second), (*zktest.Proxy).Partition)
	stderr := pr.first.stderr.String()
	term, kill := logTime(t, stderr, "sent SIGTERM"), logTime(t, stderr, "sent SIGKILL")
	gone := logTime(t, stderr, "process group [0-9]+ gone")
	jobBeat, gcBeat := lastBeat(t, filepath.Join(dir, "job.beats")), lastBeat(t, filepath.Join(dir, "gc.beats"))
	earliestExpiry := pr.relayed.Add(pr.sessionTimeout)
	at := func(tm time.Time) string { return tm.UTC().Format("15:04:05.000") }
	t.Logf(`transcript (session timeout %v, grace %v, the job ignores SIGTERM):
  %s  last request relayed; %s partition
  %s  SIGTERM; %s SIGKILL; %s process group gone
  %s  last heartbeat of the job; %s of its grandchild
  %s  earliest possible expiry; %s second job started`,
		pr.sessionTimeout, pr.grace, at(pr.relayed), at(pr.partitioned), at(term), at(kill), at(gone),
		at(jobBeat), at(gcBeat), at(earliestExpiry), at(pr.secondStart))
	if d := kill.Sub(term); d < pr.grace {
		t.Errorf("SIGKILL %v after SIGTERM, before the grace %v", d, pr.grace)
	}
	for _, c := range []struct {
		what string
		end  time.Time
	}{{"the process group", gone}, {"the job's heartbeat", jobBeat}, {"the grandchild's heartbeat", gcBeat}} {
		if !c.end.Before(earliestExpiry) || !c.end.Before(pr.secondStart) {
			t.Errorf("%s ended at %s: want before the earliest expiry %s and the second job's start %s",
				c.what, at(c.end), at(earliestExpiry), at(pr.secondStart))
		}
	}
}

// lastBeat returns the last time stamp of a heartbeat file.
func lastBeat(t *testing.T, path string) time.Time {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	// The last line may be cut short by SIGKILL: take the last whole one.
	for i := len(lines) - 1; i >= 0; i-- {
		if s, frac, ok := strings.Cut(lines[i], "."); ok && len(frac) == 9 && len(s) > 0 {
			return parseStamp(t, lines[i])
		}
	}
	t.Fatalf("%s has no heartbeat", path)
	return time.Time{}
}

// A connection reset that the session rides out, its reconnection coming
// before the lease deadline (a server restarted in a rolling restart looks
// the same to the client): the command's job is not stopped. The job runs
// until the test lets it end, after the reconnection, and its own exit code
// is the command's; the lease never ended.
func TestResetKeepsJob(t *testing.T) {
	dir := t.TempDir()
	job := script(t, dir, "job.sh", `date +%s.%N > "$1/job.start"
trap 'date +%s.%N > "$1/job.end"; exit 1' TERM
while [ ! -e "$1/stop" ]; do sleep 0.02; done
exit 0
`)
	ns := zktest.NewNamespace(t)
	proxy := ns.Proxy(t)
	var mu sync.Mutex
	var cut bool
	reconnected := make(chan struct{})
	proxy.OnRequest(func(zktest.Request) zktest.Action {
		mu.Lock()
		defer mu.Unlock()
		if cut && reconnected != nil {
			close(reconnected) // a request relayed after the cut: the session is back
			reconnected = nil
		}
		return zktest.Forward
	})
	done := reconnected
	// The session pings every third of T: the newest answered request is
	// at most T/3 old at the reset, so the deadline is at least T/3 after
	// it, 3 s here, where go-zookeeper dials again after 1 s.
	const sessionTimeout = 9 * time.Second
	a := start(t, "holder", nil, args([]string{"lock", "--servers", proxy.Addr(), "--namespace", ns.Root,
		"--session-timeout", sessionTimeout.String(), "-v"}, []string{"/deploy", "--", "sh", job, dir})...)
	zktest.Eventually(t, waitLong, func() bool { return exists(filepath.Join(dir, "job.start")) }, "the job did not start")

	mu.Lock()
	cut = true
	proxy.Cut()
	mu.Unlock()
	select {
	case <-done:
	case <-time.After(waitLong):
		t.Fatal("the command did not reconnect")
	}
	if !a.running() || exists(filepath.Join(dir, "job.end")) {
		t.Fatalf("the job was stopped by a reset mended before the lease deadline:\n%s", a.stderr.String())
	}
	if err := os.WriteFile(filepath.Join(dir, "stop"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if code := a.wait(t); code != 0 {
		t.Fatalf("command: exit %d, want the job's 0\nstderr:\n%s", code, a.stderr.String())
	}
	if strings.Contains(a.stderr.String(), "lease ended") {
		t.Errorf("the lease ended across the reset:\n%s", a.stderr.String())
	}
	if ss := proxy.Sessions(); len(ss) != 1 {
		t.Errorf("%d sessions through the proxy, want the one that rode out the reset", len(ss))
	}
}
