package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/zkrecipes/zkrecipes/leader"
	"github.com/zkrecipes/zkrecipes/mutex"
	"github.com/zkrecipes/zkrecipes/recipes"
	"github.com/zkrecipes/zkrecipes/semaphore"
	"github.com/zkrecipes/zkrecipes/session"
)

// maxGrace is the longest grace period for a session timeout: a quarter of
// it. The lease ends at the suspension, at most two thirds of the timeout
// after the server last heard from the session; the server can expire the
// session one timeout after that. The job thus has a third of the timeout:
// the grace, then a twelfth for SIGKILL to take effect.
func maxGrace(sessionTimeout time.Duration) time.Duration { return sessionTimeout / 4 }

// defaultGrace is the grace period when --grace is not given.
func defaultGrace(sessionTimeout time.Duration) time.Duration { return sessionTimeout / 5 }

// held is what the command needs of a lease or a leader's term.
type held interface {
	Done() <-chan struct{}
	Err() error
	Token() int64
	Node() string
}

// leaseArgs are the parsed arguments of lock, sem and elect.
type leaseArgs struct {
	conn    connFlags
	grace   time.Duration
	id      string
	try     bool
	timeout time.Duration
	n       int
	requeue bool
	path    string
	argv    []string
}

func (a *app) parseLease(kind string, args []string) (*leaseArgs, error) {
	fs := flag.NewFlagSet(kind, flag.ContinueOnError)
	var la leaseArgs
	la.conn.register(fs)
	var grace optDuration
	fs.Var(&grace, "grace", "")
	fs.StringVar(&la.id, "id", "", "")
	if kind != "elect" {
		fs.BoolVar(&la.try, "try", false, "")
		durationVar(fs, &la.timeout, "timeout", 0)
	}
	if kind == "sem" {
		fs.IntVar(&la.n, "n", 0, "")
	}
	if kind == "elect" {
		fs.BoolVar(&la.requeue, "requeue", false, "")
	}
	if err := parseFlags(fs, args, a.getenv); err != nil {
		return nil, err
	}
	a.verbose = la.conn.verbose
	rest := fs.Args()
	switch {
	case len(rest) == 0:
		return nil, usagef("no PATH")
	case len(rest) == 1:
		return nil, usagef("no command: want %s [flags] PATH -- COMMAND [ARGS...]", kind)
	case rest[1] != "--":
		if strings.HasPrefix(rest[1], "-") {
			return nil, usagef("flag %s after PATH: flags go before PATH", rest[1])
		}
		return nil, usagef("want -- between PATH and the command, got %q", rest[1])
	case len(rest) == 2:
		return nil, usagef("no command after --")
	}
	la.path, la.argv = rest[0], rest[2:]
	if err := checkPath(la.path); err != nil {
		return nil, err
	}
	if err := la.conn.check(); err != nil {
		return nil, err
	}
	if kind == "sem" && la.n < 1 {
		return nil, usagef("-n %d: give the number of leases, at least 1", la.n)
	}
	if la.timeout < 0 {
		return nil, usagef("--timeout %v: must not be negative", la.timeout)
	}
	if la.try && la.timeout > 0 {
		return nil, usagef("--try and --timeout exclude each other")
	}
	la.grace = defaultGrace(la.conn.sessionTimeout)
	if grace.set {
		la.grace = grace.d
	}
	if la.grace < 0 {
		return nil, usagef("--grace %v: must not be negative", la.grace)
	}
	if m := maxGrace(la.conn.sessionTimeout); la.grace > m {
		return nil, usagef("--grace %v is too long for --session-timeout %v: at most %v (a quarter of it), so that the job is dead before the server can expire the session",
			la.grace, la.conn.sessionTimeout, m)
	}
	if la.id == "" {
		la.id = defaultID()
	}
	return &la, nil
}

// lease runs lock, sem and elect.
func (a *app) lease(kind string, args []string) (err error) {
	la, err := a.parseLease(kind, args)
	if errors.Is(err, flag.ErrHelp) {
		return a.help([]string{kind})
	}
	if err != nil {
		return err
	}
	if err := becomeSubreaper(); err != nil {
		return exitWith(exitFailure, err)
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	r := route(cancel, a.logf)
	defer r.close()

	sess, err := a.connect(ctx, &la.conn)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := sess.Close(); cerr != nil && err == nil {
			err = exitWith(exitFailure, cerr)
		}
	}()
	if t := sess.SessionTimeout(); la.grace > maxGrace(t) {
		fmt.Fprintf(a.stderr, "%s: the server granted a session timeout of %v: grace lowered from %v to %v\n",
			a.name, t, la.grace, maxGrace(t))
		la.grace = maxGrace(t)
	}
	if kind == "elect" {
		return a.elect(ctx, sess, la, r)
	}
	return a.acquireAndRun(ctx, sess, kind, la, r)
}

// acquirer is a lock or a semaphore, seen through the calls the command
// makes.
type acquirer struct {
	acquire, try func(ctx context.Context) (held, error)
	release      func(ctx context.Context) error
	close        func() error
}

func newAcquirer(sess *session.Session, kind string, la *leaseArgs) (*acquirer, error) {
	var ac acquirer
	var lease interface{ Release(context.Context) error }
	// kept makes an acquire keep the lease it returns, for release.
	kept := func(f func(context.Context) (releasable, error)) func(context.Context) (held, error) {
		return func(ctx context.Context) (held, error) {
			l, err := f(ctx)
			if err != nil {
				return nil, err
			}
			lease = l
			return l, nil
		}
	}
	if kind == "lock" {
		m, err := mutex.New(sess, la.path, mutex.WithID(la.id))
		if err != nil {
			return nil, err
		}
		ac.acquire = kept(func(ctx context.Context) (releasable, error) { return m.Lock(ctx) })
		ac.try = kept(func(ctx context.Context) (releasable, error) { return m.TryLock(ctx) })
		ac.close = m.Close
	} else {
		s, err := semaphore.New(sess, la.path, la.n, semaphore.WithID(la.id))
		if err != nil {
			return nil, err
		}
		ac.acquire = kept(func(ctx context.Context) (releasable, error) { return s.Acquire(ctx) })
		ac.try = kept(func(ctx context.Context) (releasable, error) { return s.TryAcquire(ctx) })
		ac.close = s.Close
	}
	ac.release = func(ctx context.Context) error { return lease.Release(ctx) }
	return &ac, nil
}

// releasable is a held lease that can be released: a mutex's or a
// semaphore's.
type releasable interface {
	held
	Release(context.Context) error
}

func (a *app) acquireAndRun(ctx context.Context, sess *session.Session, kind string, la *leaseArgs, r *router) (err error) {
	ac, err := newAcquirer(sess, kind, la)
	if err != nil {
		return usageError{err.Error()}
	}
	defer func() {
		if cerr := ac.close(); cerr != nil && err == nil {
			err = exitWith(exitFailure, cerr)
		}
	}()
	what := "lock"
	if kind == "sem" {
		what = fmt.Sprintf("a lease of %d", la.n)
	}
	a.logf("acquiring %s on %s as %q", what, la.path, la.id)
	var l held
	switch {
	case la.try:
		l, err = ac.try(ctx)
	case la.timeout > 0:
		tctx, tcancel := context.WithTimeout(ctx, la.timeout)
		l, err = ac.acquire(tctx)
		tcancel()
	default:
		l, err = ac.acquire(ctx)
	}
	if err != nil {
		switch {
		case errors.Is(err, recipes.ErrBusy):
			return exitWith(exitNotAcquired, fmt.Errorf("%s %s is taken (--try)", what, la.path))
		case ctx.Err() != nil:
			return interrupted(ctx, err)
		case errors.Is(err, context.DeadlineExceeded):
			return exitWith(exitNotAcquired, fmt.Errorf("%s %s not acquired within --timeout %v", what, la.path, la.timeout))
		case errors.Is(err, session.ErrBadArgument):
			return usageError{err.Error()}
		case errors.Is(err, session.ErrLost):
			return exitWith(exitNoConnection, err)
		}
		return exitWith(exitFailure, err)
	}
	a.logf("acquired %s on %s: node %s, token %d", what, la.path, l.Node(), l.Token())
	code, lost, jerr := a.runUnder(ctx, l, la, r)
	rctx, rcancel := context.WithTimeout(context.Background(), releaseTimeout)
	rerr := ac.release(rctx)
	rcancel()
	if rerr == nil {
		a.logf("released %s", la.path)
	}
	switch {
	case jerr != nil:
		return jerr
	case lost != nil:
		return exitWith(exitLost, fmt.Errorf("%s %s lost while the job ran (%v): the job was stopped", what, la.path, lost))
	case rerr != nil:
		fmt.Fprintf(a.stderr, "%s: release: %v\n", a.name, rerr)
	}
	return exitWith(code, nil)
}

// runUnder runs the job while l is held. It returns the job's exit code, or
// the cause of the lease's end if the lease ended before the job did, or an
// error when there was no job to run (it could not start, or a signal or the
// lease's end came first).
func (a *app) runUnder(ctx context.Context, l held, la *leaseArgs, r *router) (code int, lost error, err error) {
	select {
	case <-l.Done():
	case <-ctx.Done():
	default:
		return a.startUnder(ctx, l, la, r)
	}
	if sig := r.signaled(); sig != 0 {
		return 0, nil, exitWith(128+int(sig), fmt.Errorf("%v before the job started", signalCause{sig}))
	}
	if err := l.Err(); err != nil {
		return 0, nil, exitWith(exitLost, fmt.Errorf("%s ended before the job started: %v", la.path, err))
	}
	return 0, nil, exitWith(exitFailure, context.Cause(ctx))
}

// startUnder starts the job and waits for it (see runUnder).
func (a *app) startUnder(ctx context.Context, l held, la *leaseArgs, r *router) (code int, lost error, err error) {
	env := []string{
		"ZKRECIPES_TOKEN=" + strconv.FormatInt(l.Token(), 10),
		"ZKRECIPES_PATH=" + la.path,
		"ZKRECIPES_ID=" + la.id,
		"ZKRECIPES_NODE=" + l.Node(),
	}
	j, sig, err := r.startJob(func() (*job, error) { return startJob(la.argv, env) })
	switch {
	case sig != 0:
		return 0, nil, exitWith(128+int(sig), fmt.Errorf("%v before the job started", signalCause{sig}))
	case err != nil:
		var se *startError
		if errors.As(err, &se) {
			return 0, nil, exitWith(se.code, err)
		}
		return 0, nil, exitWith(exitFailure, err)
	}
	defer r.endJob()
	a.logf("job started: process group %d", j.pgid)
	select {
	case <-j.leaderDone:
		code = j.exitCode()
		a.logf("job exited with code %d", code)
		select {
		case <-j.allGone:
		default:
			a.logf("stopping the processes the job left behind, in its process group or outside it")
			if !j.stop(la.grace, a.logf) {
				a.abandon(j)
			}
		}
		return code, nil, nil
	case <-l.Done():
		lost = l.Err()
		a.logf("lease ended (%v): stopping the job", lost)
		if !j.stop(la.grace, a.logf) {
			a.abandon(j)
		}
		return exitLost, lost, nil
	}
}

// abandon ends the command with exitFailure when a process of the job
// outlived SIGKILL by killBound (uninterruptible sleep): it neither releases
// the lease nor closes the session, whose expiry then deletes the node, so
// that the next holder cannot start before the server gives up on this one.
func (a *app) abandon(j *job) {
	fmt.Fprintf(a.stderr, "%s: processes of the job (process group %d) still there %v after SIGKILL: exiting without releasing; the node goes when the session expires\n",
		a.name, j.pgid, killBound)
	a.exitNow(exitFailure)
}

// elect runs the job while this process leads, once or, with --requeue,
// again after every term until a signal.
func (a *app) elect(ctx context.Context, sess *session.Session, la *leaseArgs, r *router) error {
	var (
		ran, stopped  bool // a job ran; a signal came while it ran
		code          int
		lost, lastErr error
	)
	work := func(tctx context.Context) error {
		term, _ := leader.TermFromContext(tctx)
		a.logf("leading %s: node %s, token %d", la.path, term.Node(), term.Token())
		c, l, err := a.runUnder(tctx, term, la, r)
		if err != nil {
			lastErr = err
			if r.signaled() != 0 {
				return err
			}
			var ee *exitError
			if errors.As(err, &ee) && ee.code != exitLost {
				r.cancel(err) // the job cannot start: campaigning again would not help
			}
			return err
		}
		ran, code, lost, lastErr = true, c, l, nil
		if l != nil && la.requeue { // without --requeue, the exit says it
			fmt.Fprintf(a.stderr, "%s: leadership of %s lost while the job ran (%v): the job was stopped\n", a.name, la.path, l)
		}
		if sig := r.signaled(); sig != 0 {
			stopped = true
			r.cancel(signalCause{sig}) // the job got the signal: stop campaigning
		}
		return nil
	}
	a.logf("campaigning for %s as %q", la.path, la.id)
	err := leader.Run(ctx, sess, la.path, work, leader.WithID(la.id), leader.WithRequeue(la.requeue))
	switch {
	case stopped:
		return exitWith(code, nil)
	case lastErr != nil && (!la.requeue || ctx.Err() != nil):
		return lastErr
	case ctx.Err() != nil:
		return interrupted(ctx, err)
	case errors.Is(err, session.ErrBadArgument):
		return usageError{err.Error()}
	case err != nil && !errors.Is(err, session.ErrSuspended) && !errors.Is(err, session.ErrLost) && !errors.Is(err, recipes.ErrNodeDeleted):
		return exitWith(exitFailure, err)
	case lost != nil:
		return exitWith(exitLost, fmt.Errorf("leadership of %s lost while the job ran (%v): the job was stopped", la.path, lost))
	case !ran:
		return exitWith(exitLost, fmt.Errorf("leadership of %s ended before the job started: %v", la.path, err))
	}
	return exitWith(code, nil)
}
