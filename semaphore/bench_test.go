package semaphore_test

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/internal/sessiontest"
	"github.com/zkrecipes/zkrecipes/semaphore"
	"github.com/zkrecipes/zkrecipes/session"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// Benchmarks print figures; they assert nothing about time. Run e.g.
//
//	go test -run '^$' -bench Contended -benchtime 3000x ./semaphore/

func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	return ds[int(float64(len(ds)-1)*p)]
}

// BenchmarkContended is the workload: 8 sessions, a maximum of 3
// leases, each holder keeps its lease 10 ms (the ceiling is 300 acquisitions
// a second). b.N is the number of acquisitions. It reports acquisitions per
// second, the wait (Acquire call to return) p50/p99, and the ZooKeeper
// requests and watch notifications per acquisition counted on the wire of
// all 8 sessions (zktest.Tap). It fails if more than 3 leases are ever held
// at once (counted in this process).
func BenchmarkContended(b *testing.B) {
	for _, watch := range []bool{true, false} {
		b.Run(fmt.Sprintf("nodewatch=%v", watch), func(b *testing.B) {
			benchContended(b, 8, 3, 10*time.Millisecond, watch)
		})
	}
}

func benchContended(b *testing.B, sessions, max int, hold time.Duration, watch bool) {
	ns := zktest.NewNamespace(b)
	tap := zktest.NewTap()
	var sems []*semaphore.Semaphore
	for i := 0; i < sessions; i++ {
		s := sessiontest.Connect(b, ns, session.WithDialer(tap.Dialer()), session.WithSessionTimeout(20*time.Second))
		sem, err := semaphore.New(s, semPath, max, semaphore.WithNodeWatch(watch))
		if err != nil {
			b.Fatal(err)
		}
		defer sem.Close()
		sems = append(sems, sem)
	}
	ctx := context.Background()
	// Warm up: the directories exist, every session has acquired once.
	for _, sem := range sems {
		l, err := sem.Acquire(ctx)
		if err != nil {
			b.Fatal(err)
		}
		l.Release(ctx)
	}
	var (
		left, holders, peak atomic.Int64
		mu                  sync.Mutex
		waits               []time.Duration
		wg                  sync.WaitGroup
		errs                = make(chan error, sessions)
	)
	left.Store(int64(b.N))
	r0 := requests(tap)
	tap.ResetNotifications()
	b.ResetTimer()
	start := time.Now()
	for _, sem := range sems {
		wg.Add(1)
		go func(sem *semaphore.Semaphore) {
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
				time.Sleep(hold) // the guarded work
				holders.Add(-1)
				if err := l.Release(ctx); err != nil {
					errs <- err
					return
				}
			}
		}(sem)
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	for _, sem := range sems {
		sem.Close() // joins the lease monitors, whose requests count too
	}
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	if p := peak.Load(); p > int64(max) {
		b.Fatalf("%d leases held at once, maximum %d", p, max)
	}
	n := float64(b.N)
	ceiling := localCeiling(sessions, max, hold, b.N)
	b.ReportMetric(n/elapsed.Seconds(), "acq/s")
	b.ReportMetric(ceiling, "local-acq/s")
	b.ReportMetric(n/elapsed.Seconds()/ceiling, "x-local")
	b.ReportMetric(float64(percentile(waits, 0.5).Microseconds())/1000, "wait-p50-ms")
	b.ReportMetric(float64(percentile(waits, 0.99).Microseconds())/1000, "wait-p99-ms")
	b.ReportMetric(float64(requests(tap)-r0)/n, "req/acq")
	b.ReportMetric(float64(len(notes(b, tap)))/n, "notes/acq")
}

// localCeiling runs the same loop on an in-process semaphore (a channel):
// what this machine allows for the workload with no ZooKeeper at all (the
// hold's sleep overshoots on a loaded machine). It returns acquisitions per
// second.
func localCeiling(workers, max int, hold time.Duration, n int) float64 {
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
