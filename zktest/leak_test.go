package zktest

import (
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// leakyWorker blocks until stop is closed, then closes done: the goroutine
// TestLeakCheck leaks on purpose, named so that the report can be checked.
func leakyWorker(stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	<-stop
}

func hasFunc(gs []goroutine, suffix string) bool {
	for _, g := range gs {
		for _, f := range g.funcs {
			if strings.HasSuffix(f, suffix) {
				return true
			}
		}
	}
	return false
}

// TestLeakCheck runs Main's leak check against a goroutine leaked on
// purpose: it is reported, with its stack, while it runs; once it has been
// stopped the check reports nothing.
func TestLeakCheck(t *testing.T) {
	before := snapshotGoroutines()
	stop, done := make(chan struct{}), make(chan struct{})
	go leakyWorker(stop, done)
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			close(stop)
			<-done
		}
	})

	leaked := findLeaks(before, 200*time.Millisecond)
	if !hasFunc(leaked, ".leakyWorker") {
		t.Fatalf("the leaked goroutine is not reported; found %d: %s", len(leaked), formatLeaks(leaked))
	}
	report := formatLeaks(leaked)
	for _, want := range []string{"leaked by the tests", "zktest.leakyWorker(", "leak_test.go:", "created by"} {
		if !strings.Contains(report, want) {
			t.Errorf("the report does not contain %q:\n%s", want, report)
		}
	}

	close(stop)
	<-done
	stopped = true
	if leaked := findLeaks(before, leakWait); len(leaked) != 0 {
		t.Fatalf("a clean run reported: %s", formatLeaks(leaked))
	}
}

// TestLeakCheckWaitsForExiting: a goroutine that is on its way out when the
// check starts is given time to finish rather than reported.
func TestLeakCheckWaitsForExiting(t *testing.T) {
	before := snapshotGoroutines()
	stop, done := make(chan struct{}), make(chan struct{})
	go leakyWorker(stop, done)
	exiting := time.AfterFunc(100*time.Millisecond, func() { close(stop) })
	defer exiting.Stop()
	if leaked := findLeaks(before, leakWait); len(leaked) != 0 {
		t.Fatalf("a goroutine that ends 100 ms after the check starts was reported: %s", formatLeaks(leaked))
	}
	<-done
}

// A dump as runtime.Stack(buf, true) writes it: the caller's goroutine
// first, then the others; "created by" lines, elided frames and locked
// goroutines included.
const sampleDump = `goroutine 7 [running]:
main.check()
	/src/main.go:10 +0x1d
main.main()
	/src/main.go:5 +0x25

goroutine 1 [chan receive, 3 minutes]:
testing.(*T).Run(0xc0000076c0, {0x5b6d3a?, 0x0?}, 0x5cf0a8)
	/go/src/testing/testing.go:1750 +0x3ab
testing.runTests.func1(0xc0000076c0)
	/go/src/testing/testing.go:2161 +0x37
testing.tRunner(0xc0000076c0, 0xc000057c48)
	/go/src/testing/testing.go:1689 +0xfb

goroutine 21 [select, locked to thread]:
example.com/pkg.(*Server).spawn.func1()
	/src/pkg/server.go:300 +0x45
created by example.com/pkg.(*Server).spawn in goroutine 7
	/src/pkg/server.go:290 +0x2a5

goroutine 22 [syscall]:
os/signal.signal_recv()
	/go/src/runtime/sigqueue.go:152 +0x29
os/signal.loop()
	/go/src/os/signal/signal_unix.go:23 +0x13
created by os/signal.Notify.func1.1 in goroutine 1
	/go/src/os/signal/signal.go:151 +0x1f

goroutine 23 [chan receive]:
example.com/pkg.worker[...](0xc000100000)
	/src/pkg/worker.go:12 +0x2a
...additional frames elided...
created by example.com/pkg.Start in goroutine 1
	/src/pkg/worker.go:8 +0x65
`

func TestParseGoroutines(t *testing.T) {
	gs := parseGoroutines(sampleDump)
	var ids []uint64
	for _, g := range gs {
		ids = append(ids, g.id)
	}
	if len(gs) != 5 || ids[0] != 7 || ids[4] != 23 {
		t.Fatalf("ids %v, want [7 1 21 22 23]", ids)
	}
	if got := strings.Join(gs[2].funcs, " "); got != "example.com/pkg.(*Server).spawn.func1" {
		t.Errorf("funcs of goroutine 21: %q", got)
	}
	if got := strings.Join(gs[4].funcs, " "); got != "example.com/pkg.worker[...]" {
		t.Errorf("funcs of goroutine 23: %q", got)
	}
	if !strings.HasPrefix(gs[2].stack, "goroutine 21 [select, locked to thread]:\n") || !strings.Contains(gs[2].stack, "created by") {
		t.Errorf("stack of goroutine 21: %q", gs[2].stack)
	}
	for i, want := range []bool{false, true, false, true, false} {
		if got := ignorable(gs[i]); got != want {
			t.Errorf("ignorable(goroutine %d) = %v, want %v", gs[i].id, got, want)
		}
	}
}

// leakChildEnv makes TestMain run Main over a test run that leaks a
// goroutine (see TestMainReportsLeak).
const leakChildEnv = "ZKTEST_LEAK_CHILD"

// TestMainReportsLeak: Main, after tests that pass but leave a goroutine
// running, prints the goroutine's stack and exits 1.
func TestMainReportsLeak(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), leakChildEnv+"=1")
	out, err := cmd.CombinedOutput()
	ee, ok := err.(*exec.ExitError)
	if !ok || ee.ExitCode() != 1 {
		t.Fatalf("Main over a leaking run: %v, want exit 1:\n%s", err, out)
	}
	for _, want := range []string{"FAIL: zktest: 1 goroutine(s) leaked by the tests", "zktest_test.leakedByChild("} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the output does not contain %q:\n%s", want, out)
		}
	}
}
