package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
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

// job is a command started in its own process group. The group is reaped by
// one goroutine, which waits for any member of the group until none is left.
type job struct {
	pgid int

	leaderDone chan struct{} // the first process exited (status is set)
	groupGone  chan struct{} // no process of the group is left
	status     syscall.WaitStatus

	mu   sync.Mutex
	gone bool // groupGone is closed: never signal the id again
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
	j := &job{pgid: p.Pid, leaderDone: make(chan struct{}), groupGone: make(chan struct{})}
	// The group is reaped with wait4 on the group id, not through p.
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

// reap waits for every member of the group. Members orphaned by the job's
// exit are this process's children (it is their subreaper), so wait4 on the
// group returns ECHILD only once no member is left.
func (j *job) reap() {
	leader := false
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-j.pgid, &ws, 0, nil)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil { // ECHILD: nothing of the group is left
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
	close(j.groupGone)
}

// signal sends sig to every process of the group, unless it is gone.
func (j *job) signal(sig syscall.Signal) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if !j.gone {
		_ = syscall.Kill(-j.pgid, sig)
	}
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

// stop ends the group: SIGTERM to every member at once, SIGKILL to those
// left after grace. It returns when the group is gone, or false after
// killBound more.
func (j *job) stop(grace time.Duration, logf func(string, ...any)) bool {
	j.signal(syscall.SIGTERM)
	logf("sent SIGTERM to process group %d", j.pgid)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-j.groupGone:
		logf("process group %d gone", j.pgid)
		return true
	case <-t.C:
	}
	j.signal(syscall.SIGKILL)
	logf("sent SIGKILL to process group %d after %v", j.pgid, grace)
	t.Reset(killBound)
	select {
	case <-j.groupGone:
		logf("process group %d gone", j.pgid)
		return true
	case <-t.C:
		return false
	}
}
