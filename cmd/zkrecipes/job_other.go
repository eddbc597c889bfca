//go:build !linux

package main

import (
	"errors"
	"syscall"
	"time"
)

// errNotLinux is the error of the job commands where the whole-group
// reaping they rest on (a child subreaper) does not exist.
var errNotLinux = errors.New("running a job needs Linux (the command reaps the job's process group as a child subreaper)")

func becomeSubreaper() error { return errNotLinux }

type job struct {
	pgid       int
	leaderDone chan struct{}
	allGone    chan struct{}
}

type startError struct {
	code int
	err  error
}

func (e *startError) Error() string { return e.err.Error() }

func startJob(argv []string, env []string) (*job, error) { return nil, errNotLinux }

func (j *job) signal(sig syscall.Signal) {}

func (j *job) exitCode() int { return exitFailure }

func (j *job) stop(grace time.Duration, logf func(string, ...any)) bool { return false }
