package main

import (
	"context"
	"errors"
	"syscall"
	"testing"
	"time"
)

// A signal that arrives just as the job is about to start: the router has
// recorded it, found no job, and is still canceling the wait (the test holds
// it inside cancel) when the command starts the job. The job must not start,
// and the command must learn the signal; before, the router let go of its
// mutex before canceling, so a job started in between got neither the
// signal nor a canceled context. The router takes the signal from its
// channel as signal.Notify delivers it; no process gets a real signal.
func TestSignalAsJobStarts(t *testing.T) {
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	entered, release := make(chan struct{}), make(chan struct{})
	r := route(func(err error) {
		close(entered)
		<-release
		cancel(err)
	}, t.Logf)
	defer r.close()

	r.ch <- syscall.SIGTERM
	select {
	case <-entered: // recorded, no job: canceling
	case <-time.After(waitLong):
		t.Fatal("the router did not act on the signal")
	}
	type result struct {
		j   *job
		sig syscall.Signal
		err error
	}
	res := make(chan result, 1)
	started := make(chan struct{}, 1)
	go func() {
		j, sig, err := r.startJob(func() (*job, error) {
			started <- struct{}{}
			// No process: this test process is not a subreaper and has
			// other children (ZooKeeper). A job that is gone ignores
			// signals.
			return &job{gone: true}, nil
		})
		res <- result{j, sig, err}
	}()
	close(release)
	var got result
	select {
	case got = <-res:
	case <-time.After(waitLong):
		t.Fatal("startJob did not return")
	}
	select {
	case <-started:
		t.Error("the job started after the signal had come")
	default:
	}
	if got.j != nil || got.sig != syscall.SIGTERM || got.err != nil {
		t.Errorf("startJob after SIGTERM: job %v, signal %v, error %v: want no job and SIGTERM", got.j != nil, got.sig, got.err)
	}
	<-ctx.Done()
	var sc signalCause
	if !errors.As(context.Cause(ctx), &sc) || sc.sig != syscall.SIGTERM {
		t.Errorf("the wait's cause is %v, want SIGTERM", context.Cause(ctx))
	}
}
