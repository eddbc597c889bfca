// Command semaphore shows the distributed counting semaphore (package
// semaphore), wire-compatible with Curator's InterProcessSemaphoreV2, and
// measures it.
//
// (demo) Workers, each with its own ZooKeeper session, run jobs that may only
// run a few at a time: the limit is a SharedCount, so every process (Go, or
// Java on Curator) agrees on it. Each worker prints when it gets a lease and
// gives it back. Midway the demo raises the limit (waiting workers are
// admitted at once, no lease given back), then lowers it below the number of
// holders (they keep their leases; nobody is admitted until fewer hold than
// the new limit). It counts the holders at every acquire and fails if they
// ever exceed the limit in force.
//
// (load) The contended workload: -sessions sessions (8) contend for -max leases
// (3), each holder keeping its lease -hold (10 ms), so the ceiling is
// max/hold acquisitions a second (300). It prints acquisitions a second, the
// same loop's figure on an in-process semaphore (what this machine allows
// with no ZooKeeper at all), the wait from an Acquire call to its return
// (p50, p99), and the ZooKeeper requests and watch notifications per
// acquisition, counted on the wire of every session (zktest.Tap).
//
// Run it on an embedded ZooKeeper (started from the local install, stopped
// on exit, Ctrl-C included):
//
//	go run ./examples/semaphore
//
// or on your own ensemble:
//
//	go run ./examples/semaphore -zk 10.0.0.1:2181,10.0.0.2:2181,10.0.0.3:2181
//
// Flags: -only demo,load; -workers, -jobs, -job (demo); -sessions, -max,
// -hold, -acquisitions (load); -path; -v; -timeout. It exits 0 when the
// semaphore never admitted more holders than its limit.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zkrecipes/zkrecipes/examples/internal/demo"
	"github.com/zkrecipes/zkrecipes/semaphore"
	"github.com/zkrecipes/zkrecipes/session"
	"github.com/zkrecipes/zkrecipes/zktest"
)

var (
	only         = flag.String("only", "demo,load", "sections to run, comma-separated: demo, load")
	nWorkers     = flag.Int("workers", 5, "(demo) workers, one session each")
	jobs         = flag.Int("jobs", 4, "(demo) jobs each worker runs")
	jobTime      = flag.Duration("job", 200*time.Millisecond, "(demo) duration of a job")
	nSessions    = flag.Int("sessions", 8, "(load) contending sessions")
	maxLeases    = flag.Int("max", 3, "(load) maximum leases")
	hold         = flag.Duration("hold", 10*time.Millisecond, "(load) how long a holder keeps its lease")
	acquisitions = flag.Int("acquisitions", 1500, "(load) leases taken in all")
	root         = flag.String("path", "/zkrecipes-demo/semaphore", "parent of the paths used")
)

func main() { demo.Main("semaphore", 5*time.Minute, run) }

func run(ctx context.Context, env *demo.Env) error {
	sections := map[string]func(context.Context, *demo.Env) error{"demo": runDemo, "load": runLoad}
	want := strings.Split(*only, ",")
	for _, s := range want {
		if sections[strings.TrimSpace(s)] == nil {
			return fmt.Errorf("-only %q: sections are demo and load", *only)
		}
	}
	for _, s := range want {
		if err := sections[strings.TrimSpace(s)](ctx, env); err != nil {
			return fmt.Errorf("%s: %w", strings.TrimSpace(s), err)
		}
	}
	env.Out.Printf("done")
	return nil
}

// connect opens one session per name (in parallel) and returns them, with a
// function that closes them.
func connect(ctx context.Context, env *demo.Env, names []string, opts ...session.Option) ([]*session.Session, func(), error) {
	out := make([]*session.Session, len(names))
	errs := make([]error, len(names))
	var wg sync.WaitGroup
	for i, name := range names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			o := append([]session.Option{session.WithLogger(env.Logger.Named(name))}, opts...)
			out[i], errs[i] = session.Connect(cctx, env.Servers, o...)
		}()
	}
	wg.Wait()
	closeAll := func() {
		for _, s := range out {
			if s != nil {
				_ = s.Close()
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		closeAll()
		return nil, nil, err
	}
	return out, closeAll, nil
}

// runDemo is section (demo).
func runDemo(ctx context.Context, env *demo.Env) error {
	if *nWorkers < 3 || *jobs < 1 || *jobTime <= 0 {
		return errors.New("need -workers >= 3, -jobs >= 1 and a positive -job")
	}
	out := env.Out
	names := make([]string, *nWorkers)
	for i := range names {
		names[i] = fmt.Sprintf("worker-%d", i+1)
	}
	sessions, closeAll, err := connect(ctx, env, names)
	if err != nil {
		return err
	}
	defer closeAll()
	semPath, countPath := *root+"/demo/exports", *root+"/demo/max-exports"

	// The limit: a SharedCount, created with 2 unless it exists.
	limit, err := semaphore.NewSharedCount(sessions[0], countPath, 2)
	if err != nil {
		return err
	}
	defer limit.Close()
	if _, err := limit.Set(ctx, 2); err != nil {
		return err
	}
	// What the demo checks: no lease is granted beyond the limit in force.
	// A change of the limit reaches each acquirer through its SharedCount's
	// watch, a notification later, so an acquire is checked against the
	// limit it must have seen: 2 until the raise, never more than 4, and 1
	// for acquires begun after every worker's count showed 1.
	var (
		mu        sync.Mutex
		holding   int
		raised    bool      // the limit went from 2 to 4
		loweredAt time.Time // every worker's count showed 1 from then on
		errs      []error
	)
	type worker struct {
		name  string
		sem   *semaphore.Semaphore
		count *semaphore.SharedCount
	}
	var workers []worker
	for i, s := range sessions {
		c, err := semaphore.NewSharedCount(s, countPath, 2)
		if err != nil {
			return err
		}
		defer c.Close()
		sem, err := semaphore.NewShared(s, semPath, c, semaphore.WithID(names[i]))
		if err != nil {
			return err
		}
		defer sem.Close()
		workers = append(workers, worker{names[i], sem, c})
	}
	out.Printf("%d workers run %d jobs each on %s, limit %s = 2 (a SharedCount)", len(workers), *jobs, semPath, countPath)

	acquired := make(chan string, len(workers)**jobs)
	var wg sync.WaitGroup
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	for _, w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < *jobs; j++ {
				t0 := time.Now()
				lease, err := w.sem.Acquire(wctx)
				if err != nil {
					if wctx.Err() == nil {
						mu.Lock()
						errs = append(errs, fmt.Errorf("%s: %w", w.name, err))
						mu.Unlock()
					}
					return
				}
				mu.Lock()
				holding++
				h := holding
				switch {
				case h > 4,
					!raised && h > 2,
					!loweredAt.IsZero() && t0.After(loweredAt) && h > 1:
					errs = append(errs, fmt.Errorf("%s got a lease with %d holders, over the limit", w.name, h))
				}
				mu.Unlock()
				out.Printf("%-9s got a lease after %-9s holders %d, token %s", w.name, demo.Ms(time.Since(t0))+",", h, demo.Hex(lease.Token()))
				acquired <- w.name
				select {
				case <-time.After(*jobTime): // the job
				case <-lease.Done():
					out.Printf("%-9s lost its lease: %v", w.name, lease.Err())
				}
				mu.Lock()
				holding--
				mu.Unlock()
				_ = lease.Release(context.WithoutCancel(wctx))
			}
		}()
	}

	// After a few jobs, raise the limit to 4: two waiters are admitted with
	// no lease given back.
	for i := 0; i < 3; i++ {
		if _, err := demo.Wait(ctx, acquired, "a lease"); err != nil {
			return err
		}
	}
	out.Printf("--- raising the limit to 4 ---")
	if _, err := limit.Set(ctx, 4); err != nil {
		return err
	}
	mu.Lock()
	raised = true
	mu.Unlock()
	for i := 0; i < 4; i++ {
		if _, err := demo.Wait(ctx, acquired, "a lease"); err != nil {
			return err
		}
	}
	// Lower it to 1: the holders keep their leases, nobody is admitted until
	// none holds.
	mu.Lock()
	n := holding
	mu.Unlock()
	out.Printf("--- lowering the limit to 1 with %d holders: they keep their leases ---", n)
	if _, err := limit.Set(ctx, 1); err != nil {
		return err
	}
	for _, w := range workers {
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		for v := range w.count.Watch(wctx) {
			if v.Count == 1 {
				break
			}
		}
		cancel()
	}
	mu.Lock()
	loweredAt = time.Now()
	mu.Unlock()
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	out.Printf("never more holders than the limit in force")
	return nil
}

// runLoad is section (load).
func runLoad(ctx context.Context, env *demo.Env) error {
	if *nSessions < 1 || *maxLeases < 1 || *hold < 0 || *acquisitions < 1 {
		return errors.New("need positive -sessions, -max and -acquisitions, and -hold >= 0")
	}
	out := env.Out
	tap := zktest.NewTap()
	names := make([]string, *nSessions)
	for i := range names {
		names[i] = fmt.Sprintf("load-%d", i+1)
	}
	sessions, closeAll, err := connect(ctx, env, names, session.WithDialer(tap.Dialer()))
	if err != nil {
		return err
	}
	defer closeAll()
	path := *root + "/load"
	var sems []*semaphore.Semaphore
	for _, s := range sessions {
		sem, err := semaphore.New(s, path, *maxLeases)
		if err != nil {
			return err
		}
		defer sem.Close()
		sems = append(sems, sem)
	}
	ceiling := float64(*maxLeases) / hold.Seconds()
	out.Printf("%d sessions, %d leases on %s, each held %v (ceiling %.0f/s), %d acquisitions",
		len(sems), *maxLeases, path, *hold, ceiling, *acquisitions)
	// Warm up: the directories exist, every session has acquired once.
	for _, sem := range sems {
		l, err := sem.Acquire(ctx)
		if err != nil {
			return err
		}
		_ = l.Release(ctx)
	}
	local := localRate(*nSessions, *maxLeases, *hold, *acquisitions)
	reqs := func() int64 {
		var n int64
		for _, k := range tap.Requests() {
			n += k
		}
		return n
	}
	r0 := reqs()
	tap.ResetNotifications()
	var (
		left, holders, peak atomic.Int64
		mu                  sync.Mutex
		waits               []time.Duration
		wg                  sync.WaitGroup
		errs                = make(chan error, len(sems))
	)
	left.Store(int64(*acquisitions))
	start := time.Now()
	for _, sem := range sems {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for left.Add(-1) >= 0 {
				t0 := time.Now()
				l, err := sem.Acquire(ctx)
				if err != nil {
					errs <- err
					return
				}
				d := time.Since(t0)
				h := holders.Add(1)
				for p := peak.Load(); h > p && !peak.CompareAndSwap(p, h); p = peak.Load() {
				}
				mu.Lock()
				waits = append(waits, d)
				mu.Unlock()
				time.Sleep(*hold) // the guarded work
				holders.Add(-1)
				if err := l.Release(ctx); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	for _, sem := range sems {
		_ = sem.Close() // joins the lease watches, whose requests count too
	}
	close(errs)
	if err := <-errs; err != nil {
		return err
	}
	notes, err := tap.Notifications()
	if err != nil {
		return fmt.Errorf("tap: %w", err)
	}
	n := float64(*acquisitions)
	rate := n / elapsed.Seconds()
	sort.Slice(waits, func(i, j int) bool { return waits[i] < waits[j] })
	pct := func(p float64) time.Duration { return waits[int(float64(len(waits)-1)*p)] }
	out.Plain("")
	out.Plain("  acquisitions/s     %7.1f   (%.0f %% of the ceiling %.0f/s)", rate, 100*rate/ceiling, ceiling)
	out.Plain("  in-process /s      %7.1f   (the same loop on a channel: this machine's ceiling)", local)
	out.Plain("  wait p50           %7s", demo.Ms(pct(0.5)))
	out.Plain("  wait p99           %7s", demo.Ms(pct(0.99)))
	out.Plain("  requests/acq       %7.2f", float64(reqs()-r0)/n)
	out.Plain("  notifications/acq  %7.2f", float64(len(notes))/n)
	out.Plain("  most holders       %7d   (maximum %d)", peak.Load(), *maxLeases)
	out.Plain("")
	if p := peak.Load(); p > int64(*maxLeases) {
		return fmt.Errorf("%d leases held at once, maximum %d", p, *maxLeases)
	}
	return nil
}

// localRate runs the load loop on an in-process semaphore (a channel) and
// returns its acquisitions per second: the ceiling this machine allows for
// the workload (a loaded machine's timers oversleep the hold).
func localRate(workers, max int, hold time.Duration, n int) float64 {
	sem := make(chan struct{}, max)
	var left atomic.Int64
	left.Store(int64(n))
	var wg sync.WaitGroup
	start := time.Now()
	for i := 0; i < workers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for left.Add(-1) >= 0 {
				sem <- struct{}{}
				time.Sleep(hold)
				<-sem
			}
		}()
	}
	wg.Wait()
	return float64(n) / time.Since(start).Seconds()
}
