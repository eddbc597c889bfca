package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// result is one result line of go test -bench.
type result struct {
	name   string             // without the -GOMAXPROCS suffix
	iters  int64              // b.N of the last run
	values map[string]float64 // by unit: ns/op, x-curator...
	text   map[string]string  // the same as go test printed them
}

var procSuffix = regexp.MustCompile(`-\d+$`)

// parseBench returns the result lines of go test -bench output, in order:
//
//	BenchmarkName-2   9   0 ns/op   1083 go-ops/s   1.083 x-curator
//
// A name, the iteration count, then value and unit pairs. Any other line is
// skipped. A line holding only a benchmark's name is joined to the next one
// when that one starts with the count (a benchmark that writes to stdout
// splits its result line so).
func parseBench(out string) []result {
	var rs []result
	pending := ""
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) == 1 && strings.HasPrefix(f[0], "Benchmark") {
			pending = f[0]
			continue
		}
		if pending != "" && len(f) > 0 && !strings.HasPrefix(f[0], "Benchmark") {
			if _, err := strconv.ParseInt(f[0], 10, 64); err == nil {
				f = append([]string{pending}, f...)
			}
		}
		if r, ok := parseResult(f); ok {
			rs = append(rs, r)
			pending = ""
		}
	}
	return rs
}

// parseResult parses the fields of one result line.
func parseResult(f []string) (result, bool) {
	if len(f) < 4 || len(f)%2 != 0 || !strings.HasPrefix(f[0], "Benchmark") {
		return result{}, false
	}
	n, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil {
		return result{}, false
	}
	r := result{name: procSuffix.ReplaceAllString(f[0], ""), iters: n,
		values: make(map[string]float64), text: make(map[string]string)}
	for i := 2; i < len(f); i += 2 {
		v, err := strconv.ParseFloat(f[i], 64)
		if err != nil {
			return result{}, false
		}
		r.values[f[i+1]] = v
		r.text[f[i+1]] = f[i]
	}
	return r, true
}

// vsSummary is one workload of lockload -vs-zk -vs-json: the fields of its
// JSON line that the report shows.
type vsSummary struct {
	Workload string `json:"workload"`
	Variants []struct {
		Variant    string    `json:"variant"`
		Label      string    `json:"label"`
		OpsPerSec  float64   `json:"ops_per_sec"`
		VsZK       []float64 `json:"vs_zk"`
		P50us      float64   `json:"p50_us"`
		P99us      float64   `json:"p99_us"`
		ReqPerOp   float64   `json:"req_per_op"`
		NotesPerOp float64   `json:"notes_per_op"`
		CPUusPerOp float64   `json:"cpu_us_per_op"`
	} `json:"variants"`
}

// parseLockload returns the workloads of lockload -vs-zk -vs-json output:
// its lines that start with "{" (the others are its timestamped lines and
// tables).
func parseLockload(out string) ([]vsSummary, error) {
	var ws []vsSummary
	for _, line := range strings.Split(out, "\n") {
		if !strings.HasPrefix(line, "{") {
			continue
		}
		var w vsSummary
		if err := json.Unmarshal([]byte(line), &w); err != nil {
			return nil, fmt.Errorf("lockload's JSON line: %w", err)
		}
		ws = append(ws, w)
	}
	if len(ws) == 0 {
		return nil, errors.New("no JSON line in lockload's output (does it know -vs-json?)")
	}
	return ws, nil
}

// lockloadRows is a row per workload and variant.
func lockloadRows(out string) ([]row, error) {
	ws, err := parseLockload(out)
	if err != nil {
		return nil, err
	}
	var rows []row
	for _, w := range ws {
		for _, v := range w.Variants {
			ratios := make([]string, len(v.VsZK))
			for i, x := range v.VsZK {
				ratios[i] = fmt.Sprintf("%.2f", x)
			}
			if len(ratios) == 0 {
				ratios = []string{"-"}
			}
			rows = append(rows, row{key: w.Workload, cells: []string{
				w.Workload, v.Label, fmt.Sprintf("%.0f", v.OpsPerSec), strings.Join(ratios, " "),
				fmt.Sprintf("%.0f", v.P50us), fmt.Sprintf("%.0f", v.P99us), fmt.Sprintf("%.2f", v.ReqPerOp),
				fmt.Sprintf("%.2f", v.NotesPerOp), fmt.Sprintf("%.0f", v.CPUusPerOp),
			}})
		}
	}
	return rows, nil
}

// keyloadSummary is one workload of examples/keyload -json.
type keyloadSummary struct {
	Workload string          `json:"workload"`
	Variants []keyloadFigure `json:"variants"`
}

// keyloadFigure is one variant's figures (examples/keyload's figure).
type keyloadFigure struct {
	Variant     string    `json:"variant"`
	Label       string    `json:"label"`
	Keys        int       `json:"keys"`
	OpsPerSec   float64   `json:"ops_per_sec"`
	VsZK        []float64 `json:"vs_zk"`
	HeapPerLock float64   `json:"heap_bytes_per_lock"`
	GorosPer    float64   `json:"goroutines_per_lock"`
	ReqPerOp    float64   `json:"requests_per_op"`
	CPUPerOp    float64   `json:"cpu_us_per_op"`
}

// keyloadRows is a row per workload, key count and variant.
func keyloadRows(out string) ([]row, error) {
	var rows []row
	for _, line := range strings.Split(out, "\n") {
		if !strings.HasPrefix(line, "{") {
			continue
		}
		var w keyloadSummary
		if err := json.Unmarshal([]byte(line), &w); err != nil {
			return nil, fmt.Errorf("keyload's JSON line: %w", err)
		}
		for _, v := range w.Variants {
			ratios := make([]string, len(v.VsZK))
			for i, x := range v.VsZK {
				ratios[i] = fmt.Sprintf("%.2f", x)
			}
			if len(ratios) == 0 {
				ratios = []string{"-"}
			}
			// Figures a workload does not measure are left blank ("-" would
			// read as a missing figure).
			dash := func(x float64, format string) string {
				if x == 0 {
					return ""
				}
				return fmt.Sprintf(format, x)
			}
			key := fmt.Sprintf("%s %d", w.Workload, v.Keys)
			rows = append(rows, row{key: key, cells: []string{
				w.Workload, fmt.Sprintf("%d", v.Keys), v.Label, fmt.Sprintf("%.0f", v.OpsPerSec), strings.Join(ratios, " "),
				dash(v.HeapPerLock, "%.0f"), dash(v.GorosPer, "%.3f"), dash(v.ReqPerOp, "%.2f"), dash(v.CPUPerOp, "%.0f"),
			}})
		}
	}
	if len(rows) == 0 {
		return nil, errors.New("no JSON line in keyload's output (does it know -json?)")
	}
	return rows, nil
}
