package zkotel_test

import (
	"context"
	"sort"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/zkrecipes/zkrecipes/mutex"
	"github.com/zkrecipes/zkrecipes/session"
	"github.com/zkrecipes/zkrecipes/session/zkotel"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// The cost of the hooks, measured here and not in a timed test: compare
// the sub-benchmarks of one run (go test -bench . -count 5 alternates them).
//
//	nohooks      no hook set
//	nohooks-a/a  no hook set either: a second set of sessions, the noise floor
//	             (its ratio to nohooks shows how far two equal variants drift)
//	zkotel       zkotel's hooks on an SDK meter provider (a manual reader);
//	             traces to the global tracer provider, a no-op one here
//	zkotel+span  the same, with an SDK tracer provider that samples every
//	             span (and exports none)

var variants = []string{"nohooks", "nohooks-a/a", "zkotel", "zkotel+span"}

// benchHooks returns the hooks of variant v.
func benchHooks(b *testing.B, v string) []session.Option {
	if v == "nohooks" || v == "nohooks-a/a" {
		return nil
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	b.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	zo := []zkotel.Option{zkotel.WithMeterProvider(mp)}
	if v == "zkotel+span" {
		tp := sdktrace.NewTracerProvider()
		b.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
		zo = append(zo, zkotel.WithTracerProvider(tp))
	}
	h, err := zkotel.Hooks(zo...)
	if err != nil {
		b.Fatal(err)
	}
	return []session.Option{session.WithHooks(h)}
}

func benchMutexes(b *testing.B, ns *zktest.Namespace, n int, opts []session.Option) []*mutex.Mutex {
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	var ms []*mutex.Mutex
	for i := 0; i < n; i++ {
		s, err := session.Connect(ctx, ns.Servers(), append([]session.Option{session.WithNamespace(ns.Root)}, opts...)...)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { s.Close() })
		m, err := mutex.New(s, "/bench", mutex.WithName("bench"))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { m.Close() })
		l, err := m.Lock(ctx) // untimed: the directory exists from here on
		if err != nil {
			b.Fatal(err)
		}
		if err := l.Release(ctx); err != nil {
			b.Fatal(err)
		}
		ms = append(ms, m)
	}
	return ms
}

// runContended runs n Lock+counter+Release cycles over ms from one
// goroutine per mutex and returns the time they took.
func runContended(b *testing.B, ms []*mutex.Mutex, n int) time.Duration {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var left atomic.Int64
	left.Store(int64(n))
	counter := 0
	var wg sync.WaitGroup
	errs := make(chan error, len(ms))
	start := time.Now()
	for _, m := range ms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for left.Add(-1) >= 0 {
				l, err := m.Lock(ctx)
				if err != nil {
					errs <- err
					return
				}
				counter++
				if err := l.Release(ctx); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	d := time.Since(start)
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	if counter != n {
		b.Fatalf("counter %d after %d locks: two holders at once", counter, n)
	}
	return d
}

// BenchmarkContendedLock: 8 sessions per variant contend for one mutex,
// each looping Lock, a counter increment, Release (examples/lockload's
// contended workload). The variants take turns, in a rotating order, for 20
// rounds of b.N/20 locks each, so that the machine's load moves them alike;
// it reports each variant's µs per lock and the process's CPU µs per lock
// (only one variant runs at a time; medians of the rounds), and its ratio to
// nohooks in the same round (the median).
func BenchmarkContendedLock(b *testing.B) {
	const rounds = 20
	sets := map[string][]*mutex.Mutex{}
	for _, v := range variants {
		sets[v] = benchMutexes(b, zktest.NewNamespace(b), 8, benchHooks(b, v))
	}
	per := max(b.N/rounds, 1)
	took := map[string][]float64{}
	ratio := map[string][]float64{}
	cpu := map[string][]float64{}
	b.ResetTimer()
	for r := 0; r < rounds; r++ {
		round := map[string]float64{}
		for i := range variants {
			v := variants[(i+r)%len(variants)]
			c0 := cpuTime()
			round[v] = float64(runContended(b, sets[v], per).Microseconds()) / float64(per)
			cpu[v] = append(cpu[v], float64((cpuTime()-c0).Microseconds())/float64(per))
			took[v] = append(took[v], round[v])
		}
		for _, v := range variants {
			ratio[v] = append(ratio[v], round[v]/round["nohooks"])
		}
	}
	b.StopTimer()
	for _, v := range variants {
		b.ReportMetric(median(took[v]), "µs/lock:"+v)
		b.ReportMetric(median(cpu[v]), "cpu-µs/lock:"+v)
		if v != "nohooks" {
			b.ReportMetric(median(ratio[v]), "time-ratio:"+v)
		}
	}
}

// cpuTime returns the CPU time this process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// median returns the median of xs.
func median(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	return s[len(s)/2]
}

// BenchmarkUncontendedLock: one session, Lock and Release in a loop;
// allocs/op are the whole process's per cycle.
func BenchmarkUncontendedLock(b *testing.B) {
	for _, v := range variants {
		b.Run(v, func(b *testing.B) {
			ns := zktest.NewNamespace(b)
			m := benchMutexes(b, ns, 1, benchHooks(b, v))[0]
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				l, err := m.Lock(ctx)
				if err != nil {
					b.Fatal(err)
				}
				if err := l.Release(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
