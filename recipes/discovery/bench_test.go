package discovery_test

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"sort"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/internal/testkit/curatortest"
	"github.com/zkrecipes/zkrecipes/internal/testkit/sessiontest"
	"github.com/zkrecipes/zkrecipes/recipes/cache"
	"github.com/zkrecipes/zkrecipes/recipes/discovery"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// BenchmarkCacheVsCurator measures a cache of 1,000 instances beside
// Curator 5.4's ServiceCache (internal/curatortest's CuratorDiscovery, with
// Spring's payload class) on the same server and the same nodes: the time
// to the first load, the heap it adds per instance (after garbage
// collections, on each side's own runtime), the watches the server holds for
// its session (wchc, which lists data watches and persistent ones, not child
// watches; the Go client's own count of what it holds is logged too), the goroutines it starts (Go), and the time from a
// write of one instance's node to the cache's event (median of 20). Run it
// with
//
//	go test -run XXX -bench CacheVsCurator -benchtime 1x ./recipes/discovery
//
// Each iteration measures both sides once (a new Go session and cache, a new
// Curator cache in a JVM started anew); the metrics are the means over the
// iterations, and each iteration's figures are logged.
func BenchmarkCacheVsCurator(b *testing.B) {
	const n, changes = 1000, 20
	ns := zktest.NewNamespace(b)
	raw := ns.Conn(b)
	dir := ns.Path("services/svc")
	acl := zk.WorldACL(zk.PermAll)
	if _, err := raw.Create(ns.Path("services"), nil, 0, acl); err != nil {
		b.Fatal(err)
	}
	if _, err := raw.Create(dir, nil, 0, acl); err != nil {
		b.Fatal(err)
	}
	inst := func(i, port int) []byte {
		id := fmt.Sprintf("i%04d", i)
		d, err := json.Marshal(discovery.Instance{Name: "svc", ID: id, Address: "10.0.0.1", Port: port,
			RegistrationTime: time.UnixMilli(1700000000000), URISpec: "{scheme}://{address}:{port}",
			Payload: discovery.SpringInstance{ID: "svc:" + id, Name: "svc", Metadata: map[string]string{"zone": "eu-1"}}.Payload()})
		if err != nil {
			b.Fatal(err)
		}
		return d
	}
	for i := 0; i < n; i += 100 {
		var ops []any
		for k := i; k < i+100; k++ {
			ops = append(ops, &zk.CreateRequest{Path: fmt.Sprintf("%s/i%04d", dir, k), Data: inst(k, 8000), Acl: acl})
		}
		if _, err := raw.Multi(ops...); err != nil {
			b.Fatal(err)
		}
	}
	b.Logf("instance JSON: %d bytes", len(inst(0, 8000)))
	addr := ns.Servers()[0]
	java := curatortest.StartDiscovery(b, ns.Servers(), ns.Path("services"), curatortest.SpringPayload)
	ctx := context.Background()
	port := 9000
	change := func(i int) time.Time {
		port++
		start := time.Now()
		if _, err := raw.Set(fmt.Sprintf("%s/i%04d", dir, i), inst(i, port), -1); err != nil {
			b.Fatal(err)
		}
		return start
	}
	median := func(ds []time.Duration) time.Duration {
		sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
		return ds[len(ds)/2]
	}
	heap := func() uint64 {
		var m runtime.MemStats
		for i := 0; i < 3; i++ {
			runtime.GC()
		}
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	var sum struct {
		goLoad, javaLoad, goChange, javaChange time.Duration
		goHeap, javaHeap                       float64
		goWatches, javaWatches, goRoutines     int
	}
	b.ResetTimer()
	for it := 0; it < b.N; it++ {
		// Go.
		s := sessiontest.Connect(b, ns)
		h0, g0 := heap(), runtime.NumGoroutine()
		start := time.Now()
		c, err := discovery.NewCache(s, base, "svc")
		if err != nil {
			b.Fatal(err)
		}
		events := make(chan discovery.Event, 16)
		go func() {
			for ev := range c.Events() {
				if ev.Type == cache.Updated {
					events <- ev
				}
			}
			close(events)
		}()
		<-c.Initialized()
		goLoad := time.Since(start)
		if got := len(c.Instances()); got != n {
			b.Fatalf("Go cache holds %d", got)
		}
		goHeap := float64(heap()-h0) / n
		goRoutines := runtime.NumGoroutine() - g0
		goWatches := len(sessiontest.Watches(b, addr, s.SessionID()))
		goClientWatches := sessiontest.Core(s).WatchCount()
		var goChange []time.Duration
		for k := 0; k < changes; k++ {
			at := change(k * 37 % n)
			select {
			case <-events:
				goChange = append(goChange, time.Since(at))
			case <-time.After(wait):
				b.Fatal("Go cache: no Updated event")
			}
		}
		c.Close()
		for range events {
		}
		s.Close()

		// Curator.
		javaLoad, javaHeapTotal, got, err := java.Bench(ctx, "svc")
		if err != nil || got != n {
			b.Fatalf("Curator's cache: %d instances, %v", got, err)
		}
		sid, err := java.SessionID(ctx)
		if err != nil {
			b.Fatal(err)
		}
		javaWatches := sessiontest.Watches(b, addr, sid)
		if it == 0 {
			b.Logf("Curator's watched paths (wchc): %v", javaWatches)
		}
		var javaChange []time.Duration
		for k := 0; k < changes; k++ {
			at := change(k * 41 % n)
			wctx, cancel := context.WithTimeout(ctx, wait)
			seen, err := java.WaitChanged(wctx, "bench:svc")
			cancel()
			if err != nil {
				b.Fatal(err)
			}
			javaChange = append(javaChange, seen.Sub(at))
		}
		if err := java.Close(ctx); err != nil {
			b.Fatal(err)
		}
		sum.goLoad += goLoad
		sum.javaLoad += javaLoad
		sum.goHeap += goHeap
		sum.javaHeap += float64(javaHeapTotal) / n
		sum.goWatches += goWatches
		sum.javaWatches += len(javaWatches)
		sum.goRoutines += goRoutines
		sum.goChange += median(goChange)
		sum.javaChange += median(javaChange)
		b.Logf("Go: load %v, heap %.0f B/instance, %d watches (wchc), %d held by the client, %d goroutines, change median %v",
			goLoad, goHeap, goWatches, goClientWatches, goRoutines, median(goChange))
		b.Logf("Curator: load %v, heap %.0f B/instance, %d watches (wchc), change median %v (read from its stdout)",
			javaLoad, float64(javaHeapTotal)/n, len(javaWatches), median(javaChange))
		if it < b.N-1 {
			java = curatortest.StartDiscovery(b, ns.Servers(), ns.Path("services"), curatortest.SpringPayload)
		}
	}
	N := float64(b.N)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 / N }
	b.ReportMetric(ms(sum.goLoad), "go-load-ms")
	b.ReportMetric(ms(sum.javaLoad), "curator-load-ms")
	b.ReportMetric(sum.goHeap/N, "go-heap-B/instance")
	b.ReportMetric(sum.javaHeap/N, "curator-heap-B/instance")
	b.ReportMetric(float64(sum.goWatches)/N, "go-watches")
	b.ReportMetric(float64(sum.javaWatches)/N, "curator-watches")
	b.ReportMetric(float64(sum.goRoutines)/N, "go-goroutines")
	b.ReportMetric(ms(sum.goChange), "go-change-ms")
	b.ReportMetric(ms(sum.javaChange), "curator-change-ms")
}
