package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/zkrecipes/zkrecipes/session"
)

// Exit codes of the command itself; otherwise it exits with the job's code.
const (
	exitUsage        = 2  // bad usage: a flag, an argument or an environment variable
	exitNoConnection = 69 // no ZooKeeper session (EX_UNAVAILABLE)
	exitFailure      = 70 // any other failure, e.g. ZooKeeper refused a request (EX_SOFTWARE)
	exitNotAcquired  = 75 // --try found it taken, or --timeout passed (EX_TEMPFAIL)
	exitLost         = 79 // the lease ended while the job ran; the job was stopped
)

// killBound is how long the command waits for the job's process group to be
// gone after SIGKILL before it gives up on it (a process in uninterruptible
// sleep cannot be killed).
const killBound = 5 * time.Second

// releaseTimeout bounds the release of a lease after the job.
const releaseTimeout = 10 * time.Second

func main() {
	os.Exit(run(os.Args[1:], os.Getenv, os.Stdout, os.Stderr))
}

// exitError carries the exit code of a failed command.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func exitWith(code int, err error) error { return &exitError{code, err} }

// signalCause is the cause of a context canceled by a signal to the command.
type signalCause struct{ sig syscall.Signal }

func (s signalCause) Error() string { return "interrupted by " + signalName(s.sig) }

func signalName(sig syscall.Signal) string {
	switch sig {
	case syscall.SIGINT:
		return "SIGINT"
	case syscall.SIGTERM:
		return "SIGTERM"
	case syscall.SIGHUP:
		return "SIGHUP"
	}
	return sig.String()
}

// app is one run of the command.
type app struct {
	stdout, stderr io.Writer
	getenv         func(string) string
	verbose        bool
	name           string    // "zkrecipes lock", for messages
	exitNow        func(int) // os.Exit: ends the process without running defers
}

// run runs the command line args and returns the exit code.
func run(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	a := &app{stdout: stdout, stderr: stderr, getenv: getenv, name: "zkrecipes", exitNow: os.Exit}
	if len(args) == 0 {
		fmt.Fprintln(stderr, "zkrecipes: no command (see zkrecipes help)")
		return exitUsage
	}
	cmd, rest := args[0], args[1:]
	var err error
	switch cmd {
	case "help", "-h", "-help", "--help":
		err = a.help(rest)
	case "lock", "sem", "elect":
		a.name += " " + cmd
		err = a.lease(cmd, rest)
	case "holders", "leader", "observe":
		a.name += " " + cmd
		err = a.query(cmd, rest)
	case "services":
		a.name += " " + cmd
		err = a.services(rest)
	default:
		err = usagef("unknown command %q", cmd)
	}
	return a.exit(cmd, err)
}

// exit prints err (one line) and returns its exit code.
func (a *app) exit(cmd string, err error) int {
	if err == nil {
		return 0
	}
	var ue usageError
	if errors.As(err, &ue) {
		see := "zkrecipes help"
		if a.name != "zkrecipes" {
			see += " " + cmd
		}
		fmt.Fprintf(a.stderr, "%s: %s (see %s)\n", a.name, ue.msg, see)
		return exitUsage
	}
	code := exitFailure
	var ee *exitError
	if errors.As(err, &ee) {
		code = ee.code
		if ee.err == nil {
			return code
		}
	}
	fmt.Fprintf(a.stderr, "%s: %v\n", a.name, err)
	return code
}

// logf prints a time-stamped line on stderr under -v.
func (a *app) logf(format string, args ...any) {
	if a.verbose {
		fmt.Fprintf(a.stderr, "%s: %s %s\n", a.name, time.Now().UTC().Format("15:04:05.000000"), fmt.Sprintf(format, args...))
	}
}

// connect opens the session of the settings c within ctx.
func (a *app) connect(ctx context.Context, c *connFlags) (*session.Session, error) {
	opts, err := c.options()
	if err != nil {
		return nil, err
	}
	if c.verbose {
		enc := zap.NewDevelopmentEncoderConfig()
		core := zapcore.NewCore(zapcore.NewConsoleEncoder(enc), zapcore.Lock(zapcore.AddSync(a.stderr)), zap.InfoLevel)
		opts = append(opts, session.WithLogger(zap.New(core)))
	}
	sess, err := session.Connect(ctx, c.serverList(), opts...)
	switch {
	case err == nil:
		a.logf("connected to %s: session 0x%x, timeout %v", c.servers, sess.SessionID(), sess.SessionTimeout())
		return sess, nil
	case errors.Is(err, session.ErrBadArgument):
		return nil, usageError{err.Error()}
	case context.Cause(ctx) != nil && ctx.Err() != nil:
		return nil, interrupted(ctx, err)
	}
	return nil, exitWith(exitNoConnection, err)
}

// interrupted is the error of a wait that a signal ended: exit code 128 plus
// the signal's number, as a shell reports a command killed by it.
func interrupted(ctx context.Context, err error) error {
	var sc signalCause
	if errors.As(context.Cause(ctx), &sc) {
		return exitWith(128+int(sc.sig), fmt.Errorf("%v while waiting", sc))
	}
	return exitWith(exitFailure, err)
}

// router sends the signals the command gets to the running job's process
// group, and, while no job runs, cancels the command's wait. Both the choice
// and the start of a job happen under mu, so a signal is either forwarded to
// the job or keeps it from starting, never neither.
type router struct {
	ch     chan os.Signal
	cancel context.CancelCauseFunc
	done   chan struct{}
	wg     sync.WaitGroup
	logf   func(string, ...any)

	mu    sync.Mutex
	job   *job
	first syscall.Signal // the first signal received, 0 if none
}

// route starts routing SIGINT, SIGTERM and SIGHUP; close ends it.
func route(cancel context.CancelCauseFunc, logf func(string, ...any)) *router {
	r := &router{ch: make(chan os.Signal, 8), cancel: cancel, done: make(chan struct{}), logf: logf}
	signal.Notify(r.ch, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		for {
			select {
			case <-r.done:
				return
			case s := <-r.ch:
				sig, _ := s.(syscall.Signal)
				r.deliver(sig)
			}
		}
	}()
	return r
}

// deliver forwards sig to the job, or cancels the wait while no job runs.
func (r *router) deliver(sig syscall.Signal) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.first == 0 {
		r.first = sig
	}
	if r.job != nil {
		r.logf("forwarding %s to process group %d", signalName(sig), r.job.pgid)
		r.job.signal(sig)
		return
	}
	r.cancel(signalCause{sig})
}

// startJob starts a job with start and routes the signals to it, unless a
// signal came first: then it starts nothing and returns that signal.
func (r *router) startJob(start func() (*job, error)) (*job, syscall.Signal, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.first != 0 {
		return nil, r.first, nil
	}
	j, err := start()
	if err != nil {
		return nil, 0, err
	}
	r.job = j
	return j, 0, nil
}

// endJob stops routing signals to the job.
func (r *router) endJob() {
	r.mu.Lock()
	r.job = nil
	r.mu.Unlock()
}

// signaled returns the first signal received, or 0.
func (r *router) signaled() syscall.Signal {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.first
}

func (r *router) close() {
	signal.Stop(r.ch)
	close(r.done)
	r.wg.Wait()
}
