package mutex_test

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/internal/testkit/curatortest"
	"github.com/zkrecipes/zkrecipes/internal/testkit/sessiontest"
	"github.com/zkrecipes/zkrecipes/mutex"
	"github.com/zkrecipes/zkrecipes/session"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// Benchmarks print figures; they assert nothing about time. Run e.g.
//
//	go test -run '^$' -bench . -benchtime 2000x ./mutex/
//	go test -run '^$' -bench WaiterFootprint -benchtime 1x ./mutex/

// requests sums tap's request counts (pings excluded).
func requests(tap *zktest.Tap) int64 {
	var n int64
	for _, k := range tap.Requests() {
		n += k
	}
	return n
}

// BenchmarkUncontended: Lock + Release by one session, nobody else; reports
// ZooKeeper requests per cycle (req/op) counted on the wire. The ctx is
// context.Background(), except in the sub-benchmark named ctx=cancelable (a
// ctx with a cancel function, as a request's: its acquire makes a context of
// its own, three allocations more).
func BenchmarkUncontended(b *testing.B) {
	type variant struct {
		name       string
		watch      bool
		cancelable bool
	}
	for _, v := range []variant{{"nodewatch=false", false, false}, {"nodewatch=true", true, false}, {"nodewatch=true,ctx=cancelable", true, true}} {
		watch := v.watch
		b.Run(v.name, func(b *testing.B) {
			ns := zktest.NewNamespace(b)
			tap := zktest.NewTap()
			s := sessiontest.Connect(b, ns, session.WithDialer(tap.Dialer()), session.WithSessionTimeout(20*time.Second))
			m, err := mutex.NewReentrant(s, lockPath, mutex.WithNodeWatch(watch))
			if err != nil {
				b.Fatal(err)
			}
			defer m.Close()
			ctx := context.Background()
			if v.cancelable {
				var cancel context.CancelFunc
				ctx, cancel = context.WithCancel(ctx)
				defer cancel()
			}
			l, err := m.Lock(ctx) // creates the directory
			if err != nil {
				b.Fatal(err)
			}
			l.Release(ctx)
			b.ResetTimer()
			n0 := requests(tap)
			for i := 0; i < b.N; i++ {
				l, err := m.Lock(ctx)
				if err != nil {
					b.Fatal(err)
				}
				if err := l.Release(ctx); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			m.Close() // joins the lease monitors, whose requests count too
			b.ReportMetric(float64(requests(tap)-n0)/float64(b.N), "req/op")
		})
	}
}

// BenchmarkRawCreateDeleteGet: the raw client's create (ephemeral sequential)
// + getData + delete on the same server, sequentially: the reference the
// an uncontended cycle is measured against (3 requests, 3 round trips).
func BenchmarkRawCreateDeleteGet(b *testing.B) {
	ns := zktest.NewNamespace(b)
	c := ns.Conn(b)
	d := ns.Path("raw")
	if _, err := c.Create(d, nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
		b.Fatal(err)
	}
	acl := zk.WorldACL(zk.PermAll)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		p, err := c.Create(d+"/lock-", []byte("x"), zk.FlagEphemeralSequential, acl)
		if err != nil {
			b.Fatal(err)
		}
		if _, _, err := c.Get(p); err != nil {
			b.Fatal(err)
		}
		if err := c.Delete(p, -1); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(3, "req/op")
}

// BenchmarkRawCreateDelete: two writes, the floor for a lock cycle.
func BenchmarkRawCreateDelete(b *testing.B) {
	ns := zktest.NewNamespace(b)
	c := ns.Conn(b)
	d := ns.Path("raw")
	if _, err := c.Create(d, nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
		b.Fatal(err)
	}
	acl := zk.WorldACL(zk.PermAll)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		p, err := c.Create(d+"/lock-", []byte("x"), zk.FlagEphemeralSequential, acl)
		if err != nil {
			b.Fatal(err)
		}
		if err := c.Delete(p, -1); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(2, "req/op")
}

func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	return ds[int(float64(len(ds)-1)*p)]
}

func reportLatency(b *testing.B, ds []time.Duration) {
	b.ReportMetric(float64(percentile(ds, 0.50).Microseconds()), "p50-µs")
	b.ReportMetric(float64(percentile(ds, 0.99).Microseconds()), "p99-µs")
}

// BenchmarkContendedHandoff: 8 sessions lock and unlock in a loop; handoff =
// from the holder's Release call to the next holder's Lock return.
func BenchmarkContendedHandoff(b *testing.B) {
	for _, watch := range []bool{false, true} {
		b.Run(fmt.Sprintf("nodewatch=%v", watch), func(b *testing.B) {
			const sessions = 8
			ns := zktest.NewNamespace(b)
			ctx := context.Background()
			var ms []*mutex.Mutex
			for i := 0; i < sessions; i++ {
				s := sessiontest.Connect(b, ns, session.WithSessionTimeout(20*time.Second))
				m, err := mutex.New(s, lockPath, mutex.WithNodeWatch(watch))
				if err != nil {
					b.Fatal(err)
				}
				defer m.Close()
				ms = append(ms, m)
			}
			var (
				relStart atomic.Int64 // unix nanos of the last Unlock call, 0 if none
				left     atomic.Int64
				mu       sync.Mutex
				hand     []time.Duration
				wg       sync.WaitGroup
			)
			left.Store(int64(b.N))
			b.ResetTimer()
			for _, m := range ms {
				wg.Add(1)
				go func(m *mutex.Mutex) {
					defer wg.Done()
					for left.Add(-1) >= 0 {
						l, err := m.Lock(ctx)
						if err != nil {
							b.Error(err)
							return
						}
						if r := relStart.Swap(0); r != 0 {
							d := time.Duration(time.Now().UnixNano() - r)
							mu.Lock()
							hand = append(hand, d)
							mu.Unlock()
						}
						relStart.Store(time.Now().UnixNano())
						if err := l.Release(ctx); err != nil {
							b.Error(err)
							return
						}
					}
				}(m)
			}
			wg.Wait()
			b.StopTimer()
			reportLatency(b, hand)
		})
	}
}

// BenchmarkRawHandoff: the raw client's floor for a handoff: A deletes a node
// that B watches (GetW); B gets the notification and reads the children.
// Timed from A's delete call to B's children reply.
func BenchmarkRawHandoff(b *testing.B) {
	ns := zktest.NewNamespace(b)
	a, c := ns.Conn(b), ns.Conn(b)
	d := ns.Path("raw")
	acl := zk.WorldACL(zk.PermAll)
	if _, err := a.Create(d, nil, 0, acl); err != nil {
		b.Fatal(err)
	}
	ds := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		p, err := a.Create(d+"/lock-", nil, zk.FlagEphemeralSequential, acl)
		if err != nil {
			b.Fatal(err)
		}
		_, _, ch, err := c.GetW(p)
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		t0 := time.Now()
		if err := a.Delete(p, -1); err != nil {
			b.Fatal(err)
		}
		<-ch
		if _, _, err := c.Children(d); err != nil {
			b.Fatal(err)
		}
		ds = append(ds, time.Since(t0))
	}
	b.StopTimer()
	reportLatency(b, ds)
}

func atoi(s string) int {
	n := 0
	for _, c := range s {
		if c < '0' || c > '9' {
			break
		}
		n = n*10 + int(c-'0')
	}
	return n
}

// BenchmarkUncontendedVsRaw interleaves, in every iteration, one Lock+Release
// cycle, one raw create+getData+delete and one raw create+delete (same
// server, each client its own session), so that machine noise hits all
// alike; it reports the mean of each and the ratios.
func BenchmarkUncontendedVsRaw(b *testing.B) {
	for _, watch := range []bool{false, true} {
		b.Run(fmt.Sprintf("nodewatch=%v", watch), func(b *testing.B) {
			ns := zktest.NewNamespace(b)
			s := sessiontest.Connect(b, ns, session.WithSessionTimeout(20*time.Second))
			m, err := mutex.NewReentrant(s, lockPath, mutex.WithNodeWatch(watch))
			if err != nil {
				b.Fatal(err)
			}
			defer m.Close()
			c := ns.Conn(b)
			d := ns.Path("raw")
			acl := zk.WorldACL(zk.PermAll)
			if _, err := c.Create(d, nil, 0, acl); err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			var ours, raw3, raw2 time.Duration
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				t0 := time.Now()
				l, err := m.Lock(ctx)
				if err != nil {
					b.Fatal(err)
				}
				if err := l.Release(ctx); err != nil {
					b.Fatal(err)
				}
				t1 := time.Now()
				p, err := c.Create(d+"/lock-", []byte("x"), zk.FlagEphemeralSequential, acl)
				if err != nil {
					b.Fatal(err)
				}
				if _, _, err := c.Get(p); err != nil {
					b.Fatal(err)
				}
				if err := c.Delete(p, -1); err != nil {
					b.Fatal(err)
				}
				t2 := time.Now()
				p, err = c.Create(d+"/lock-", []byte("x"), zk.FlagEphemeralSequential, acl)
				if err != nil {
					b.Fatal(err)
				}
				if err := c.Delete(p, -1); err != nil {
					b.Fatal(err)
				}
				t3 := time.Now()
				ours += t1.Sub(t0)
				raw3 += t2.Sub(t1)
				raw2 += t3.Sub(t2)
			}
			b.StopTimer()
			n := float64(b.N)
			b.ReportMetric(float64(ours.Microseconds())/n, "lock-µs")
			b.ReportMetric(float64(raw3.Microseconds())/n, "raw-create+get+delete-µs")
			b.ReportMetric(float64(raw2.Microseconds())/n, "raw-create+delete-µs")
			b.ReportMetric(float64(ours)/float64(raw3), "x-raw3")
			b.ReportMetric(float64(ours)/float64(raw2), "x-raw2")
		})
	}
}

// contend runs n lock/unlock cycles spread over the lockers (one goroutine
// each) and returns the handoff times: from a holder's unlock call to the
// next holder's lock return.
func contend(n int, lock []func() (func() error, error)) ([]time.Duration, error) {
	var (
		relStart atomic.Int64
		left     atomic.Int64
		mu       sync.Mutex
		hand     []time.Duration
		wg       sync.WaitGroup
		errMu    sync.Mutex
		first    error
	)
	left.Store(int64(n))
	for _, lk := range lock {
		wg.Add(1)
		go func(lk func() (func() error, error)) {
			defer wg.Done()
			fail := func(err error) {
				errMu.Lock()
				if first == nil {
					first = err
				}
				errMu.Unlock()
			}
			for left.Add(-1) >= 0 {
				unlock, err := lk()
				if err != nil {
					fail(err)
					return
				}
				if r := relStart.Swap(0); r != 0 {
					d := time.Duration(time.Now().UnixNano() - r)
					mu.Lock()
					hand = append(hand, d)
					mu.Unlock()
				}
				relStart.Store(time.Now().UnixNano())
				if err := unlock(); err != nil {
					fail(err)
					return
				}
			}
		}(lk)
	}
	wg.Wait()
	return hand, first
}

// BenchmarkHandoffVsRaw alternates rounds of 200 contended cycles (8, then
// 2 sessions) with this package's NonReentrant and with a minimal raw-client
// lock on the same server, plus rounds of the raw floor (one client deletes
// a node another watches; that one reads the children), so that machine
// noise and JIT warm-up hit all alike. b.N is the number of rounds of each.
func BenchmarkHandoffVsRaw(b *testing.B) {
	for _, sessions := range []int{8, 2} {
		for _, watch := range []bool{false, true} {
			b.Run(fmt.Sprintf("sessions=%d/nodewatch=%v", sessions, watch), func(b *testing.B) {
				benchHandoffVsRaw(b, sessions, watch)
			})
		}
	}
}

// benchHandoffVsRaw is BenchmarkHandoffVsRaw for one setting. With two
// sessions every waiter is second in line, where the engine takes over on the
// deletion notice alone when the node watch is on (no children read).
func benchHandoffVsRaw(b *testing.B, sessions int, watch bool) {
	{
		{
			const cycles = 200
			ns := zktest.NewNamespace(b)
			ctx := context.Background()
			acl := zk.WorldACL(zk.PermAll)
			d := ns.Path("raw")
			var ours, raws []func() (func() error, error)
			var conns []*zk.Conn
			for i := 0; i < sessions; i++ {
				s := sessiontest.Connect(b, ns, session.WithSessionTimeout(20*time.Second))
				m, err := mutex.New(s, lockPath, mutex.WithNodeWatch(watch))
				if err != nil {
					b.Fatal(err)
				}
				defer m.Close()
				ours = append(ours, func() (func() error, error) {
					l, err := m.Lock(ctx)
					if err != nil {
						return nil, err
					}
					return func() error { return l.Release(ctx) }, nil
				})
				c := ns.Conn(b)
				conns = append(conns, c)
				raws = append(raws, func() (func() error, error) {
					p, err := rawLock(c, d)
					if err != nil {
						return nil, err
					}
					return func() error { return c.Delete(p, -1) }, nil
				})
			}
			if _, err := conns[0].Create(d, nil, 0, acl); err != nil {
				b.Fatal(err)
			}
			var oursD, rawD, floorD []time.Duration
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				h, err := contend(cycles, ours)
				if err != nil {
					b.Fatal(err)
				}
				oursD = append(oursD, h...)
				h, err = contend(cycles, raws)
				if err != nil {
					b.Fatal(err)
				}
				rawD = append(rawD, h...)
				for j := 0; j < cycles/4; j++ {
					p, err := conns[0].Create(d+"/floor-", nil, zk.FlagEphemeralSequential, acl)
					if err != nil {
						b.Fatal(err)
					}
					_, _, ch, err := conns[1].GetW(p)
					if err != nil {
						b.Fatal(err)
					}
					t0 := time.Now()
					if err := conns[0].Delete(p, -1); err != nil {
						b.Fatal(err)
					}
					<-ch
					if _, _, err := conns[1].Children(d); err != nil {
						b.Fatal(err)
					}
					floorD = append(floorD, time.Since(t0))
				}
			}
			b.StopTimer()
			po, pr, pf := percentile(oursD, 0.5), percentile(rawD, 0.5), percentile(floorD, 0.5)
			b.ReportMetric(float64(po.Microseconds()), "p50-µs")
			b.ReportMetric(float64(percentile(oursD, 0.99).Microseconds()), "p99-µs")
			b.ReportMetric(float64(pr.Microseconds()), "raw-lock-p50-µs")
			b.ReportMetric(float64(pf.Microseconds()), "delete+children-p50-µs")
			b.ReportMetric(float64(po)/float64(pr), "x-raw-lock")
			b.ReportMetric(float64(po)/float64(pf), "x-delete+children")
		}
	}
}

// rawLock is a minimal fair lock with the raw client (no error recovery).
func rawLock(c *zk.Conn, d string) (string, error) {
	p, err := c.Create(d+"/lock-", nil, zk.FlagEphemeralSequential, zk.WorldACL(zk.PermAll))
	if err != nil {
		return "", err
	}
	me := p[len(d)+1:]
	for {
		kids, _, err := c.Children(d)
		if err != nil {
			return "", err
		}
		var locks []string
		for _, k := range kids {
			if len(k) == len(me) && k[:5] == "lock-" {
				locks = append(locks, k)
			}
		}
		sort.Strings(locks) // same-length names: sequence order
		i := sort.SearchStrings(locks, me)
		if i == 0 {
			return p, nil
		}
		_, _, ch, err := c.GetW(d + "/" + locks[i-1])
		if errors.Is(err, zk.ErrNoNode) {
			continue
		}
		if err != nil {
			return "", err
		}
		<-ch
	}
}

// BenchmarkUncontendedVsCurator: Lock + Release of a free lock, the default
// mutex.New on one session against Curator 5.4's InterProcessMutex on one
// client (after a warm-up of each, the JIT's included), on the same server,
// in alternating runs of 300 cycles each so that the machine's noise hits
// both alike. It reports both rates (total cycles over total time of each
// side), their ratio, and the median of the per-run ratios. A third side in the same alternation is the floor of
// any lock through go-zookeeper: its bare create and delete of an ephemeral
// sequential node, two round trips, nothing else. Run with -benchtime 9x or
// so.
func BenchmarkUncontendedVsCurator(b *testing.B) {
	const cycles = 300
	ns := zktest.NewNamespace(b)
	java := curatortest.StartMutex(b, ns.Servers(), ns.Path("/curator"))
	raw := ns.Conn(b)
	rawDir := ns.Path("/raw")
	acl := zk.WorldACL(zk.PermAll)
	if _, err := raw.Create(rawDir, nil, 0, acl); err != nil {
		b.Fatal(err)
	}
	floorRun := func(n int) time.Duration {
		t0 := time.Now()
		for i := 0; i < n; i++ {
			p, err := raw.Create(rawDir+"/lock-", nil, zk.FlagEphemeralSequential, acl)
			if err != nil {
				b.Fatal(err)
			}
			if err := raw.Delete(p, -1); err != nil {
				b.Fatal(err)
			}
		}
		return time.Since(t0)
	}
	s := sessiontest.Connect(b, ns, session.WithSessionTimeout(20*time.Second))
	m, err := mutex.New(s, lockPath)
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	ctx := context.Background()
	goRun := func(n int) time.Duration {
		t0 := time.Now()
		for i := 0; i < n; i++ {
			l, err := m.Lock(ctx)
			if err != nil {
				b.Fatal(err)
			}
			if err := l.Release(ctx); err != nil {
				b.Fatal(err)
			}
		}
		return time.Since(t0)
	}
	if _, err := java.Bench(ctx, 2000); err != nil { // JIT warm-up
		b.Fatal(err)
	}
	goRun(cycles)
	floorRun(cycles)
	var goTime, javaTime, floorTime time.Duration
	var ratios []float64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		g := goRun(cycles)
		j, err := java.Bench(ctx, cycles)
		if err != nil {
			b.Fatal(err)
		}
		f := floorRun(cycles)
		goTime, javaTime, floorTime = goTime+g, javaTime+j, floorTime+f
		ratios = append(ratios, j.Seconds()/g.Seconds())
	}
	b.StopTimer()
	sort.Float64s(ratios)
	rate := func(d time.Duration) float64 { return float64(b.N*cycles) / d.Seconds() }
	b.ReportMetric(rate(goTime), "go-ops/s")
	b.ReportMetric(rate(javaTime), "curator-ops/s")
	b.ReportMetric(rate(floorTime), "floor-ops/s")
	b.ReportMetric(rate(goTime)/rate(javaTime), "x-curator")
	b.ReportMetric(ratios[len(ratios)/2], "x-curator-median")
	b.ReportMetric(rate(floorTime)/rate(javaTime), "floor-x-curator")
	b.ReportMetric(0, "ns/op")
}
