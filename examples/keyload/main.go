// Command keyload measures locks per business key, the commonest use of a
// ZooKeeper lock, against go-zookeeper's zk.NewLock on the same server in the
// same run: one session per library, most keys new, most locks uncontended,
// thousands held at once. It asserts nothing but exclusion; it is the load
// program behind the per-key table of docs/performance.md.
//
//	hold     -hold-keys (10,000) locks on distinct new paths acquired by
//	         -hold-workers (256) goroutines and all held at once: locks/s,
//	         live heap bytes and goroutines per held lock (the lock values
//	         included); then all released. Not counted on the wire: the
//	         counter keeps a record of every watch.
//	newkeys  Lock and release on -new-keys (10,000) distinct paths whose
//	         directory does not exist yet, -new-workers (256) goroutines on
//	         one session: cycles/s and requests per cycle.
//	keys     Lock and release on existing keys, one goroutine per key, for
//	         each of -keys (16,64,256) keys on one session, -rounds (3) rounds
//	         of -time (1 s) per variant in a rotating order: cycles/s (the
//	         median of the rounds), the ratio to zk.NewLock in each round, and
//	         requests per cycle.
//
// Variants: zk (zk.NewLock), fair (mutex.New), reentrant (mutex.NewReentrant)
// and nonfair (mutex.NewNonFair), all with their default options. Requests
// are counted on the wire (a zktest.Tap); heap is runtime.MemStats.HeapAlloc
// after a collection, before the lock values are made and while every lock is
// held (after the holds have passed the 100 ms after which a held lease
// watches its node).
//
// Run it on an embedded ZooKeeper, in about a minute with the defaults:
//
//	go run ./examples/keyload
//
// or against your own ensemble with -zk host:port,... Compare ratios within
// one run: the machine's load moves the absolute figures. -json prints each
// workload's figures as one line of JSON after its table.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net"
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
	"go.uber.org/zap"

	"github.com/zkrecipes/zkrecipes/examples/internal/demo"
	"github.com/zkrecipes/zkrecipes/mutex"
	"github.com/zkrecipes/zkrecipes/session"
	"github.com/zkrecipes/zkrecipes/zktest"
)

var (
	workloads   = flag.String("workloads", "hold,newkeys,keys", "workloads to run, comma-separated")
	variantsArg = flag.String("variants", "zk,fair,reentrant,nonfair", "variants to run, comma-separated")
	holdKeys    = flag.Int("hold-keys", 10000, "(hold) locks held at once")
	holdWorkers = flag.Int("hold-workers", 256, "(hold) goroutines acquiring")
	newKeys     = flag.Int("new-keys", 10000, "(newkeys) distinct new paths")
	newWorkers  = flag.Int("new-workers", 256, "(newkeys) goroutines")
	keysArg     = flag.String("keys", "16,64,256", "(keys) key counts, one goroutine per key")
	rounds      = flag.Int("rounds", 3, "(keys) rounds")
	runTime     = flag.Duration("time", time.Second, "(keys) duration of one variant in one round")
	root        = flag.String("path", "/zkrecipes-keyload", "parent of the paths used")
	asJSON      = flag.Bool("json", false, "print each workload's figures as one line of JSON after its table")
	cpuProfile  = flag.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
	heapProfile = flag.String("heapprofile", "", "(hold) write a heap profile to this file while the locks are held, per variant (the variant's name is appended)")
)

func main() { demo.Main("keyload", 10*time.Minute, run) }

// locker takes and releases one lock; lockers of one variant share a session.
type locker interface {
	lock(ctx context.Context) error
	unlock(ctx context.Context) error
}

type variant struct {
	name, label string
	// make returns a locker for path on world w.
	make func(w *world, path string) (locker, error)
}

// world is one session per library on one wire counter.
type world struct {
	tap  *zktest.Tap
	sess *session.Session
	conn *zk.Conn
}

var allVariants = []variant{
	{"zk", "zk.NewLock (go-zookeeper)", func(w *world, path string) (locker, error) {
		return &zkLocker{l: zk.NewLock(w.conn, path, zk.WorldACL(zk.PermAll))}, nil
	}},
	{"fair", "mutex.New", func(w *world, path string) (locker, error) {
		m, err := mutex.New(w.sess, path)
		return &leaseLocker{m: m}, err
	}},
	{"reentrant", "mutex.NewReentrant", func(w *world, path string) (locker, error) {
		m, err := mutex.NewReentrant(w.sess, path)
		return &leaseLocker{m: m}, err
	}},
	{"nonfair", "mutex.NewNonFair", func(w *world, path string) (locker, error) {
		m, err := mutex.NewNonFair(w.sess, path)
		return &leaseLocker{m: m}, err
	}},
}

type zkLocker struct{ l *zk.Lock }

func (z *zkLocker) lock(context.Context) error   { return z.l.Lock() }
func (z *zkLocker) unlock(context.Context) error { return z.l.Unlock() }

// leaseLocker is one of the mutex kinds (an interface value holding a
// pointer: no allocation of its own).
type leaseLocker struct {
	m interface {
		Lock(context.Context) (*mutex.Lease, error)
	}
	lease *mutex.Lease
}

func (m *leaseLocker) lock(ctx context.Context) error {
	l, err := m.m.Lock(ctx)
	m.lease = l
	return err
}

func (m *leaseLocker) unlock(ctx context.Context) error {
	l := m.lease
	m.lease = nil
	return l.Release(ctx)
}

type bench struct {
	env      *demo.Env
	out      *demo.Printer
	variants []variant
	seq      atomic.Int64 // makes every run's paths new
}

func run(ctx context.Context, env *demo.Env) error {
	b := &bench{env: env, out: env.Out}
	for _, name := range strings.Split(*variantsArg, ",") {
		found := false
		for _, v := range allVariants {
			if v.name == strings.TrimSpace(name) {
				b.variants, found = append(b.variants, v), true
			}
		}
		if !found {
			return fmt.Errorf("-variants: %q is not one of zk, fair, reentrant, nonfair", name)
		}
	}
	if *heapProfile != "" {
		runtime.MemProfileRate = 1 // every allocation, for the profile (slower)
	}
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
	b.out.Printf("keyload: GOMAXPROCS %d, load average %s", runtime.GOMAXPROCS(0), loadavg())
	for _, wl := range strings.Split(*workloads, ",") {
		var err error
		switch strings.TrimSpace(wl) {
		case "hold":
			err = b.hold(ctx)
		case "newkeys":
			err = b.newKeys(ctx)
		case "keys":
			err = b.keys(ctx)
		default:
			err = fmt.Errorf("-workloads: %q is not one of hold, newkeys, keys", wl)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", strings.TrimSpace(wl), err)
		}
	}
	b.out.Printf("done; load average %s", loadavg())
	return nil
}

// world opens one session of ours and one go-zookeeper connection, both
// counted on one tap unless untapped (the tap keeps a record of every watch
// set, which a heap figure must not include); close closes both.
func (b *bench) world(ctx context.Context, untapped bool) (w *world, closeAll func(), err error) {
	w = &world{tap: zktest.NewTap()}
	sopts := []session.Option{session.WithLogger(b.env.Logger.Named("ours"))}
	dial := zk.Dialer(net.DialTimeout)
	if !untapped {
		sopts = append(sopts, session.WithDialer(w.tap.Dialer()))
		dial = w.tap.Dialer()
	}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	w.sess, err = session.Connect(cctx, b.env.Servers, append(sopts, b.env.Options...)...)
	if err != nil {
		return nil, nil, err
	}
	conn, events, err := zk.Connect(b.env.Servers, 10*time.Second, zk.WithDialer(dial), zk.WithLogger(zkLogger{b.env.Logger.Named("zk")}))
	if err != nil {
		_ = w.sess.Close()
		return nil, nil, err
	}
	for ev := range events {
		if ev.State == zk.StateHasSession {
			break
		}
		if cctx.Err() != nil {
			conn.Close()
			_ = w.sess.Close()
			return nil, nil, fmt.Errorf("go-zookeeper: no session: %w", cctx.Err())
		}
	}
	w.conn = conn
	return w, func() { conn.Close(); _ = w.sess.Close() }, nil
}

// dir returns a path no run has used.
func (b *bench) dir(what, variant string) string {
	return fmt.Sprintf("%s/%s-%d-%d-%s", *root, what, os.Getpid(), b.seq.Add(1), variant)
}

// hold is the hold workload.
func (b *bench) hold(ctx context.Context) error {
	n, workers := *holdKeys, *holdWorkers
	b.out.Printf("hold: %d locks on distinct new paths, %d goroutines acquiring, one session per library", n, workers)
	rows := [][]string{{"variant", "locks/s", "vs zk", "heap B/lock", "goroutines/lock", "released in"}}
	var figs []figure
	zkRate := 0.0
	for _, v := range b.variants {
		w, closeAll, err := b.world(ctx, true)
		if err != nil {
			return err
		}
		dir := b.dir("hold", v.name)
		heap0, goros0 := heapNow(), runtime.NumGoroutine()
		var heap1 uint64
		var goros1 int
		var took time.Duration
		lockers := make([]locker, n)
		for i := range lockers {
			if lockers[i], err = v.make(w, fmt.Sprintf("%s/k%d", dir, i)); err != nil {
				closeAll()
				return err
			}
		}
		start := time.Now()
		// Each goroutine releases the locks it took (a reentrant lock is
		// its goroutine's), once every lock is held and measured.
		var acquired sync.WaitGroup
		acquired.Add(min(workers, n))
		releaseNow := make(chan struct{})
		var relStart time.Time
		err = holdAll(ctx, n, workers, func(mine func() (int, bool)) error {
			var held []int
			var err error
			for i, ok := mine(); ok; i, ok = mine() {
				if err = lockers[i].lock(ctx); err != nil {
					break
				}
				held = append(held, i)
			}
			acquired.Done()
			select {
			case <-releaseNow:
			case <-ctx.Done():
			}
			for _, i := range held {
				if uerr := lockers[i].unlock(ctx); err == nil {
					err = uerr
				}
			}
			return err
		}, func() {
			acquired.Wait()
			took = time.Since(start)
			// A held lease watches its node from 100 ms after the acquire
			// on: measure after that, what a long hold costs.
			time.Sleep(300 * time.Millisecond)
			heap1, goros1 = heapNow(), runtime.NumGoroutine()
			if *heapProfile != "" {
				writeHeapProfile(*heapProfile+"."+v.name, b.out)
			}
			relStart = time.Now()
			close(releaseNow)
		})
		if err != nil {
			closeAll()
			return fmt.Errorf("%s: %w", v.name, err)
		}
		released := time.Since(relStart)
		runtime.KeepAlive(lockers)
		closeAll()
		f := figure{
			Variant: v.name, Label: v.label, Keys: n, OpsPerSec: float64(n) / took.Seconds(),
			HeapPerLock: float64(int64(heap1)-int64(heap0)) / float64(n),
			GorosPer:    float64(goros1-goros0) / float64(n),
		}
		if v.name == "zk" {
			zkRate = f.OpsPerSec
		}
		if zkRate > 0 {
			f.VsZK = []float64{f.OpsPerSec / zkRate}
		}
		figs = append(figs, f)
		rows = append(rows, []string{v.label, fmt.Sprintf("%.0f", f.OpsPerSec), ratios(f.VsZK),
			fmt.Sprintf("%.0f", f.HeapPerLock), fmt.Sprintf("%.3f", f.GorosPer),
			demo.Ms(released)})
	}
	b.table(rows)
	return b.json("hold", figs)
}

// newKeys is the newkeys workload.
func (b *bench) newKeys(ctx context.Context) error {
	n, workers := *newKeys, *newWorkers
	b.out.Printf("newkeys: lock and release on %d paths whose directory does not exist yet, %d goroutines, one session per library", n, workers)
	rows := [][]string{{"variant", "cycles/s", "vs zk", "req/cycle", "requests per cycle by op"}}
	var figs []figure
	zkRate := 0.0
	for _, v := range b.variants {
		w, closeAll, err := b.world(ctx, false)
		if err != nil {
			return err
		}
		dir := b.dir("new", v.name)
		req0 := w.tap.Requests()
		start := time.Now()
		err = parallel(ctx, n, workers, func(i int) error {
			l, err := v.make(w, fmt.Sprintf("%s/k%d", dir, i))
			if err == nil {
				err = l.lock(ctx)
			}
			if err == nil {
				err = l.unlock(ctx)
			}
			return err
		})
		took := time.Since(start)
		byOp := opCounts(w.tap.Requests()).minus(req0)
		closeAll()
		if err != nil {
			return fmt.Errorf("%s: %w", v.name, err)
		}
		f := figure{Variant: v.name, Label: v.label, Keys: n, OpsPerSec: float64(n) / took.Seconds(), ReqPerOp: float64(byOp.total()) / float64(n)}
		if v.name == "zk" {
			zkRate = f.OpsPerSec
		}
		if zkRate > 0 {
			f.VsZK = []float64{f.OpsPerSec / zkRate}
		}
		figs = append(figs, f)
		rows = append(rows, []string{v.label, fmt.Sprintf("%.0f", f.OpsPerSec), ratios(f.VsZK),
			fmt.Sprintf("%.2f", f.ReqPerOp), byOp.per(n)})
	}
	b.table(rows)
	return b.json("newkeys", figs)
}

// keys is the keys workload.
func (b *bench) keys(ctx context.Context) error {
	var counts []int
	for _, s := range strings.Split(*keysArg, ",") {
		k, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || k < 1 {
			return fmt.Errorf("-keys: %q is not a positive number", s)
		}
		counts = append(counts, k)
	}
	var figs []figure
	for _, k := range counts {
		b.out.Printf("keys: lock and release on %d existing keys, one goroutine per key, one session per library, %d rounds of %v", k, *rounds, *runTime)
		w, closeAll, err := b.world(ctx, false)
		if err != nil {
			return err
		}
		lockers := make(map[string][]locker)
		for _, v := range b.variants {
			dir := b.dir("keys", v.name)
			for i := 0; i < k; i++ {
				l, err := v.make(w, fmt.Sprintf("%s/k%d", dir, i))
				if err != nil {
					closeAll()
					return err
				}
				lockers[v.name] = append(lockers[v.name], l)
			}
		}
		rates := make(map[string][]float64)
		reqs := make(map[string]int64)
		ops := make(map[string]int64)
		cpu := make(map[string]time.Duration)
		for r := 0; r < *rounds; r++ {
			for i := range b.variants {
				v := b.variants[(i+r)%len(b.variants)]
				// One untimed cycle per key: the directories exist, and were
				// not reaped (containers) since the last round.
				if err := parallel(ctx, k, k, func(i int) error {
					l := lockers[v.name][i]
					if err := l.lock(ctx); err != nil {
						return err
					}
					return l.unlock(ctx)
				}); err != nil {
					closeAll()
					return fmt.Errorf("%s: warm-up: %w", v.name, err)
				}
				cpu0 := processCPU()
				n, nreq, took, err := cycle(ctx, w, lockers[v.name], *runTime)
				if err != nil {
					closeAll()
					return fmt.Errorf("%s: %w", v.name, err)
				}
				cpu[v.name] += processCPU() - cpu0
				rates[v.name] = append(rates[v.name], float64(n)/took.Seconds())
				reqs[v.name] += nreq
				ops[v.name] += n
			}
		}
		closeAll()
		rows := [][]string{{"variant", "cycles/s", "vs zk per round", "req/cycle", "cpu µs/cycle"}}
		for _, v := range b.variants {
			f := figure{Variant: v.name, Label: v.label, Keys: k, OpsPerSec: median(rates[v.name])}
			if ops[v.name] > 0 {
				f.ReqPerOp = float64(reqs[v.name]) / float64(ops[v.name])
				f.CPUPerOp = float64(cpu[v.name].Microseconds()) / float64(ops[v.name])
			}
			var rs []string
			if zr := rates["zk"]; len(zr) == len(rates[v.name]) {
				for i, x := range rates[v.name] {
					f.VsZK = append(f.VsZK, x/zr[i])
					rs = append(rs, ratio(x/zr[i]))
				}
			}
			figs = append(figs, f)
			rows = append(rows, []string{v.label, fmt.Sprintf("%.0f", f.OpsPerSec), strings.Join(rs, " "), fmt.Sprintf("%.2f", f.ReqPerOp), fmt.Sprintf("%.0f", f.CPUPerOp)})
		}
		b.table(rows)
	}
	return b.json("keys", figs)
}

// cycle runs one goroutine per locker, each looping lock and release, for d;
// it returns the cycles completed and the requests sent meanwhile.
func cycle(ctx context.Context, w *world, lockers []locker, d time.Duration) (n, reqs int64, took time.Duration, err error) {
	var stop atomic.Bool
	var done atomic.Int64
	req0 := w.tap.Requests()
	start := time.Now()
	timer := time.AfterFunc(d, func() { stop.Store(true) })
	defer timer.Stop()
	var counted atomic.Int64
	var countedReqs atomic.Int64
	var once sync.Once
	err = parallel(ctx, len(lockers), len(lockers), func(i int) error {
		l := lockers[i]
		for !stop.Load() {
			if err := l.lock(ctx); err != nil {
				return err
			}
			if err := l.unlock(ctx); err != nil {
				return err
			}
			if !stop.Load() {
				done.Add(1)
			} else {
				once.Do(func() {
					took = time.Since(start)
					counted.Store(done.Load())
					countedReqs.Store(opCounts(w.tap.Requests()).minus(req0).total())
				})
			}
		}
		return nil
	})
	once.Do(func() {
		took = time.Since(start)
		counted.Store(done.Load())
		countedReqs.Store(opCounts(w.tap.Requests()).minus(req0).total())
	})
	return counted.Load(), countedReqs.Load(), took, err
}

// holdAll runs body on workers goroutines (mine hands out the indices
// 0..n-1 among them) and calls whileHeld on this goroutine meanwhile;
// whileHeld must wait until the bodies have done what it measures. It
// returns the first error of a body.
func holdAll(ctx context.Context, n, workers int, body func(mine func() (int, bool)) error, whileHeld func()) error {
	var next atomic.Int64
	mine := func() (int, bool) {
		i := int(next.Add(1)) - 1
		return i, i < n && ctx.Err() == nil
	}
	errs := make(chan error, workers)
	for g := 0; g < min(workers, n); g++ {
		go func() { errs <- body(mine) }()
	}
	whileHeld()
	var first error
	for g := 0; g < min(workers, n); g++ {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return first
}

// parallel calls f(0..n-1) from workers goroutines and returns the first
// error.
func parallel(ctx context.Context, n, workers int, f func(i int) error) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	for g := 0; g < min(workers, n); g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n || ctx.Err() != nil {
					return
				}
				if err := f(i); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
					next.Store(int64(n)) // stop the others
					return
				}
			}
		}()
	}
	wg.Wait()
	if first == nil && ctx.Err() != nil {
		first = context.Cause(ctx)
	}
	return first
}

// writeHeapProfile writes the heap profile as of the last collection.
func writeHeapProfile(name string, out *demo.Printer) {
	f, err := os.Create(name)
	if err == nil {
		err = pprof.Lookup("heap").WriteTo(f, 0)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		out.Printf("heap profile: %v", err)
	}
}

func heapNow() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	return s[len(s)/2]
}

func ratio(x float64) string {
	if x == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2fx", x)
}

func ratios(xs []float64) string {
	if len(xs) == 0 {
		return "-"
	}
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = ratio(x)
	}
	return strings.Join(parts, " ")
}

// figure is one variant's figures on one workload, as -json prints them
// (internal/tools/perfreport reads them).
type figure struct {
	Variant     string    `json:"variant"`
	Label       string    `json:"label"`
	Keys        int       `json:"keys"`        // locks held, new keys, or keys cycled
	OpsPerSec   float64   `json:"ops_per_sec"` // locks/s or cycles/s (keys: the median of the rounds)
	VsZK        []float64 `json:"vs_zk,omitempty"`
	HeapPerLock float64   `json:"heap_bytes_per_lock,omitempty"` // hold
	GorosPer    float64   `json:"goroutines_per_lock,omitempty"` // hold
	ReqPerOp    float64   `json:"requests_per_op,omitempty"`     // newkeys, keys
	CPUPerOp    float64   `json:"cpu_us_per_op,omitempty"`       // keys: this process's CPU (clients and the wire counter)
}

// processCPU is the CPU time (user and system) this process has used so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func loadavg() string {
	l, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "n/a"
	}
	f := strings.Fields(string(l))
	return strings.Join(f[:min(3, len(f))], " ")
}

func (b *bench) json(workload string, figs any) error {
	if !*asJSON {
		return nil
	}
	j, err := json.Marshal(map[string]any{"workload": workload, "variants": figs})
	if err != nil {
		return err
	}
	b.out.Plain("%s", j)
	return nil
}

func (b *bench) table(rows [][]string) {
	widths := make([]int, len(rows[0]))
	for _, r := range rows {
		for i, c := range r {
			widths[i] = max(widths[i], len(c))
		}
	}
	for _, r := range rows {
		var sb strings.Builder
		sb.WriteString("    ")
		for i, c := range r {
			pad := strings.Repeat(" ", widths[i]-len(c))
			if i == 0 || i == len(r)-1 {
				sb.WriteString(c + pad)
			} else {
				sb.WriteString(pad + c)
			}
			if i < len(r)-1 {
				sb.WriteString("  ")
			}
		}
		b.out.Plain("%s", strings.TrimRight(sb.String(), " "))
	}
}

// opCounts are request counts by operation code.
type opCounts map[int32]int64

func (c opCounts) minus(before map[int32]int64) opCounts {
	out := make(opCounts)
	for op, n := range c {
		if d := n - before[op]; d != 0 {
			out[op] = d
		}
	}
	return out
}

func (c opCounts) total() int64 {
	var t int64
	for _, n := range c {
		t += n
	}
	return t
}

// per formats the counts divided by n, largest first.
func (c opCounts) per(n int) string {
	ops := make([]int32, 0, len(c))
	for op := range c {
		ops = append(ops, op)
	}
	sort.Slice(ops, func(i, k int) bool { return c[ops[i]] > c[ops[k]] || (c[ops[i]] == c[ops[k]] && ops[i] < ops[k]) })
	parts := make([]string, 0, len(ops))
	for _, op := range ops {
		parts = append(parts, fmt.Sprintf("%s %.2f", zktest.OpName(op), float64(c[op])/float64(n)))
	}
	return strings.Join(parts, ", ")
}

type zkLogger struct{ lg *zap.Logger }

func (l zkLogger) Printf(format string, args ...any) {
	if ce := l.lg.Check(zap.DebugLevel, "zk"); ce != nil {
		ce.Write(zap.String("msg", fmt.Sprintf(format, args...)))
	}
}
