package cache_test

import (
	"context"
	"fmt"
	"math/rand"
	"os"
	"runtime"
	"sort"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/internal/testkit/curatortest"
	"github.com/zkrecipes/zkrecipes/internal/testkit/sessiontest"
	"github.com/zkrecipes/zkrecipes/recipes/cache"
	"github.com/zkrecipes/zkrecipes/session"
)

// Shape of the benchmark's tree: a root, benchFan children, benchFan
// grandchildren each (10,101 nodes), 16 bytes of data per node.
const (
	benchFan     = 100
	benchChanges = 30
)

// BenchmarkTreeVsCurator loads a tree cache of 10,101 nodes (100 × 100
// below a root) with this package and with Curator 5.4's TreeCache
// (internal/testkit/curatortest's CuratorTreeCache, in its own JVM) on the
// same server and data, and prints both side by side: memory per node (Go:
// heap and goroutine stacks in use after a GC, before the start and once
// the load's events are received, as Curator's listener has received them
// by its INITIALIZED; Java: used heap after System.gc(), the same two
// moments), the watches the client counts (Go: the session's Watches, for
// watches that the server alone holds; go-zookeeper's own registrations
// and the server's data watches for the session, wchc, are printed below),
// the time to the first load (the constructor or start to the Initialized
// event received), and the time from a SetData on a random grandchild to
// the cache's Updated event (median and worst of benchChanges, one at a
// time, the Java side timed by its listener's wall clock). The server
// has served a read of every node before either side loads. Run it alone:
// go test -run '^$' -bench TreeVsCurator -benchtime 1x ./recipes/cache/.
func BenchmarkTreeVsCurator(b *testing.B) {
	ns, raw := zktestNS(b)
	root := ns.Path("tree")
	makeTree(b, raw, root)
	warmUp(b, raw, root)
	nodes := 1 + benchFan + benchFan*benchFan
	ctx := context.Background()
	java := curatortest.StartTreeCache(b, ns.Servers(), root, curatortest.WithSessionTimeout(30*time.Second))
	// No zktest.Tap on this session: its own record of the watches would
	// count as the cache's memory. The session counts them.
	s := sessiontest.Connect(b, ns, session.WithSessionTimeout(30*time.Second))
	rng := rand.New(rand.NewSource(1))
	for i := 0; i < b.N; i++ {
		// Go.
		before := heapInUse()
		start := time.Now() // NewTree returns at once: the load runs after
		c, err := cache.NewTree(s, "/tree")
		if err != nil {
			b.Fatal(err)
		}
		updated := make(chan string, benchChanges)
		initialized := make(chan time.Time, 1)
		drained := make(chan struct{})
		go func() { // keeps no event: the memory measured is the cache's
			defer close(drained)
			for ev := range c.Events() {
				switch ev.Type {
				case cache.Updated:
					updated <- ev.Node.Path
				case cache.Initialized:
					initialized <- time.Now()
				}
			}
		}()
		goLoad := sessiontest.Recv(b, initialized, 5*time.Minute, "Initialized").Sub(start)
		after := heapInUse()
		if n := len(cachedTree(c, "/tree")); n != nodes {
			b.Fatalf("Go cache holds %d nodes, want %d", n, nodes)
		}
		goWatches := s.Watches()
		goRegistrations := sessiontest.Core(s).WatchCount()
		serverWatches := len(sessiontest.Watches(b, ns.Server.Addr(), s.SessionID()))
		goChange := changes(b, rng, raw, root, func(p string, set func()) time.Duration {
			t0 := time.Now()
			set()
			if got := sessiontest.Recv(b, updated, wait, "the write's event"); got != "/tree"+p[len(root):] {
				b.Fatalf("Updated %s, want %s", got, p)
			}
			return time.Since(t0)
		})
		c.Close()
		sessiontest.Recv(b, drained, wait, "Events closed")

		// Curator.
		load, err := java.Load(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if load.Nodes != nodes {
			b.Fatalf("Curator holds %d nodes, want %d", load.Nodes, nodes)
		}
		jd, je, jc, err := java.Watches(ctx)
		if err != nil {
			b.Fatal(err)
		}
		javaChange := changes(b, rng, raw, root, func(p string, set func()) time.Duration {
			if err := java.Arm(ctx, p); err != nil {
				b.Fatal(err)
			}
			t0 := time.Now()
			set()
			at, err := java.WaitChanged(ctx)
			if err != nil {
				b.Fatal(err)
			}
			return at.Sub(t0)
		})
		if err := java.CloseCache(ctx); err != nil {
			b.Fatal(err)
		}

		goPer := float64(after-before) / float64(nodes)
		javaPer := float64(load.HeapAfter-load.HeapBefore) / float64(nodes)
		fmt.Fprintf(os.Stdout, "\ntree cache of %d nodes (%d x %d below a root, 16 B of data each), one server\n", nodes, benchFan, benchFan)
		fmt.Fprintf(os.Stdout, "%-34s %16s %16s\n", "", "zkrecipes", "Curator 5.4")
		fmt.Fprintf(os.Stdout, "%-34s %16.0f %16.0f\n", "memory per node (bytes)", goPer, javaPer)
		fmt.Fprintf(os.Stdout, "%-34s %16d %16d\n", "watches held (data+exists+child)", goWatches, jd+je+jc)
		fmt.Fprintf(os.Stdout, "%-34s %16v %16v\n", "first load", goLoad.Round(time.Millisecond), load.Took.Round(time.Millisecond))
		fmt.Fprintf(os.Stdout, "%-34s %16v %16v\n", "SetData to event, median", goChange[len(goChange)/2].Round(10*time.Microsecond), javaChange[len(javaChange)/2].Round(10*time.Microsecond))
		fmt.Fprintf(os.Stdout, "%-34s %16v %16v\n", "SetData to event, worst", goChange[len(goChange)-1].Round(10*time.Microsecond), javaChange[len(javaChange)-1].Round(10*time.Microsecond))
		fmt.Fprintf(os.Stdout, "(Go: %d registrations in go-zookeeper, %d data watches on the server (wchc), goroutines now: %d)\n",
			goRegistrations, serverWatches, runtime.NumGoroutine())
		b.ReportMetric(goPer, "B/node")
		b.ReportMetric(javaPer, "curator-B/node")
		b.ReportMetric(goLoad.Seconds(), "load-s")
		b.ReportMetric(load.Took.Seconds(), "curator-load-s")
		b.ReportMetric(float64(goChange[len(goChange)/2].Microseconds()), "change-µs")
		b.ReportMetric(float64(javaChange[len(javaChange)/2].Microseconds()), "curator-change-µs")
	}
}

// changes writes benchChanges random grandchildren below root one at a
// time, timing each with timed, and returns the times sorted.
func changes(b *testing.B, rng *rand.Rand, raw *zk.Conn, root string, timed func(p string, set func()) time.Duration) []time.Duration {
	out := make([]time.Duration, 0, benchChanges)
	for i := 0; i < benchChanges; i++ {
		p := fmt.Sprintf("%s/p%02d/c%02d", root, rng.Intn(benchFan), rng.Intn(benchFan))
		out = append(out, timed(p, func() {
			if _, err := raw.Set(p, []byte(fmt.Sprintf("changed-%09d", rng.Intn(1e9))), -1); err != nil {
				b.Fatalf("set %s: %v", p, err)
			}
		}))
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// warmUp reads every node of the tree at root once (its data and its
// children, as a load does, without watches), 64 reads at a time, so that
// neither side's first load is the one that warms the server up.
func warmUp(b *testing.B, raw *zk.Conn, root string) {
	paths := []string{root}
	for i := 0; i < benchFan; i++ {
		p := fmt.Sprintf("%s/p%02d", root, i)
		paths = append(paths, p)
		for j := 0; j < benchFan; j++ {
			paths = append(paths, fmt.Sprintf("%s/c%02d", p, j))
		}
	}
	work := make(chan string)
	errs := make(chan error, 64)
	for i := 0; i < 64; i++ {
		go func() {
			var err error
			for p := range work {
				if err == nil {
					_, _, err = raw.Get(p)
				}
				if err == nil {
					_, _, err = raw.Children(p)
				}
			}
			errs <- err
		}()
	}
	for _, p := range paths {
		work <- p
	}
	close(work)
	for i := 0; i < 64; i++ {
		if err := <-errs; err != nil {
			b.Fatalf("warm-up: %v", err)
		}
	}
}

// makeTree creates root with benchFan children of benchFan children each,
// in transactions of one parent and its children.
func makeTree(b *testing.B, raw *zk.Conn, root string) {
	acl := zk.WorldACL(zk.PermAll)
	data := []byte("0123456789abcdef")
	if _, err := raw.Create(root, data, 0, acl); err != nil {
		b.Fatal(err)
	}
	for i := 0; i < benchFan; i++ {
		p := fmt.Sprintf("%s/p%02d", root, i)
		ops := []any{&zk.CreateRequest{Path: p, Data: data, Acl: acl}}
		for j := 0; j < benchFan; j++ {
			ops = append(ops, &zk.CreateRequest{Path: fmt.Sprintf("%s/c%02d", p, j), Data: data, Acl: acl})
		}
		if _, err := raw.Multi(ops...); err != nil {
			b.Fatal(err)
		}
	}
}

// heapInUse returns the bytes of heap and goroutine stacks in use after a
// collection.
func heapInUse() int64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc + m.StackInuse)
}
