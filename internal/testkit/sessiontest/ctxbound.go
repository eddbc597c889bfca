package sessiontest

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"
)

// Bounds of the ctx-bound tests, which check that every
// blocking call returns soon after its ctx ends, whatever the network does.
const (
	// BoundCtx is the ctx given to each call under test.
	BoundCtx = 200 * time.Millisecond
	// BoundTolerance is how late a call may return after its ctx ended: what
	// a loaded 2-core machine under -race meets, far below go-zookeeper's
	// own request timeout (⅔ of BoundSession = 4 s).
	BoundTolerance = 300 * time.Millisecond
	// BoundSession is the session timeout of the sessions under test: long
	// enough that the session is not even suspended while a call runs, so
	// only the call's own handling of ctx can bound it.
	BoundSession = 6 * time.Second
	// BoundCap is how long a call may stay blocked before MeasureBound lifts
	// the fault to get it back (code that ignores ctx then still finishes).
	BoundCap = 15 * time.Second
)

// IsDeadline accepts an error matching context.DeadlineExceeded; it is the
// usual ok argument of MeasureBound.
func IsDeadline(err error) bool { return errors.Is(err, context.DeadlineExceeded) }

// MeasureBound runs call on a goroutine with a ctx of BoundCtx, while the
// network is broken, and checks that it returns an error ok accepts within
// BoundCtx+BoundTolerance. It logs "overshoot <name> <duration>" (the time
// past the ctx's end) for a table of overshoots. A call still blocked
// BoundCap after it began is an overshoot of its own: the stacks of the
// library's goroutines are logged, heal lifts the fault and the call is
// awaited (2 minutes at most), so that the test ends on code that ignores
// ctx. It must be called from the test's goroutine.
func MeasureBound(t *testing.T, name string, heal func(), call func(ctx context.Context) error, ok func(error) bool) {
	t.Helper()
	MeasureBoundWithin(t, name, BoundTolerance, heal, call, ok)
}

// MeasureBoundWithin is MeasureBound with another tolerance, for a call
// whose documented bound is looser than BoundTolerance.
func MeasureBoundWithin(t *testing.T, name string, tolerance time.Duration, heal func(), call func(ctx context.Context) error, ok func(error) bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), BoundCtx)
	defer cancel()
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- call(ctx) }()
	capped := time.NewTimer(BoundCap)
	defer capped.Stop()
	var err error
	note := ""
	select {
	case err = <-done:
	case <-capped.C:
		note = " (still blocked at the cap: fault lifted)"
		t.Logf("%s still blocked after %v; the library's goroutines:\n%s", name, BoundCap, LibraryStacks())
		heal()
		select {
		case err = <-done:
		case <-time.After(2 * time.Minute):
			t.Fatalf("%s still blocked 2 minutes after the fault was lifted", name)
		}
	}
	took := time.Since(start)
	t.Logf("overshoot %s %v%s", name, (took - BoundCtx).Round(time.Millisecond), note)
	if !ok(err) {
		t.Errorf("%s = %v", name, err)
	}
	if took > BoundCtx+tolerance {
		t.Errorf("%s returned %v after it began, with a ctx of %v: want at most %v", name, took.Round(time.Millisecond), BoundCtx, BoundCtx+tolerance)
	}
}

// LibraryStacks returns the stacks of the goroutines that run the library's
// code (recipes, session, mutex, leader), to show where a call that ignores
// its ctx is blocked.
func LibraryStacks() string {
	buf := make([]byte, 4<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "zkrecipes/recipes.") || strings.Contains(g, "zkrecipes/session.") ||
			strings.Contains(g, "zkrecipes/mutex.") || strings.Contains(g, "zkrecipes/leader.") {
			out = append(out, g)
		}
	}
	return strings.Join(out, "\n\n")
}
