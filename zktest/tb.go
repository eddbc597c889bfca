package zktest

import (
	"fmt"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
)

// TB is the part of testing.TB that zktest calls; *testing.T, *testing.B and
// *testing.F satisfy it. The helpers take it rather than testing.TB so that a
// program importing zktest (a demo, a development server) does not link the
// testing package. Call the helpers that take a TB from the test's goroutine:
// they may call Fatalf.
type TB interface {
	// Helper marks the calling function as a test helper.
	Helper()
	// Cleanup registers a function to run when the test ends, last in first
	// out.
	Cleanup(func())
	// Fatalf logs the message and ends the test as failed.
	Fatalf(format string, args ...any)
	// Logf logs the message in the test's output.
	Logf(format string, args ...any)
	// Failed reports whether the test has failed.
	Failed() bool
	// Name returns the test's name.
	Name() string
}

// Eventually polls cond every 10 ms until it returns true, and fails the test
// with t.Fatalf and msgAndArgs (a format string and its arguments) if that
// does not happen within timeout. Call it only from the test's goroutine. A
// nil cond fails the test at once.
func Eventually(t TB, timeout time.Duration, cond func() bool, msgAndArgs ...any) {
	t.Helper()
	if cond == nil {
		t.Fatalf("zktest: Eventually: nil cond: %s", formatMsg(msgAndArgs))
		return
	}
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		if cond() {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("zktest: condition not met within %v: %s", timeout, formatMsg(msgAndArgs))
		}
		<-tick.C
	}
}

func formatMsg(msgAndArgs []any) string {
	if len(msgAndArgs) == 0 {
		return "(no message)"
	}
	if f, ok := msgAndArgs[0].(string); ok {
		return fmt.Sprintf(f, msgAndArgs[1:]...)
	}
	return fmt.Sprint(msgAndArgs...)
}

// testLogger returns a go-zookeeper logger that writes to t.Logf while the
// test runs and discards messages after it ends (t.Logf would panic then).
func testLogger(t TB) zk.Logger {
	l := &tLogger{t: t}
	t.Cleanup(func() {
		l.mu.Lock()
		l.done = true
		l.mu.Unlock()
	})
	return l
}

type tLogger struct {
	mu   sync.Mutex
	t    TB
	done bool
}

func (l *tLogger) Printf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.done {
		l.t.Helper()
		l.t.Logf("zk: "+format, args...)
	}
}

type discardLogger struct{}

func (discardLogger) Printf(string, ...any) {}
