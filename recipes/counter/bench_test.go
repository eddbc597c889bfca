package counter_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/internal/testkit/curatortest"
	"github.com/zkrecipes/zkrecipes/internal/testkit/sessiontest"
	"github.com/zkrecipes/zkrecipes/recipes/counter"
	"github.com/zkrecipes/zkrecipes/session"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// BenchmarkVsCurator increments a counter under contention alternately with
// this package (8 sessions) and with Curator 5.4's DistributedAtomicLong (8
// Curator clients in one JVM, internal/curatortest, each with
// BoundedExponentialBackoffRetry(1 ms, 100 ms, 29)), each side on a counter
// of its own and through a zktest.Proxy that counts its requests (pings
// excluded), so that machine load hits both alike. b.N is the number of
// rounds; each round makes 2,000 increments with each, and checks both
// totals.
func BenchmarkVsCurator(b *testing.B) {
	const clients, per = 8, 2000
	ns := zktest.NewNamespace(b)
	goProxy, javaProxy := ns.Proxy(b), ns.Proxy(b)
	var goReqs, javaReqs atomic.Int64
	count := func(n *atomic.Int64) func(zktest.Request) zktest.Action {
		return func(r zktest.Request) zktest.Action {
			if r.Op != zktest.OpPing {
				n.Add(1)
			}
			return zktest.Forward
		}
	}
	goProxy.OnRequest(count(&goReqs))
	javaProxy.OnRequest(count(&javaReqs))
	var cs []*counter.Counter[int64]
	for i := 0; i < clients; i++ {
		s := sessiontest.ConnectTo(b, goProxy.Servers(), ns.Root, session.WithSessionTimeout(20*time.Second))
		c, err := counter.New(s, "/bench/go")
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { c.Close() })
		cs = append(cs, c)
	}
	java := curatortest.StartCounter(b, javaProxy.Servers(), ns.Path("/bench/curator"), true)
	ctx := context.Background()
	var ours, theirs time.Duration
	var ourReqs, theirReqs int64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r0 := goReqs.Load()
		took, err := increments(ctx, cs, per)
		if err != nil {
			b.Fatal(err)
		}
		ours += took
		ourReqs += goReqs.Load() - r0
		j0 := javaReqs.Load()
		took, err = java.Bench(ctx, clients, per)
		if err != nil {
			b.Fatal(err)
		}
		theirs += took
		// The Java side's count includes its 8 clients' connects, reads to
		// warm up and closes: small next to 2,000 increments.
		theirReqs += javaReqs.Load() - j0
	}
	b.StopTimer()
	want := int64(b.N * per)
	if v, err := cs[0].Get(ctx); err != nil || v.Value != want {
		b.Fatalf("Go total %+v, %v; want %d", v, err, want)
	}
	if v, err := java.Get(ctx); err != nil || v != want {
		b.Fatalf("Curator total %d, %v; want %d", v, err, want)
	}
	n := float64(want)
	b.ReportMetric(n/ours.Seconds(), "incr/s")
	b.ReportMetric(n/theirs.Seconds(), "curator-incr/s")
	b.ReportMetric(theirs.Seconds()/ours.Seconds(), "x-curator")
	b.ReportMetric(float64(ourReqs)/n, "req/incr")
	b.ReportMetric(float64(theirReqs)/n, "curator-req/incr")
}

// increments has the counters increment n times in all, concurrently, and
// returns how long it took.
func increments(ctx context.Context, cs []*counter.Counter[int64], n int) (time.Duration, error) {
	var left atomic.Int64
	left.Store(int64(n))
	var wg sync.WaitGroup
	errs := make(chan error, len(cs))
	start := time.Now()
	for _, c := range cs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for left.Add(-1) >= 0 {
				if _, err := c.Increment(ctx); err != nil {
					errs <- fmt.Errorf("increment: %w", err)
					return
				}
			}
		}()
	}
	wg.Wait()
	took := time.Since(start)
	close(errs)
	return took, <-errs
}
