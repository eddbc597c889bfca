package rwlock_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/internal/testkit/curatortest"
	"github.com/zkrecipes/zkrecipes/internal/testkit/sessiontest"
	"github.com/zkrecipes/zkrecipes/rwlock"
	"github.com/zkrecipes/zkrecipes/session"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// Benchmarks print figures; they assert nothing about time. The mixed
// mixed workload (8 sessions, 20 % writes), for this package and for
// Curator 5.4 on the same server in the same run:
//
//	go test -run '^$' -bench 'Mixed' -benchtime 4000x ./rwlock/
//
// b.N is the total number of lock cycles, spread over the 8 clients.

const benchClients = 8

func pct(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := int(q*float64(len(s))+0.999999) - 1
	return s[max(0, min(i, len(s)-1))]
}

// mixed runs rounds cycles on each locker, one goroutine each; client c's
// round k writes iff curatortest.Writes(k, c). The critical section is
// empty. It returns the acquire times (call to held) of each side.
func mixed(ctx context.Context, lks []locker, rounds int) (reads, writes []time.Duration, err error) {
	var mu sync.Mutex
	var first error
	var wg sync.WaitGroup
	for c, lk := range lks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var rs, ws []time.Duration
			e := func() error {
				for k := 0; k < rounds; k++ {
					w := curatortest.Writes(k, c)
					t0 := time.Now()
					var l *rwlock.Lease
					if w {
						wl, err := lk.Lock(ctx)
						if err != nil {
							return err
						}
						l = &wl.Lease
					} else {
						var err error
						if l, err = lk.RLock(ctx); err != nil {
							return err
						}
					}
					d := time.Since(t0)
					if w {
						ws = append(ws, d)
					} else {
						rs = append(rs, d)
					}
					if err := l.Release(ctx); err != nil {
						return err
					}
				}
				return nil
			}()
			mu.Lock()
			reads = append(reads, rs...)
			writes = append(writes, ws...)
			if e != nil && first == nil {
				first = e
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	return reads, writes, first
}

func requests(tap *zktest.Tap) int64 {
	var n int64
	for _, k := range tap.Requests() {
		n += k
	}
	return n
}

// BenchmarkMixed: 8 sessions, each with its own lock on one path, 20 %
// writes; reports ops/s, the acquire times of each side (p50, p99),
// ZooKeeper requests and watch notifications per cycle (counted on the wire
// by a zktest.Tap).
func BenchmarkMixed(b *testing.B) {
	for _, watch := range []bool{true, false} {
		for _, k := range kinds {
			b.Run(fmt.Sprintf("%s/nodewatch=%v", k.name, watch), func(b *testing.B) {
				ns := zktest.NewNamespace(b)
				tap := zktest.NewTap()
				var lks []locker
				for i := 0; i < benchClients; i++ {
					s := sessiontest.Connect(b, ns, session.WithDialer(tap.Dialer()), session.WithSessionTimeout(20*time.Second))
					lks = append(lks, k.make(b, s, rwlock.WithNodeWatch(watch)))
				}
				ctx := context.Background()
				// Warm up: the directory exists, connections are hot.
				if _, _, err := mixed(ctx, lks, 5); err != nil {
					b.Fatal(err)
				}
				rounds := (b.N + benchClients - 1) / benchClients
				req0 := requests(tap)
				byOp0 := tap.Requests()
				notes0, _ := tap.Notifications()
				b.ResetTimer()
				t0 := time.Now()
				rs, ws, err := mixed(ctx, lks, rounds)
				elapsed := time.Since(t0)
				b.StopTimer()
				if err != nil {
					b.Fatal(err)
				}
				for _, lk := range lks {
					lk.Close() // joins the lease monitors, whose requests count too
				}
				notes, err := tap.Notifications()
				if err != nil {
					b.Fatal(err)
				}
				ops := float64(len(rs) + len(ws))
				var per []string
				for op, n := range tap.Requests() {
					if d := n - byOp0[op]; d > 0 {
						per = append(per, fmt.Sprintf("%s %.2f", zktest.OpName(op), float64(d)/ops))
					}
				}
				sort.Strings(per)
				if b.N >= 100 { // not the b.N == 1 probe run
					b.Logf("%d cycles; requests per cycle: %s", len(rs)+len(ws), strings.Join(per, ", "))
				}
				b.ReportMetric(ops/elapsed.Seconds(), "ops/s")
				b.ReportMetric(float64(pct(rs, 0.5).Microseconds()), "read-p50-µs")
				b.ReportMetric(float64(pct(rs, 0.99).Microseconds()), "read-p99-µs")
				b.ReportMetric(float64(pct(ws, 0.5).Microseconds()), "write-p50-µs")
				b.ReportMetric(float64(pct(ws, 0.99).Microseconds()), "write-p99-µs")
				b.ReportMetric(float64(requests(tap)-req0)/ops, "req/op")
				b.ReportMetric(float64(len(notes)-len(notes0))/ops, "notes/op")
				b.ReportMetric(0, "ns/op")
			})
		}
	}
}

// BenchmarkCuratorMixed: the same workload on Curator 5.4's
// InterProcessReadWriteLock (8 Curator clients in one JVM, one thread each,
// after a warm-up run), on the same server.
func BenchmarkCuratorMixed(b *testing.B) {
	ns := zktest.NewNamespace(b)
	java := curatortest.StartRWLock(b, ns.Servers(), ns.Path(lockPath), "java")
	ctx := context.Background()
	if _, err := java.Bench(ctx, benchClients, 100, 0); err != nil { // JIT warm-up
		b.Fatal(err)
	}
	rounds := (b.N + benchClients - 1) / benchClients
	b.ResetTimer()
	r, err := java.Bench(ctx, benchClients, rounds, 0)
	b.StopTimer()
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(r.OpsPerSec(), "ops/s")
	b.ReportMetric(float64(r.ReadP50.Microseconds()), "read-p50-µs")
	b.ReportMetric(float64(r.ReadP99.Microseconds()), "read-p99-µs")
	b.ReportMetric(float64(r.WriteP50.Microseconds()), "write-p50-µs")
	b.ReportMetric(float64(r.WriteP99.Microseconds()), "write-p99-µs")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkMixedVsCurator alternates runs of the mixed workload on this
// package's RWMutex (default options) and on Curator 5.4, on the same
// server, so that machine noise hits both alike: b.N runs of each, of 50
// rounds per client. It reports both throughputs (total cycles over total
// time of each side), the ratio, and each side's acquire-time percentiles.
func BenchmarkMixedVsCurator(b *testing.B) {
	const rounds = 50
	ns := zktest.NewNamespace(b)
	java := curatortest.StartRWLock(b, ns.Servers(), ns.Path("/curator"), "java")
	var lks []locker
	for i := 0; i < benchClients; i++ {
		s := sessiontest.Connect(b, ns, session.WithSessionTimeout(20*time.Second))
		lks = append(lks, newRWMutex(b, s))
	}
	ctx := context.Background()
	if _, err := java.Bench(ctx, benchClients, 100, 0); err != nil { // JIT warm-up
		b.Fatal(err)
	}
	if _, _, err := mixed(ctx, lks, 5); err != nil {
		b.Fatal(err)
	}
	var goTime, javaTime time.Duration
	var goOps, javaOps int
	var rs, ws []time.Duration
	var jr, jw [2][]time.Duration // Curator's p50 and p99 of each run
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		r, w, err := mixed(ctx, lks, rounds)
		goTime += time.Since(t0)
		if err != nil {
			b.Fatal(err)
		}
		goOps += len(r) + len(w)
		rs, ws = append(rs, r...), append(ws, w...)
		res, err := java.Bench(ctx, benchClients, rounds, 0)
		if err != nil {
			b.Fatal(err)
		}
		javaTime += res.Elapsed
		javaOps += res.Ops
		jr[0], jr[1] = append(jr[0], res.ReadP50), append(jr[1], res.ReadP99)
		jw[0], jw[1] = append(jw[0], res.WriteP50), append(jw[1], res.WriteP99)
	}
	b.StopTimer()
	goRate := float64(goOps) / goTime.Seconds()
	javaRate := float64(javaOps) / javaTime.Seconds()
	b.ReportMetric(goRate, "go-ops/s")
	b.ReportMetric(javaRate, "curator-ops/s")
	b.ReportMetric(goRate/javaRate, "x-curator")
	b.ReportMetric(float64(pct(rs, 0.5).Microseconds()), "go-read-p50-µs")
	b.ReportMetric(float64(pct(rs, 0.99).Microseconds()), "go-read-p99-µs")
	b.ReportMetric(float64(pct(ws, 0.5).Microseconds()), "go-write-p50-µs")
	b.ReportMetric(float64(pct(ws, 0.99).Microseconds()), "go-write-p99-µs")
	// Curator reports percentiles per run: their medians.
	b.ReportMetric(float64(pct(jr[0], 0.5).Microseconds()), "curator-read-p50-µs")
	b.ReportMetric(float64(pct(jr[1], 0.5).Microseconds()), "curator-read-p99-µs")
	b.ReportMetric(float64(pct(jw[0], 0.5).Microseconds()), "curator-write-p50-µs")
	b.ReportMetric(float64(pct(jw[1], 0.5).Microseconds()), "curator-write-p99-µs")
	b.ReportMetric(0, "ns/op")
}
