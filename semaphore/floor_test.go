package semaphore_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/internal/testkit/sessiontest"
	"github.com/zkrecipes/zkrecipes/session"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// BenchmarkVsFloor runs the contended workload (8 sessions, 3 leases, hold
// 10 ms) alternately with this package and with the handoff floor: the most
// any semaphore on ZooKeeper can do on this machine and server, whatever its
// protocol. The floor hands a freed slot over with exactly one ZooKeeper
// write (the holder's delete of its node) and one watch notification (to an
// observer session that watches every slot's node), and nothing else: who is
// next is decided by a queue in this process, and each new holder creates
// its node and has it watched during its hold, off the handoff's path. No
// distributed semaphore can be cheaper: a lease freed on the server has to be
// written there, and someone has to learn of it. b.N is the number of
// rounds; each round takes 600 leases with each. x-floor is this package's
// rate over the floor's; floor-x-held is the floor's rate over the ceiling
// that the holds as measured allow (max/hold), the share of the workload's
// ceiling that ZooKeeper leaves to any semaphore here.
func BenchmarkVsFloor(b *testing.B) {
	const sessions, max, hold, per = workSessions, workMax, workHold, workPer
	ns := zktest.NewNamespace(b)
	connect := func() *session.Session {
		return sessiontest.Connect(b, ns, session.WithSessionTimeout(20*time.Second))
	}
	sems := newSems(b, sessions, max, connect)
	var conns []*zk.Conn
	for i := 0; i < sessions; i++ {
		conns = append(conns, connect().Conn())
	}
	obs := connect().Conn()
	dir := ns.Path("/floor")
	if _, err := obs.Create(dir, nil, 0, zk.WorldACL(zk.PermAll)); err != nil && !errors.Is(err, zk.ErrNodeExists) {
		b.Fatal(err)
	}
	ctx := context.Background()
	// Warm up both.
	if _, _, err := contended(ctx, sems, 3*sessions, hold); err != nil {
		b.Fatal(err)
	}
	if _, err := floorContended(conns, obs, dir, max, 3*sessions, hold); err != nil {
		b.Fatal(err)
	}
	var ours, floor time.Duration
	var floorHeld time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		_, peak, err := contended(ctx, sems, per, hold)
		if err != nil {
			b.Fatal(err)
		}
		ours += time.Since(t0)
		if peak > max {
			b.Fatalf("%d leases held at once, maximum %d", peak, max)
		}
		t0 = time.Now()
		res, err := floorContended(conns, obs, dir, max, per, hold)
		if err != nil {
			b.Fatal(err)
		}
		floor += time.Since(t0)
		floorHeld += res.meanHold
		if res.peak > max {
			b.Fatalf("floor: %d slots held at once, maximum %d", res.peak, max)
		}
	}
	b.StopTimer()
	n := float64(b.N * per)
	meanHold := floorHeld / time.Duration(b.N)
	b.ReportMetric(n/ours.Seconds(), "acq/s")
	b.ReportMetric(n/floor.Seconds(), "floor-acq/s")
	b.ReportMetric(floor.Seconds()/ours.Seconds(), "x-floor")
	b.ReportMetric(float64(meanHold.Microseconds())/1000, "hold-ms")
	b.ReportMetric(n/floor.Seconds()/(float64(max)/meanHold.Seconds()), "floor-x-held")
	b.ReportMetric(0, "ns/op")
}

// floorResult is what floorContended measured.
type floorResult struct {
	peak     int           // most slots held at once
	meanHold time.Duration // mean hold as measured (the sleep's overshoot included)
}

// floorContended runs n acquisitions of the handoff floor (see
// BenchmarkVsFloor) over conns, one goroutine each, max slots, each held for
// hold. obs watches the holders' nodes under dir.
func floorContended(conns []*zk.Conn, obs *zk.Conn, dir string, max, n int, hold time.Duration) (floorResult, error) {
	waiters := make(chan chan int, len(conns)) // in FIFO order
	freed := make(chan int, max)               // slots whose node the observer saw deleted
	for s := 0; s < max; s++ {
		freed <- s
	}
	done := make(chan struct{})
	var coord sync.WaitGroup
	coord.Add(1)
	go func() { // the queue: the next waiter takes the next freed slot
		defer coord.Done()
		for {
			var s int
			select {
			case s = <-freed:
			case <-done:
				return
			}
			select {
			case w := <-waiters:
				w <- s
			case <-done:
				return
			}
		}
	}()
	var (
		left, holders, peak, held atomic.Int64
		wg, watchers              sync.WaitGroup
		errs                      = make(chan error, len(conns))
		acl                       = zk.WorldACL(zk.PermAll)
	)
	left.Store(int64(n))
	for _, c := range conns {
		wg.Add(1)
		go func(c *zk.Conn) {
			defer wg.Done()
			slot := make(chan int, 1)
			for left.Add(-1) >= 0 {
				waiters <- slot
				s := <-slot
				h0 := time.Now()
				h := holders.Add(1)
				for p := peak.Load(); h > p && !peak.CompareAndSwap(p, h); p = peak.Load() {
				}
				// During the hold: our node, watched by the observer, whose
				// deletion frees the slot for the next waiter.
				node, err := c.Create(fmt.Sprintf("%s/slot%d-", dir, s), nil, zk.FlagEphemeral|zk.FlagSequence, acl)
				if err != nil {
					errs <- err
					return
				}
				ok, _, ch, err := obs.ExistsW(node)
				if err != nil || !ok {
					errs <- fmt.Errorf("observer on %s: %v (exists %v)", node, err, ok)
					return
				}
				watchers.Add(1)
				go func() {
					defer watchers.Done()
					if ev := <-ch; ev.Type == zk.EventNodeDeleted {
						freed <- s
					}
				}()
				time.Sleep(hold - time.Since(h0)) // the guarded work
				held.Add(int64(time.Since(h0)))
				holders.Add(-1)
				if err := c.Delete(node, -1); err != nil {
					errs <- err
					return
				}
			}
		}(c)
	}
	wg.Wait()
	watchers.Wait()
	close(done)
	coord.Wait()
	close(errs)
	for err := range errs {
		return floorResult{}, err
	}
	return floorResult{peak: int(peak.Load()), meanHold: time.Duration(held.Load() / int64(n))}, nil
}
