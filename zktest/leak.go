package zktest

import (
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// The goroutine leak check that Main runs after the tests. Goroutine ids are
// never reused within a process, so a snapshot of the ids alive before the
// tests tells which goroutines the tests started; of those, any still alive
// after the tests (and after every server was stopped) leaked, unless it is
// one the runtime or the standard library starts on its own.

// leakWait bounds how long Main waits for goroutines that are still exiting
// (closing connections, reaping a JVM) before it reports them.
const leakWait = 5 * time.Second

// goroutine is one goroutine of a runtime.Stack(all) dump.
type goroutine struct {
	id    uint64
	funcs []string // the functions on its stack, innermost first
	stack string   // its part of the dump, header included
}

// snapshotGoroutines returns the ids of the goroutines alive now.
func snapshotGoroutines() map[uint64]bool {
	ids := make(map[uint64]bool)
	for _, g := range goroutines() {
		ids[g.id] = true
	}
	return ids
}

// findLeaks returns the goroutines alive now that are not in before, not the
// caller's and not ignorable. While there are any it tries again, backing off
// from 1 ms to 100 ms between tries, until wait has passed: goroutines that
// are on their way out get that long to finish.
func findLeaks(before map[uint64]bool, wait time.Duration) []goroutine {
	deadline := time.Now().Add(wait)
	pause := time.Millisecond
	for {
		leaked := newGoroutines(before)
		if len(leaked) == 0 || !time.Now().Before(deadline) {
			return leaked
		}
		t := time.NewTimer(min(pause, time.Until(deadline)))
		<-t.C
		pause = min(2*pause, 100*time.Millisecond)
	}
}

// newGoroutines is one try of findLeaks.
func newGoroutines(before map[uint64]bool) []goroutine {
	all := goroutines()
	var out []goroutine
	for i, g := range all {
		if i == 0 || before[g.id] || ignorable(g) { // the first is the caller's
			continue
		}
		out = append(out, g)
	}
	return out
}

// formatLeaks describes leaked goroutines with their stacks.
func formatLeaks(leaked []goroutine) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d goroutine(s) leaked by the tests (started during the tests, still running after them):\n", len(leaked))
	session := false
	for _, g := range leaked {
		b.WriteString("\n")
		b.WriteString(g.stack)
		b.WriteString("\n")
		session = session || strings.Contains(g.stack, "zkrecipes/internal/zksession.")
	}
	if session {
		b.WriteString("\nGoroutines of a session are among them: a session.Session that a test did not Close?\n")
	}
	return b.String()
}

// ignorable reports whether g is a goroutine the runtime, the standard
// library or the testing package starts on its own, which a test may cause
// to start without leaking it: the signal loop of os/signal, the execution
// tracer, the CPU profile writer, and the test runner.
func ignorable(g goroutine) bool {
	if len(g.funcs) == 0 {
		return false
	}
	switch g.funcs[0] {
	case "os/signal.signal_recv", "os/signal.loop":
		return true
	}
	for _, f := range g.funcs {
		switch f {
		case "runtime.ensureSigM", "runtime.ReadTrace", "runtime/trace.Start.func1",
			"runtime/pprof.profileWriter", "testing.RunTests", "testing.(*T).Run",
			"testing.(*M).Run", "testing.tRunner":
			return true
		}
	}
	return false
}

// goroutines returns every goroutine of runtime.Stack(all), the caller's
// first.
func goroutines() []goroutine {
	buf := make([]byte, 64<<10)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	return parseGoroutines(string(buf))
}

// parseGoroutines parses a runtime.Stack dump: blocks separated by blank
// lines, each a header "goroutine N [state]:" then, per frame, a function
// line "pkg.fn(args)" and a "\tfile:line" line; "created by" lines name the
// creator and are not frames.
func parseGoroutines(dump string) []goroutine {
	var out []goroutine
	for _, block := range strings.Split(strings.TrimSpace(dump), "\n\n") {
		lines := strings.Split(block, "\n")
		rest, ok := strings.CutPrefix(lines[0], "goroutine ")
		if !ok {
			continue
		}
		idText, _, _ := strings.Cut(rest, " ")
		id, err := strconv.ParseUint(idText, 10, 64)
		if err != nil {
			continue
		}
		g := goroutine{id: id, stack: block}
		for _, l := range lines[1:] {
			if l == "" || strings.HasPrefix(l, "\t") || strings.HasPrefix(l, "created by ") || strings.HasPrefix(l, "...") {
				continue
			}
			if i := strings.LastIndexByte(l, '('); i > 0 {
				l = l[:i]
			}
			g.funcs = append(g.funcs, l)
		}
		out = append(out, g)
	}
	return out
}
