package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// prSetChildSubreaper is Linux's PR_SET_CHILD_SUBREAPER (prctl(2)).
const prSetChildSubreaper = 36

// becomeSubreaper makes this process the reaper of its orphaned descendants,
// so that the processes a job leaves behind stay its children and it can tell
// when the job's whole process group is gone, whatever init does with orphans.
func becomeSubreaper() error {
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0); errno != 0 {
		return fmt.Errorf("prctl(PR_SET_CHILD_SUBREAPER): %w", errno)
	}
	return nil
}

// job is a command started in its own process group. Every process below
// this one is reaped by one goroutine, which waits for any child until none is
// left: the job's processes, and those that left its group (setsid, sudo with
// use_pty, script, tmux, systemd-run --scope, docker run...) and were orphaned
// to this process, their subreaper.
type job struct {
	pgid int

	leaderDone chan struct{} // the first process exited (status is set)
	allGone    chan struct{} // no process below this one is left
	status     syscall.WaitStatus

	mu   sync.Mutex
	gone bool // allGone is closed: never signal the ids again
}

// startError is a job that could not be started; code is the shell's: 127
// for a command not found, 126 for one that cannot be executed.
type startError struct {
	code int
	err  error
}

func (e *startError) Error() string { return e.err.Error() }

// startJob starts argv in a new process group with env added to this
// process's environment, on this process's standard input and outputs.
func startJob(argv []string, env []string) (*job, error) {
	path, err := exec.LookPath(argv[0])
	if err != nil {
		code := 127
		if errors.Is(err, os.ErrPermission) {
			code = 126
		}
		return nil, &startError{code, err}
	}
	p, err := os.StartProcess(path, argv, &os.ProcAttr{
		Env:   jobEnviron(os.Environ(), env),
		Files: []*os.File{os.Stdin, os.Stdout, os.Stderr},
		Sys:   &syscall.SysProcAttr{Setpgid: true},
	})
	if err != nil {
		code := 126
		if errors.Is(err, os.ErrNotExist) {
			code = 127
		}
		return nil, &startError{code, err}
	}
	j := &job{pgid: p.Pid, leaderDone: make(chan struct{}), allGone: make(chan struct{})}
	// Every child is reaped with wait4(-1), not through p.
	_ = p.Release()
	go j.reap()
	return j, nil
}

// jobEnviron returns base with the variables of env set: an entry of base
// for the same name is dropped (os.StartProcess keeps duplicates, and C's
// getenv returns the first, so an outer zkrecipes's token would win).
func jobEnviron(base, env []string) []string {
	set := map[string]bool{}
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		set[k] = true
	}
	out := make([]string, 0, len(base)+len(env))
	for _, kv := range base {
		if k, _, _ := strings.Cut(kv, "="); !set[k] {
			out = append(out, kv)
		}
	}
	return append(out, env...)
}

// reap waits for every child of this process. Processes orphaned by the
// job's exit are this process's children (it is their subreaper), so wait4
// returns ECHILD only once no process below this one is left, in the job's
// group or outside it. One job runs at a time, and nothing else in this
// process starts children.
func (j *job) reap() {
	leader := false
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, 0, nil)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil { // ECHILD: nothing is left
			break
		}
		if pid == j.pgid {
			j.status = ws
			leader = true
			close(j.leaderDone)
		}
	}
	j.mu.Lock()
	j.gone = true
	j.mu.Unlock()
	if !leader { // cannot happen: the leader is our child until reaped here
		close(j.leaderDone)
	}
	close(j.allGone)
}

// signal sends sig to every process of the group, unless it is gone.
func (j *job) signal(sig syscall.Signal) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if !j.gone {
		_ = syscall.Kill(-j.pgid, sig)
	}
}

// signalAll sends sig to every process of the group and to every other
// process below this one, unless none is left; it returns how many were
// outside the group. A process that forks or leaves the group while this
// runs may be missed: stop repeats SIGKILL until none is left.
func (j *job) signalAll(sig syscall.Signal) (outside int) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.gone {
		return 0
	}
	_ = syscall.Kill(-j.pgid, sig)
	for _, d := range descendants(os.Getpid()) {
		if d.pgid != j.pgid { // the group got it already: a handler runs once
			_ = syscall.Kill(d.pid, sig)
			outside++
		}
	}
	return outside
}

// procInfo is a process found in /proc.
type procInfo struct{ pid, pgid int }

// descendants lists the processes below pid, found through the parent ids
// in /proc/*/stat. While this process has not reaped them, the pids of its
// children cannot be reused.
func descendants(pid int) []procInfo {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	kids := map[int][]procInfo{}
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil { // gone meanwhile
			continue
		}
		// pid (comm) state ppid pgrp ...: comm may hold spaces and ')'.
		s := string(b)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(f) < 3 {
			continue
		}
		ppid, err1 := strconv.Atoi(f[1])
		pgrp, err2 := strconv.Atoi(f[2])
		if err1 != nil || err2 != nil {
			continue
		}
		kids[ppid] = append(kids[ppid], procInfo{p, pgrp})
	}
	var out []procInfo
	queue := []int{pid}
	for len(queue) > 0 {
		for _, k := range kids[queue[0]] {
			out = append(out, k)
			queue = append(queue, k.pid)
		}
		queue = queue[1:]
	}
	return out
}

// exitCode is the job's exit status as a shell reports it: its code, or 128
// plus the number of the signal that killed it.
func (j *job) exitCode() int {
	switch {
	case j.status.Exited():
		return j.status.ExitStatus()
	case j.status.Signaled():
		return 128 + int(j.status.Signal())
	}
	return exitFailure
}

// killRescan is how often stop looks again for processes to SIGKILL.
const killRescan = 20 * time.Millisecond

// stop ends the job: SIGTERM to every process of its group and every other
// process below this one, at once, then SIGCONT (a stopped process would
// otherwise not act on SIGTERM during the whole grace), and SIGKILL to those
// left after grace, again until none is left. It returns when none is left,
// or false after killBound more.
func (j *job) stop(grace time.Duration, logf func(string, ...any)) bool {
	outside := j.signalAll(syscall.SIGTERM)
	j.signalAll(syscall.SIGCONT)
	logf("sent SIGTERM and SIGCONT to process group %d and %d processes outside it", j.pgid, outside)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-j.allGone:
		logf("process group %d gone, and every process below zkrecipes", j.pgid)
		return true
	case <-t.C:
	}
	outside = j.signalAll(syscall.SIGKILL)
	logf("sent SIGKILL to process group %d and %d processes outside it after %v", j.pgid, outside, grace)
	t.Reset(killBound)
	// A process may have forked, or left the group, between two scans.
	tick := time.NewTicker(killRescan)
	defer tick.Stop()
	for {
		select {
		case <-j.allGone:
			logf("process group %d gone, and every process below zkrecipes", j.pgid)
			return true
		case <-t.C:
			return false
		case <-tick.C:
			j.signalAll(syscall.SIGKILL)
		}
	}
}
