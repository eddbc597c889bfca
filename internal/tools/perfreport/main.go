// Command perfreport runs the module's performance measurements and prints
// their figures as markdown: the tables of docs/performance.md come from it.
//
//	go run ./internal/tools/perfreport [-runs N] [-only names] [-quick]
//
// Each measurement is one go command (a benchmark, or the lockload example
// with -vs-json, or the keyload example with -json), run from the module's root. Its section shows the command,
// the load average at the start and end of each run and how long the run
// took, and a table with one row per run (per run and per case, when the
// benchmark has sub-benchmarks or the example several workloads). -runs N
// repeats each measurement N times, one run after the other, so that runs
// can be compared within one invocation; -only runs some measurements
// (comma-separated names, listed by -h); -quick uses short benchtimes and
// checks only that every command runs and prints figures. Progress goes to
// stderr. It exits 1 if a command fails or prints no figures; the other
// sections still print.
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"
)

// measurement is one command and what its section shows.
type measurement struct {
	name  string   // for -only
	title string   // the section's heading
	what  string   // one sentence under the heading
	args  []string // the go command's arguments
	quick []string // the same with -quick
	env   []string // added to the environment with -quick (KEY=value)
	// header names the table's columns after "run"; rows turns one run's
	// standard output into rows.
	header []string
	rows   func(stdout string) ([]row, error)
}

// row is one line of a table. Rows of one key print together, run after run,
// in the order the keys first appear.
type row struct {
	key   string
	cells []string
}

func benchArgs(pkg, bench, benchtime string) []string {
	return []string{"test", "-run", "^$", "-bench", "^" + bench + "$", "-benchtime", benchtime, pkg}
}

// bench is a measurement of go test -bench: each benchmark result line is a
// row, its name then the value of each unit in units ("-" if not reported).
func bench(name, title, what, pkg, benchName, benchtime, quickTime string, units ...string) measurement {
	return measurement{
		name: name, title: title, what: what,
		args:   benchArgs(pkg, benchName, benchtime),
		quick:  benchArgs(pkg, benchName, quickTime),
		header: append([]string{"benchmark"}, units...),
		rows: func(stdout string) ([]row, error) {
			rs := parseBench(stdout)
			if len(rs) == 0 {
				return nil, errors.New("no benchmark result in the output")
			}
			var out []row
			for _, r := range rs {
				cells := []string{r.name}
				for _, u := range units {
					v, ok := r.text[u]
					if !ok {
						v = "-"
					}
					cells = append(cells, v)
				}
				out = append(out, row{key: r.name, cells: cells})
			}
			return out, nil
		},
	}
}

func measurements() []measurement {
	failover := bench("leader-failover", "Leader failover",
		"500 failovers of each kind per run on two sessions: from the leader's Close to the next one leading, against a plain child watch on the election path fired by the same delete.",
		"./leader/", "BenchmarkFailover", "1x", "1x",
		"latch-p50-ms", "latch-p99-ms", "selector-p50-ms", "selector-p99-ms",
		"childwatch-p50-ms", "childwatch-p99-ms", "latch-notes/failover", "selector-notes/failover")
	failover.env = []string{"ZKRECIPES_LATENCY_SAMPLES=20"}
	return []measurement{
		{
			name:  "lockload",
			title: "Mutex against go-zookeeper's zk.NewLock",
			what:  "mutex.New, with and without WithLookAhead, against zk.NewLock (and, uncontended, the floor: a bare create and delete) on one server in one process, three rounds with the order rotating, 3 s per variant, workload and round.",
			args:  []string{"run", "./examples/lockload", "-vs-zk", "-vs-only", "zk,floor,default,lookahead", "-vs-time", "3s", "-vs-json"},
			quick: []string{"run", "./examples/lockload", "-vs-zk", "-vs-only", "zk,floor,default,lookahead", "-vs-time", "200ms", "-vs-rounds", "1", "-vs-herd", "10", "-vs-json"},
			header: []string{"workload", "variant", "ops/s", "vs zk.NewLock per round",
				"p50 µs", "p99 µs", "requests/lock", "notifications/lock", "cpu µs/lock"},
			rows: lockloadRows,
		},
		{
			name:   "keyload",
			title:  "Locks per key against go-zookeeper's zk.NewLock",
			what:   "Every mutex kind against zk.NewLock, one session per library in one process: 10,000 locks on new paths held at once (256 goroutines acquiring; heap and goroutines per held lock, the lock values included), lock and release on 10,000 new paths (256 goroutines), and lock and release on 16, 64 and 256 existing keys with a goroutine per key (three rounds of 1 s, order rotating; cycles/s is the median).",
			args:   []string{"run", "./examples/keyload", "-json"},
			quick:  []string{"run", "./examples/keyload", "-json", "-hold-keys", "200", "-new-keys", "200", "-keys", "16", "-rounds", "1", "-time", "200ms"},
			header: []string{"workload", "keys", "variant", "ops/s", "vs zk.NewLock", "heap B/lock", "goroutines/lock", "requests/op", "cpu µs/op"},
			rows:   keyloadRows,
		},
		bench("mutex-uncontended", "Mutex, uncontended, against Curator",
			"Lock and release of a free lock on one session, alternating runs of 300 cycles with Curator's InterProcessMutex and with go-zookeeper's bare create and delete (the floor).",
			"./mutex/", "BenchmarkUncontendedVsCurator", "9x", "1x",
			"go-ops/s", "curator-ops/s", "floor-ops/s", "x-curator", "x-curator-median", "floor-x-curator"),
		bench("mutex-footprint", "Mutex, cost of a waiting Lock",
			"1,000 Locks of one mutex waiting on one session behind a holder; the last of three iterations.",
			"./mutex/", "BenchmarkWaiterFootprint", "3x", "1x",
			"goroutines/waiter", "heap-B/waiter", "stack-B/waiter"),
		failover,
		bench("rwlock-mixed", "Read-write lock against Curator",
			"8 sessions, 20 % writes, alternating runs of 50 rounds per client with Curator's InterProcessReadWriteLock.",
			"./rwlock/", "BenchmarkMixedVsCurator", "3x", "1x",
			"go-ops/s", "curator-ops/s", "x-curator", "go-read-p50-µs", "curator-read-p50-µs", "go-write-p50-µs", "curator-write-p50-µs"),
		bench("semaphore-contended", "Semaphore, contended",
			"8 sessions, 3 leases, each held 10 ms, with the node watch on and off.",
			"./semaphore/", "BenchmarkContended", "1500x", "30x",
			"acq/s", "x-local", "hold-ms", "x-held", "wait-p50-ms", "wait-p99-ms", "req/acq", "notes/acq"),
		bench("semaphore-floor", "Semaphore against the handoff floor",
			"The contended workload alternating with a floor that hands a freed slot over with one delete and one notification, 600 leases per side and round.",
			"./semaphore/", "BenchmarkVsFloor", "3x", "1x",
			"acq/s", "floor-acq/s", "x-floor", "hold-ms", "floor-x-held"),
		bench("semaphore-curator", "Semaphore against Curator",
			"The contended workload alternating with Curator's InterProcessSemaphoreV2, 600 leases per side and round.",
			"./semaphore/", "BenchmarkVsCurator", "3x", "1x",
			"acq/s", "curator-acq/s", "x-curator", "wait-p50-ms", "curator-wait-p50-ms", "req/acq", "curator-req/acq"),
		bench("counter-curator", "Atomic counter against Curator",
			"8 sessions incrementing one counter, alternating with 8 clients of Curator's DistributedAtomicLong, 2,000 increments per side and round.",
			"./recipes/counter/", "BenchmarkVsCurator", "3x", "1x",
			"incr/s", "curator-incr/s", "x-curator", "req/incr", "curator-req/incr"),
	}
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run is the command: it parses args, runs the measurements and prints the
// report to stdout and progress to stderr. It returns the exit code.
func run(args []string, stdout, stderr io.Writer) int {
	all := measurements()
	fs := flag.NewFlagSet("perfreport", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var names []string
	for _, m := range all {
		names = append(names, m.name)
	}
	only := fs.String("only", "", "run only these measurements (comma-separated): "+strings.Join(names, ", "))
	runs := fs.Int("runs", 1, "run each measurement this many times, one table row per run")
	quick := fs.Bool("quick", false, "short benchtimes: checks that every command runs, the figures mean nothing")
	if err := fs.Parse(args); errors.Is(err, flag.ErrHelp) {
		return 0
	} else if err != nil {
		return 2
	}
	if *runs < 1 || fs.NArg() > 0 {
		fmt.Fprintln(stderr, "perfreport: -runs must be at least 1 and there are no arguments")
		return 2
	}
	chosen := all
	if *only != "" {
		chosen = nil
		for _, n := range strings.Split(*only, ",") {
			i := slices.Index(names, strings.TrimSpace(n))
			if i < 0 {
				fmt.Fprintf(stderr, "perfreport: unknown measurement %q; known: %s\n", n, strings.Join(names, ", "))
				return 2
			}
			chosen = append(chosen, all[i])
		}
	}
	root, err := moduleRoot()
	if err != nil {
		fmt.Fprintln(stderr, "perfreport:", err)
		return 1
	}
	goVersion, _ := exec.Command("go", "version").Output()
	fmt.Fprintf(stdout, "`%s` with %s on %d CPUs (%s); load average at start %s.\n",
		shellJoin(append([]string{"go", "run", "./internal/tools/perfreport"}, args...)),
		strings.TrimSpace(string(goVersion)), runtime.NumCPU(), cpuModel(), loadAverage())
	code := 0
	for _, m := range chosen {
		if !section(stdout, stderr, root, m, *runs, *quick) {
			code = 1
		}
	}
	return code
}

// section runs m runs times and prints its section; false if a run failed.
func section(stdout, stderr io.Writer, root string, m measurement, runs int, quick bool) bool {
	args, env := m.args, []string(nil)
	if quick {
		args, env = m.quick, m.env
	}
	cmdline := shellJoin(append(append(env[:len(env):len(env)], "go"), args...))
	what := m.what
	if quick {
		what += " (-quick: short benchtimes, the figures mean nothing.)"
	}
	fmt.Fprintf(stdout, "\n### %s\n\n%s\n\n    %s\n\n", m.title, what, cmdline)
	ok := true
	rows := make([][]row, runs) // by run; nil for a failed run
	for r := 1; r <= runs; r++ {
		fmt.Fprintf(stderr, "perfreport: %s, run %d of %d: %s\n", m.name, r, runs, cmdline)
		load := loadAverage()
		t0 := time.Now()
		cmd := exec.Command("go", args...)
		cmd.Dir = root
		cmd.Env = append(os.Environ(), env...)
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		err := cmd.Run()
		took := time.Since(t0).Round(time.Second)
		var rs []row
		if err == nil {
			rs, err = m.rows(out.String())
		}
		if err != nil {
			ok = false
			fmt.Fprintf(stdout, "- run %d: load average %s at start, FAILED after %v: %v\n", r, load, took, err)
			fmt.Fprintf(stderr, "perfreport: %s, run %d: %v\n%s%s", m.name, r, err, tail(out.String(), 20), tail(errOut.String(), 20))
			continue
		}
		fmt.Fprintf(stdout, "- run %d: load average %s at start, %s at end; took %v\n", r, load, loadAverage(), took)
		rows[r-1] = rs
	}
	if slices.ContainsFunc(rows, func(rs []row) bool { return rs != nil }) {
		fmt.Fprintln(stdout)
		writeTable(stdout, append([]string{"run"}, m.header...), group(rows))
	}
	return ok
}

// group orders the rows of every run (runs[i] is run i+1's) by key, in the
// order keys first appear, run after run within a key, and puts the run's
// number first.
func group(runs [][]row) [][]string {
	var keys []string
	for _, rs := range runs {
		for _, r := range rs {
			if !slices.Contains(keys, r.key) {
				keys = append(keys, r.key)
			}
		}
	}
	var out [][]string
	for _, k := range keys {
		for i, rs := range runs {
			for _, r := range rs {
				if r.key == k {
					out = append(out, append([]string{fmt.Sprint(i + 1)}, r.cells...))
				}
			}
		}
	}
	return out
}

// writeTable prints a markdown table with its columns padded; a column whose
// cells all start like numbers is right-aligned.
func writeTable(w io.Writer, header []string, rows [][]string) {
	width := make([]int, len(header))
	numeric := make([]bool, len(header))
	for i, h := range header {
		width[i] = max(3, len([]rune(h)))
		numeric[i] = true
	}
	for _, r := range rows {
		for i, c := range r {
			width[i] = max(width[i], len([]rune(c)))
			numeric[i] = numeric[i] && (c == "" || strings.ContainsRune("0123456789-.", rune(c[0])))
		}
	}
	line := func(cells []string) {
		var sb strings.Builder
		for i, c := range cells {
			pad := strings.Repeat(" ", width[i]-len([]rune(c)))
			if numeric[i] {
				c = pad + c
			} else {
				c += pad
			}
			sb.WriteString("| " + c + " ")
		}
		fmt.Fprintln(w, sb.String()+"|")
	}
	line(header)
	rule := make([]string, len(header))
	for i := range rule {
		rule[i] = strings.Repeat("-", width[i])
		if numeric[i] {
			rule[i] = rule[i][1:] + ":"
		}
	}
	line(rule)
	for _, r := range rows {
		line(r)
	}
}

// moduleRoot is the directory of the main module's go.mod.
func moduleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", errors.New("run it inside the module (go env GOMOD is empty)")
	}
	return filepath.Dir(gomod), nil
}

// loadAverage is the 1, 5 and 15 minute load averages, or "n/a".
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) >= 3 {
		return strings.Join(f[:3], " ")
	}
	return "n/a"
}

// cpuModel is the first model name in /proc/cpuinfo, or runtime.GOARCH.
func cpuModel() string {
	b, _ := os.ReadFile("/proc/cpuinfo")
	for _, l := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return runtime.GOARCH
}

// shellJoin quotes the words that a shell would otherwise change.
func shellJoin(words []string) string {
	out := make([]string, len(words))
	for i, w := range words {
		out[i] = w
		if w == "" || strings.Trim(w, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./,=:") != "" {
			out[i] = "'" + strings.ReplaceAll(w, "'", `'\''`) + "'"
		}
	}
	return strings.Join(out, " ")
}

// tail is the last n lines of s, each indented, for an error report.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	if len(lines) == 1 && lines[0] == "" {
		return ""
	}
	return "    " + strings.Join(lines, "\n    ") + "\n"
}
