package main

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
)

// benchOut is go test -bench output as the go command prints it: a plain
// benchmark with its log, two sub-benchmarks, and a result line that the
// benchmark's own output split after the name.
const benchOut = "goos: linux\n" +
	"goarch: amd64\n" +
	"pkg: github.com/zkrecipes/zkrecipes/semaphore\n" +
	"cpu: Intel(R) Xeon(R) Processor\n" +
	"BenchmarkWaiterFootprint-2   \t       3\t1436174725 ns/op\t         1.003 goroutines/waiter\t      1954 heap-B/waiter\t     10125 stack-B/waiter\n" +
	"--- BENCH: BenchmarkWaiterFootprint-2\n" +
	"    conn.go:392: zk: connected to 127.0.0.1:33349\n" +
	"    logger.go:146: INFO\tsession established\t{\"state\": \"Connected\"}\n" +
	"BenchmarkContended/nodewatch=true-2         \t    1500\t   5415896 ns/op\t       184.6 acq/s\t        10.47 hold-ms\t         0.6445 x-held\n" +
	"--- BENCH: BenchmarkContended/nodewatch=true-2\n" +
	"\t... [output truncated]\n" +
	"BenchmarkContended/nodewatch=false-2        \t    1500\t   4911612 ns/op\t       203.6 acq/s\t        10.63 hold-ms\t         0.7217 x-held\n" +
	"BenchmarkUncontendedVsCurator-2   \t\n" +
	"    bench_test.go:99: something the benchmark printed\n" +
	"       9\t         1083 go-ops/s\t         1.083 x-curator\n" +
	"BenchmarkNotAResult is a sentence about benchmarks\n" +
	"PASS\n" +
	"ok  \tgithub.com/zkrecipes/zkrecipes/semaphore\t1.851s\n"

func TestParseBench(t *testing.T) {
	got := parseBench(benchOut)
	want := []result{
		{name: "BenchmarkWaiterFootprint", iters: 3,
			values: map[string]float64{"ns/op": 1436174725, "goroutines/waiter": 1.003, "heap-B/waiter": 1954, "stack-B/waiter": 10125},
			text:   map[string]string{"ns/op": "1436174725", "goroutines/waiter": "1.003", "heap-B/waiter": "1954", "stack-B/waiter": "10125"}},
		{name: "BenchmarkContended/nodewatch=true", iters: 1500,
			values: map[string]float64{"ns/op": 5415896, "acq/s": 184.6, "hold-ms": 10.47, "x-held": 0.6445},
			text:   map[string]string{"ns/op": "5415896", "acq/s": "184.6", "hold-ms": "10.47", "x-held": "0.6445"}},
		{name: "BenchmarkContended/nodewatch=false", iters: 1500,
			values: map[string]float64{"ns/op": 4911612, "acq/s": 203.6, "hold-ms": 10.63, "x-held": 0.7217},
			text:   map[string]string{"ns/op": "4911612", "acq/s": "203.6", "hold-ms": "10.63", "x-held": "0.7217"}},
		{name: "BenchmarkUncontendedVsCurator", iters: 9,
			values: map[string]float64{"go-ops/s": 1083, "x-curator": 1.083},
			text:   map[string]string{"go-ops/s": "1083", "x-curator": "1.083"}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("parseBench:\n got %+v\nwant %+v", got, want)
	}
}

// A bench measurement shows the units it names, in its order, and "-" for a
// unit the benchmark did not report.
func TestBenchRows(t *testing.T) {
	m := bench("x", "X", "x", "./semaphore/", "BenchmarkContended", "1x", "1x", "x-held", "acq/s", "req/acq")
	rows, err := m.rows(benchOut)
	if err != nil {
		t.Fatal(err)
	}
	var got [][]string
	for _, r := range rows {
		got = append(got, r.cells)
	}
	want := [][]string{
		{"BenchmarkWaiterFootprint", "-", "-", "-"},
		{"BenchmarkContended/nodewatch=true", "0.6445", "184.6", "-"},
		{"BenchmarkContended/nodewatch=false", "0.7217", "203.6", "-"},
		{"BenchmarkUncontendedVsCurator", "-", "-", "-"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("rows:\n got %q\nwant %q", got, want)
	}
	if _, err := m.rows("PASS\nok  \tgithub.com/zkrecipes/zkrecipes/semaphore\t1.851s\n"); err == nil {
		t.Error("no error for output without results")
	}
}

// lockloadOut is go run ./examples/lockload -vs-zk -vs-json output (two
// workloads, two rounds).
const lockloadOut = `     0 ms  starting an embedded ZooKeeper (give -zk host:port,... to use your own)
   989 ms  ZooKeeper 3.8.0 is serving on 127.0.0.1:37265
   989 ms  vs zk.NewLock: 2 rounds x 3 workloads x 2 variants, 200ms each; GOMAXPROCS 2
   989 ms  load average at start: 12.67 8.33 10.85 17/551 6558
  1907 ms  workload: uncontended, 1 session (cycle p50/p99 µs: from the holder's Unlock call to the next Lock returning)
    variant                    ops/s  vs zk (per round)  p50 µs  p99 µs  req/op  watch notif/op  cpu µs/op  allocs/op
    zk.NewLock (go-zookeeper)   2164          1.00 1.00     403    9590    3.00            0.00        118         55
    mutex.New                    575          3.72 0.24     983   21820    3.01            0.00        211         86
{"workload":"uncontended","name":"uncontended, 1 session","sessions":1,"rounds":2,"variants":[{"variant":"zk","label":"zk.NewLock (go-zookeeper)","ops_per_sec":2163.8543473158134,"vs_zk":[1,1],"p50_us":402.864,"p99_us":9590.031,"req_per_op":3.002155172413793,"notes_per_op":0,"cpu_us_per_op":117.98706896551724,"allocs_per_op":55.12931034482759},{"variant":"default","label":"mutex.New","ops_per_sec":574.6686632888076,"vs_zk":[3.719733676057621,0.23973294668342945],"p50_us":982.753,"p99_us":21819.699,"req_per_op":3.0136986301369864,"notes_per_op":0,"cpu_us_per_op":211.43835616438355,"allocs_per_op":85.68036529680366}]}
  2761 ms  workload: contended, 8 sessions, shared counter (handoff p50/p99 µs: from the holder's Unlock call to the next Lock returning)
    variant                    ops/s  vs zk (per round)  p50 µs  p99 µs  req/op  watch notif/op  cpu µs/op  allocs/op
    zk.NewLock (go-zookeeper)   1679          1.00 1.00     598    2074    5.06            1.00        166          -
    mutex.New                   1094          0.48 0.65     767    5569    6.10            1.38        274          -
{"workload":"contended","name":"contended, 8 sessions, shared counter","sessions":8,"rounds":2,"variants":[{"variant":"zk","label":"zk.NewLock (go-zookeeper)","ops_per_sec":1678.6953263858097,"vs_zk":[1,1],"p50_us":598.259,"p99_us":2074.044,"req_per_op":5.059105431309904,"notes_per_op":0.9952076677316294,"cpu_us_per_op":165.54792332268372},{"variant":"default","label":"mutex.New","ops_per_sec":1094.3882315066467,"vs_zk":[0.47586929719526544,0.6519278479572812],"p50_us":767.023,"p99_us":5568.841,"req_per_op":6.098039215686274,"notes_per_op":1.3753501400560224,"cpu_us_per_op":273.8487394957983}]}
  3999 ms  load average at end: 13.42 8.55 10.91 5/553 6562
  3999 ms  done
`

func TestLockloadRows(t *testing.T) {
	rows, err := lockloadRows(lockloadOut)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	var got [][]string
	for _, r := range rows {
		keys = append(keys, r.key)
		got = append(got, r.cells)
	}
	want := [][]string{
		{"uncontended", "zk.NewLock (go-zookeeper)", "2164", "1.00 1.00", "403", "9590", "3.00", "0.00", "118"},
		{"uncontended", "mutex.New", "575", "3.72 0.24", "983", "21820", "3.01", "0.00", "211"},
		{"contended", "zk.NewLock (go-zookeeper)", "1679", "1.00 1.00", "598", "2074", "5.06", "1.00", "166"},
		{"contended", "mutex.New", "1094", "0.48 0.65", "767", "5569", "6.10", "1.38", "274"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("rows:\n got %q\nwant %q", got, want)
	}
	if want := []string{"uncontended", "uncontended", "contended", "contended"}; !reflect.DeepEqual(keys, want) {
		t.Errorf("keys %q, want %q", keys, want)
	}
	if _, err := lockloadRows("   0 ms  done\n"); err == nil {
		t.Error("no error for output without a JSON line")
	}
	if _, err := lockloadRows("{\"workload\": 3}\n"); err == nil {
		t.Error("no error for a bad JSON line")
	}
}

// Rows print grouped by key, run after run within a key, each with its run.
func TestGroup(t *testing.T) {
	runs := [][]row{
		{{"a", []string{"a", "x"}}, {"a", []string{"a", "y"}}, {"b", []string{"b", "z"}}},
		{{"a", []string{"a", "x2"}}, {"a", []string{"a", "y2"}}, {"b", []string{"b", "z2"}}},
	}
	want := [][]string{
		{"1", "a", "x"}, {"1", "a", "y"}, {"2", "a", "x2"}, {"2", "a", "y2"},
		{"1", "b", "z"}, {"2", "b", "z2"},
	}
	if got := group(runs); !reflect.DeepEqual(got, want) {
		t.Errorf("group:\n got %q\nwant %q", got, want)
	}
	// A failed run has no rows; the others keep their numbers.
	runs = [][]row{nil, {{"a", []string{"a", "x"}}}}
	if got, want := group(runs), [][]string{{"2", "a", "x"}}; !reflect.DeepEqual(got, want) {
		t.Errorf("group with a failed first run: got %q, want %q", got, want)
	}
}

func TestWriteTable(t *testing.T) {
	var b bytes.Buffer
	writeTable(&b, []string{"run", "variant", "ops/s"}, [][]string{{"1", "mutex.New", "575"}, {"2", "zk", "-"}})
	want := "| run | variant   | ops/s |\n" +
		"| --: | --------- | ----: |\n" +
		"|   1 | mutex.New |   575 |\n" +
		"|   2 | zk        |     - |\n"
	if b.String() != want {
		t.Errorf("table:\n%s\nwant:\n%s", b.String(), want)
	}
}

func TestShellJoin(t *testing.T) {
	got := shellJoin([]string{"K=1", "go", "test", "-run", "^$", "-bench", "^BenchmarkX$", "./mutex/", "it's"})
	want := `K=1 go test -run '^$' -bench '^BenchmarkX$' ./mutex/ 'it'\''s'`
	if got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

// TestQuick runs every measurement once with -quick: each command still
// exists, runs, and prints the figures its section shows. It takes a minute
// or two (ZooKeeper, Curator's JVM); -short skips it.
func TestQuick(t *testing.T) {
	if testing.Short() {
		t.Skip("runs every measurement (-short)")
	}
	var out, errOut bytes.Buffer
	code := run([]string{"-quick"}, &out, &errOut)
	t.Logf("stdout:\n%s\nstderr:\n%s", out.String(), errOut.String())
	if code != 0 {
		t.Fatalf("exit code %d", code)
	}
	for _, m := range measurements() {
		i := strings.Index(out.String(), "### "+m.title+"\n")
		if i < 0 {
			t.Errorf("no section %q", m.title)
			continue
		}
		sec := out.String()[i:]
		if j := strings.Index(sec[4:], "### "); j >= 0 {
			sec = sec[:j+4]
		}
		if !strings.Contains(sec, "|   1 | ") {
			t.Errorf("section %q has no table row:\n%s", m.title, sec)
		}
		if strings.Contains(sec, "| - ") || strings.Contains(sec, " - |") {
			t.Errorf("section %q misses a figure:\n%s", m.title, sec)
		}
	}
}
