package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/mutex"
	"github.com/zkrecipes/zkrecipes/session"
)

var (
	vsZK       = flag.Bool("vs-zk", false, "run only the comparison with go-zookeeper's zk.NewLock (workloads 1, 8 and -vs-herd sessions)")
	vsTime     = flag.Duration("vs-time", time.Second, "(-vs-zk) duration of one variant on one workload in one round")
	vsRounds   = flag.Int("vs-rounds", 3, "(-vs-zk) rounds; each round runs every variant on every workload, in a rotating order")
	vsHerd     = flag.Int("vs-herd", 50, "(-vs-zk) sessions of the herd workload")
	vsOnly     = flag.String("vs-only", "", "(-vs-zk) run only these variants (comma-separated names, e.g. zk,default)")
	vsWork     = flag.String("vs-workloads", "uncontended,contended,counter,herd", "(-vs-zk) run only these workloads (comma-separated)")
	vsByOp     = flag.Bool("vs-byop", false, "(-vs-zk) also print the requests per op by type")
	vsJSON     = flag.Bool("vs-json", false, "(-vs-zk) after each workload's table, print its figures as one line of JSON")
	cpuProfile = flag.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
	memProfile = flag.String("memprofile", "", "(-vs-zk) write an allocation profile of the whole run to this file")
)

// vsVariant is one lock implementation of the comparison.
type vsVariant struct {
	name string
	// lockers returns one lock function per session (zk.Lock is not safe
	// for concurrent use, so each goroutine gets its own).
	lockers func(ctx context.Context, w *vsWorld, path string) ([]func(context.Context) (func() error, error), error)
}

// vsWorld holds the sessions of one workload, both kinds, on one tap.
type vsWorld struct {
	ctr   *counter
	ours  []*session.Session
	conns []*zk.Conn
}

func vsVariants() []vsVariant {
	ours := func(mk func(s *session.Session, path string) (func(context.Context) (func() error, error), error)) func(context.Context, *vsWorld, string) ([]func(context.Context) (func() error, error), error) {
		return func(_ context.Context, w *vsWorld, path string) ([]func(context.Context) (func() error, error), error) {
			out := make([]func(context.Context) (func() error, error), len(w.ours))
			for i, s := range w.ours {
				f, err := mk(s, path)
				if err != nil {
					return nil, err
				}
				out[i] = f
			}
			return out, nil
		}
	}
	return []vsVariant{
		{"zk", func(_ context.Context, w *vsWorld, path string) ([]func(context.Context) (func() error, error), error) {
			out := make([]func(context.Context) (func() error, error), len(w.conns))
			for i, c := range w.conns {
				l := zk.NewLock(c, path, zk.WorldACL(zk.PermAll))
				out[i] = func(context.Context) (func() error, error) {
					if err := l.Lock(); err != nil {
						return nil, err
					}
					return l.Unlock, nil
				}
			}
			return out, nil
		}},
		{"floor", func(_ context.Context, w *vsWorld, path string) ([]func(context.Context) (func() error, error), error) {
			// Not a lock: the create and delete of an ephemeral sequential
			// node, the two writes no lock can do without. Uncontended only.
			out := make([]func(context.Context) (func() error, error), len(w.conns))
			for i, c := range w.conns {
				out[i] = func(context.Context) (func() error, error) {
					p, err := c.Create(path+"/floor-", nil, zk.FlagEphemeral|zk.FlagSequence, zk.WorldACL(zk.PermAll))
					if err != nil {
						return nil, err
					}
					return func() error { return c.Delete(p, -1) }, nil
				}
			}
			return out, nil
		}},
		{"default", ours(lockerOf(mutex.New))},
		{"lookahead", ours(lockerOf(mutex.New, mutex.WithLookAhead(true)))},
		{"watchoff", ours(lockerOf(mutex.New, mutex.WithNodeWatch(false)))},
		{"reentrant", ours(lockerOf(mutex.NewReentrant))},
	}
}

// lockerOf returns, for one of the mutex constructors and its options, what
// makes a lock function on a session: Lock, then a release func.
func lockerOf[M interface {
	Lock(context.Context) (*mutex.Lease, error)
}](mk func(*session.Session, string, ...mutex.Option) (M, error), opts ...mutex.Option) func(*session.Session, string) (func(context.Context) (func() error, error), error) {
	return func(s *session.Session, path string) (func(context.Context) (func() error, error), error) {
		m, err := mk(s, path, opts...)
		if err != nil {
			return nil, err
		}
		return func(ctx context.Context) (func() error, error) {
			l, err := m.Lock(ctx)
			if err != nil {
				return nil, err
			}
			return func() error { return l.Release(context.WithoutCancel(ctx)) }, nil
		}, nil
	}
}

var vsLabels = map[string]string{
	"zk":        "zk.NewLock (go-zookeeper)",
	"floor":     "floor: create and delete (go-zookeeper)",
	"default":   "mutex.New",
	"lookahead": "mutex.New, WithLookAhead(true)",
	"watchoff":  "mutex.New, WithNodeWatch(false)",
	"reentrant": "mutex.NewReentrant",
}

// vsResult is one variant on one workload in one round.
type vsResult struct {
	ops, reqs, notes, allocs int64
	elapsed, cpu             time.Duration   // cpu: this process's CPU time during the run
	handoffs                 []time.Duration // uncontended: cycle times
	byOp                     opCounts
}

func (r vsResult) perSec() float64 { return float64(r.ops) / r.elapsed.Seconds() }

// vsCompare is -vs-zk: zk.NewLock against our mutexes, same server, same run.
func (b *bench) vsCompare(ctx context.Context) error {
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	if *memProfile != "" {
		defer func() {
			runtime.GC() // the profile is as of the last collection
			f, err := os.Create(*memProfile)
			if err != nil {
				fmt.Fprintln(os.Stderr, "memprofile:", err)
				return
			}
			defer f.Close()
			if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
				fmt.Fprintln(os.Stderr, "memprofile:", err)
			}
		}()
	}
	variants := vsVariants()
	if *vsOnly != "" {
		var keep []vsVariant
		for _, v := range variants {
			for _, n := range strings.Split(*vsOnly, ",") {
				if strings.TrimSpace(n) == v.name {
					keep = append(keep, v)
				}
			}
		}
		variants = keep
	}
	workloads := []struct {
		key, name string
		n         int
	}{
		{"uncontended", "uncontended, 1 session", 1},
		{"contended", "contended, 8 sessions, shared counter", 8},
		{"counter", "contended, 8 sessions, a counter znode read and written inside the lock", 8},
		{"herd", fmt.Sprintf("herd, %d sessions", *vsHerd), *vsHerd},
	}
	b.out.Printf("vs zk.NewLock: %d rounds x %d workloads x %d variants, %v each; GOMAXPROCS %d",
		*vsRounds, len(workloads), len(variants), *vsTime, runtime.GOMAXPROCS(0))
	if l, err := os.ReadFile("/proc/loadavg"); err == nil {
		b.out.Printf("load average at start: %s", strings.TrimSpace(string(l)))
	}
	all := variants
	for wi, wl := range workloads {
		if !strings.Contains(","+*vsWork+",", ","+wl.key+",") {
			continue
		}
		variants := all
		if wl.n > 1 {
			// The floor excludes nobody: uncontended only.
			variants = nil
			for _, v := range all {
				if v.name != "floor" {
					variants = append(variants, v)
				}
			}
		}
		w := &vsWorld{ctr: newCounter()}
		var err error
		if w.ours, err = b.sessions(ctx, fmt.Sprintf("vs%d", wi), wl.n, w.ctr); err != nil {
			return err
		}
		for i := 0; i < wl.n; i++ {
			c, err := b.raw(ctx, w.ctr)
			if err != nil {
				return err
			}
			w.conns = append(w.conns, c)
		}
		// zk.NewLock needs its parent; ours create it.
		zkDir := *root + fmt.Sprintf("/vs-%d-zk", wi)
		if err := b.rawDir(w.conns[0], zkDir); err != nil {
			return err
		}
		// The counter workload's work inside the lock: a read and a
		// conditional write of a znode, on the locker's own connection.
		var work func(variant string, i int) error
		if wl.key == "counter" {
			cpath := *root + fmt.Sprintf("/vs-%d-counter", wi)
			if err := b.rawDir(w.conns[0], cpath); err != nil {
				return err
			}
			work = func(variant string, i int) error {
				c := w.conns[i]
				if variant != "zk" {
					c = w.ours[i].Conn()
				}
				data, st, err := c.Get(cpath)
				if err != nil {
					return err
				}
				n, _ := strconv.ParseInt(string(data), 10, 64)
				_, err = c.Set(cpath, strconv.AppendInt(nil, n+1, 10), st.Version)
				if errors.Is(err, zk.ErrBadVersion) {
					return fmt.Errorf("the counter changed under the lock: %w", err)
				}
				return err
			}
		}
		lockers := make(map[string][]func(context.Context) (func() error, error))
		for _, v := range variants {
			path := *root + fmt.Sprintf("/vs-%d-%s", wi, v.name)
			switch v.name {
			case "zk":
				path = zkDir + "/lock"
			case "floor":
				path = zkDir
			}
			if lockers[v.name], err = v.lockers(ctx, w, path); err != nil {
				return err
			}
			// Warm up every locker: creates the directories, learns that
			// they exist (a one-time request per mutex, not counted).
			for _, lock := range lockers[v.name] {
				unlock, err := lock(ctx)
				if err != nil {
					return fmt.Errorf("%s: %w", v.name, err)
				}
				if err := unlock(); err != nil {
					return fmt.Errorf("%s: %w", v.name, err)
				}
			}
		}
		results := make(map[string][]vsResult)
		for r := 0; r < *vsRounds; r++ {
			for k := range variants {
				v := variants[(k+r)%len(variants)]
				// Each locker once, untimed: an idle directory may have
				// been reaped (a container) since the last run.
				for _, lock := range lockers[v.name] {
					unlock, err := lock(ctx)
					if err == nil {
						err = unlock()
					}
					if err != nil {
						return fmt.Errorf("%s, %s: warm-up: %w", wl.name, v.name, err)
					}
				}
				var vwork func(int) error
				if work != nil {
					name := v.name
					vwork = func(i int) error { return work(name, i) }
				}
				res, err := vsRun(ctx, w, lockers[v.name], vwork)
				if err != nil {
					return fmt.Errorf("%s, %s: %w", wl.name, v.name, err)
				}
				results[v.name] = append(results[v.name], res)
			}
		}
		if err := b.vsTable(wl.key, wl.name, wl.n, variants, results); err != nil {
			return err
		}
		b.closeAll()
	}
	if l, err := os.ReadFile("/proc/loadavg"); err == nil {
		b.out.Printf("load average at end: %s", strings.TrimSpace(string(l)))
	}
	return nil
}

// vsRun runs one goroutine per locker, each looping lock, counter++ (and
// work(i), if not nil, with the locker's index), unlock, for -vs-time; it
// checks that no two holders overlap.
func vsRun(ctx context.Context, w *vsWorld, lockers []func(context.Context) (func() error, error), work func(i int) error) (vsResult, error) {
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		mu       sync.Mutex
		lastRel  time.Time // the last holder's unlock call
		handoffs []time.Duration
		inside   atomic.Int32
		counter  int64
		stopped  bool
		held     int64 // holds counted, under mu
		wg       sync.WaitGroup
	)
	errs := make(chan error, len(lockers))
	single := len(lockers) == 1
	snap0 := w.ctr.snapshot()
	req0 := snap0.total()
	w.ctr.tap.ResetNotifications()
	var ms0, ms1 runtime.MemStats
	runtime.ReadMemStats(&ms0)
	cpu0 := processCPU()
	t0 := time.Now()
	for li, lock := range lockers {
		wg.Add(1)
		go func(li int, lock func(context.Context) (func() error, error)) {
			defer wg.Done()
			for cctx.Err() == nil {
				start := time.Now()
				unlock, err := lock(cctx)
				if err != nil {
					if cctx.Err() == nil {
						report(errs, err)
					}
					return
				}
				got := time.Now()
				if inside.Add(1) != 1 {
					report(errs, fmt.Errorf("two holders at once"))
				}
				counter++ // the shared counter: the lock is its only guard
				if work != nil {
					if err := work(li); err != nil && cctx.Err() == nil {
						report(errs, err)
					}
				}
				mu.Lock()
				if stopped {
					// After the stop: leave the figures alone.
					inside.Add(-1)
					mu.Unlock()
					_ = unlock()
					return
				}
				held++
				if single {
					handoffs = append(handoffs, got.Sub(start))
				} else if !lastRel.IsZero() {
					handoffs = append(handoffs, got.Sub(lastRel))
				}
				inside.Add(-1)
				lastRel = time.Now()
				mu.Unlock()
				if single {
					err = unlock()
					handoffs[len(handoffs)-1] = time.Since(start)
				} else {
					err = unlock()
				}
				if err != nil {
					report(errs, err)
					return
				}
			}
		}(li, lock)
	}
	timer := time.NewTimer(*vsTime)
	defer timer.Stop()
	var err error
	select {
	case <-timer.C:
	case err = <-errs:
	case <-ctx.Done():
		err = context.Cause(ctx)
	}
	// The figures stop here: what the end of the run costs (waiters
	// giving up, or, for zk.Lock, which cannot give up, taking one more
	// turn) is not counted.
	mu.Lock()
	stopped = true
	elapsed := time.Since(t0)
	cpu := processCPU() - cpu0
	ops := held
	snap1 := w.ctr.snapshot()
	reqs := snap1.total() - req0
	notes, nerr := w.ctr.tap.Notifications()
	runtime.ReadMemStats(&ms1)
	mu.Unlock()
	cancel()
	wg.Wait()
	if err == nil {
		select {
		case err = <-errs:
		default:
		}
	}
	if err != nil {
		return vsResult{}, err
	}
	if nerr != nil {
		return vsResult{}, nerr
	}
	nnotes := 0
	for _, n := range notes {
		if n.Type != zk.EventSession && n.Type != zk.EventNotWatching {
			nnotes++
		}
	}
	return vsResult{
		ops: ops, reqs: reqs, notes: int64(nnotes), byOp: snap1.minus(snap0),
		allocs: int64(ms1.Mallocs - ms0.Mallocs), elapsed: elapsed, handoffs: handoffs, cpu: cpu,
	}, nil
}

// vsSummary is one workload's figures, as -vs-json prints them.
type vsSummary struct {
	Workload string      `json:"workload"` // uncontended, contended or herd
	Name     string      `json:"name"`
	Sessions int         `json:"sessions"`
	Rounds   int         `json:"rounds"`
	Variants []vsFigures `json:"variants"`
}

// vsFigures is one variant's figures over the rounds of a workload: a row of
// the table.
type vsFigures struct {
	Variant    string    `json:"variant"` // its -vs-only name
	Label      string    `json:"label"`
	OpsPerSec  float64   `json:"ops_per_sec"`     // median of the rounds
	VsZK       []float64 `json:"vs_zk,omitempty"` // ops/s over zk.NewLock's, per round
	P50us      float64   `json:"p50_us"`
	P99us      float64   `json:"p99_us"`
	ReqPerOp   float64   `json:"req_per_op"`
	NotesPerOp float64   `json:"notes_per_op"`
	CPUusPerOp float64   `json:"cpu_us_per_op"`
	AllocsOp   float64   `json:"allocs_per_op,omitempty"` // uncontended only
}

// vsFiguresOf sums up the rounds of each variant.
func vsFiguresOf(n int, variants []vsVariant, results map[string][]vsResult) []vsFigures {
	var out []vsFigures
	for _, v := range variants {
		rs := results[v.name]
		var ops, reqs, notes, allocs int64
		var cpu time.Duration
		var ds []time.Duration
		rates := make([]float64, len(rs))
		var ratios []float64
		for i, r := range rs {
			ops += r.ops
			reqs += r.reqs
			notes += r.notes
			allocs += r.allocs
			cpu += r.cpu
			ds = append(ds, r.handoffs...)
			rates[i] = r.perSec()
			if zr := results["zk"]; len(zr) > i && zr[i].perSec() > 0 {
				ratios = append(ratios, r.perSec()/zr[i].perSec())
			}
		}
		sort.Float64s(rates)
		ds = sortDurations(ds)
		per := func(x int64) float64 { return float64(x) / float64(max(ops, 1)) }
		f := vsFigures{
			Variant: v.name, Label: vsLabels[v.name], VsZK: ratios,
			P50us: micros(percentile(ds, 0.5)), P99us: micros(percentile(ds, 0.99)),
			ReqPerOp: per(reqs), NotesPerOp: per(notes), CPUusPerOp: per(cpu.Microseconds()),
		}
		if len(rates) > 0 {
			f.OpsPerSec = rates[len(rates)/2]
		}
		if n == 1 {
			f.AllocsOp = per(allocs)
		}
		out = append(out, f)
	}
	return out
}

func micros(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

func (b *bench) vsTable(key, name string, n int, variants []vsVariant, results map[string][]vsResult) error {
	what := "handoff p50/p99 µs"
	if n == 1 {
		what = "cycle p50/p99 µs"
	}
	b.out.Printf("workload: %s (%s: from the holder's Unlock call to the next Lock returning)", name, what)
	figs := vsFiguresOf(n, variants, results)
	rows := [][]string{{"variant", "ops/s", "vs zk (per round)", "p50 µs", "p99 µs", "req/op", "watch notif/op", "cpu µs/op", "allocs/op", ""}}
	for _, f := range figs {
		ratios := make([]string, len(f.VsZK))
		for i, r := range f.VsZK {
			ratios[i] = fmt.Sprintf("%.2f", r)
		}
		allocCol := "-"
		if n == 1 {
			allocCol = fmt.Sprintf("%.0f", f.AllocsOp)
		}
		rows = append(rows, []string{f.Label, fmt.Sprintf("%.0f", f.OpsPerSec), strings.Join(ratios, " "),
			fmt.Sprintf("%.0f", f.P50us), fmt.Sprintf("%.0f", f.P99us), fmt.Sprintf("%.2f", f.ReqPerOp),
			fmt.Sprintf("%.2f", f.NotesPerOp), fmt.Sprintf("%.0f", f.CPUusPerOp), allocCol, ""})
	}
	b.table(rows)
	if *vsByOp {
		for _, v := range variants {
			all := make(opCounts)
			var ops int64
			for _, r := range results[v.name] {
				ops += r.ops
				for k, n := range r.byOp {
					all[k] += n
				}
			}
			b.out.Plain("    %-32s %s", vsLabels[v.name], all.per(int(ops)))
		}
	}
	if *vsJSON {
		js, err := json.Marshal(vsSummary{Workload: key, Name: name, Sessions: n, Rounds: *vsRounds, Variants: figs})
		if err != nil {
			return err
		}
		b.out.Plain("%s", js)
	}
	return nil
}

// report sends err unless errs is full (the first errors are enough).
func report(errs chan<- error, err error) {
	select {
	case errs <- err:
	default:
	}
}

// processCPU is the CPU time (user and system) this process has used so far:
// the client side of every variant, the wire counter's proxy included.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
