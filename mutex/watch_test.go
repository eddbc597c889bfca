package mutex_test

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"

	"github.com/zkrecipes/zkrecipes/mutex"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// watchCounters reads the server's fired-watcher counters: the sums of the
// node_deleted (and other) watch-count summaries (one per watcher notified)
// and the number of events that notified anyone.
func watchCounters(t testing.TB, addr string) (fired, events int64) {
	t.Helper()
	m, err := zktest.Mntr(context.Background(), addr)
	if err != nil {
		t.Fatal(err)
	}
	for _, kind := range []string{"created", "deleted", "changed", "children"} {
		s, _ := strconv.ParseFloat(m["zk_sum_node_"+kind+"_watch_count"], 64)
		c, _ := strconv.ParseFloat(m["zk_cnt_node_"+kind+"_watch_count"], 64)
		fired += int64(s)
		events += int64(c)
	}
	return fired, events
}

// TestWatchesPerRelease: 100 waiters queue on one lock; each unlocks as soon
// as it holds. Every release must notify exactly one waiter (its successor);
// with the node watch (default) the releasing holder's own watch fires too.
// The waiters are spread over 10 sessions so that neighbours in the queue
// never share a connection (the server keeps one watcher per connection and
// path).
func TestWatchesPerRelease(t *testing.T) {
	for _, watch := range []bool{false, true} {
		t.Run(fmt.Sprintf("nodewatch=%v", watch), func(t *testing.T) {
			const waiters, sessions = 100, 10
			ns := zktest.NewNamespace(t)
			raw := ns.Conn(t)
			ctx := ctxT(t)
			opt := mutex.WithNodeWatch(watch)
			holder := newMutex(t, connect(t, ns), opt)
			var ms []*mutex.Mutex
			for i := 0; i < sessions; i++ {
				ms = append(ms, newMutex(t, connect(t, ns), opt))
			}
			hl, err := holder.Lock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			errs := make(chan error, waiters)
			var wg sync.WaitGroup
			for i := 0; i < waiters; i++ {
				m := ms[i%sessions]
				wg.Add(1)
				go func() {
					defer wg.Done()
					l, err := m.Lock(ctx)
					if err == nil {
						err = l.Unlock(ctx)
					}
					errs <- err
				}()
				waitKids(t, raw, ns, i+2) // queue order = start order
			}
			fired0, events0 := watchCounters(t, ns.Server.Addr())
			if err := hl.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				if err != nil {
					t.Fatal(err)
				}
			}
			// The holders' own watches fire when they delete their nodes;
			// wait until the counters are stable (the last delete's).
			want := int64(waiters)
			if watch {
				want = 2*waiters + 1 // successor watches + every holder's own
			}
			var fired, events int64
			zktest.Eventually(t, wait, func() bool {
				f, e := watchCounters(t, ns.Server.Addr())
				fired, events = f-fired0, e-events0
				return fired >= want
			}, "fired watchers %d, want %d", fired, want)
			releases := waiters + 1
			t.Logf("nodewatch=%v: %d releases, %d handoffs: %d watchers notified (%.2f per handoff, %.2f per release), %d events",
				watch, releases, waiters, fired, float64(fired)/waiters, float64(fired)/float64(releases), events)
			if fired != want {
				t.Fatalf("fired watchers %d, want exactly %d", fired, want)
			}
			if k := lockKids(t, raw, ns); len(k) != 0 {
				t.Fatalf("nodes left: %q", k)
			}
		})
	}
}
