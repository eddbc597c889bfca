package rwlock_test

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/internal/testkit/sessiontest"
	"github.com/zkrecipes/zkrecipes/recipes"
	"github.com/zkrecipes/zkrecipes/rwlock"
	"github.com/zkrecipes/zkrecipes/session"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// TestKazoo649: the sequence that deadlocks Kazoo 2.8's read-write lock
// (python-kazoo #649): W1 holds, R queues, W2 queues, W1 releases. R must
// get the lock (it waits for W1, never for W2 behind it), W2 only after R
// unlocks.
func TestKazoo649(t *testing.T) {
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			ns := zktest.NewNamespace(t)
			raw := ns.Conn(t)
			ctx := ctxT(t)
			w1 := k.make(t, connect(t, ns), rwlock.WithID("W1"))
			rs, _, rrd := connectReads(t, ns)
			r := k.make(t, rs, rwlock.WithID("R"))
			w2s, _, w2rd := connectReads(t, ns)
			w2 := k.make(t, w2s, rwlock.WithID("W2"))

			var clock atomic.Int64
			a1 := lockAsync(t, ctx, w1, Write, &clock)
			a1.held(t)
			ar := lockAsync(t, ctx, r, Read, &clock)
			waitWaiting(t, ctx, r, rrd, 2, func(p recipes.Participant) bool { return p.ID == "R" })
			a2 := lockAsync(t, ctx, w2, Write, &clock)
			ps := waitWaiting(t, ctx, w2, w2rd, 3, func(p recipes.Participant) bool { return p.ID == "W2" })
			if ps[0].ID != "W1" || ps[1].ID != "R" || ps[2].ID != "W2" {
				t.Fatalf("queue %+v, want W1 R W2", ps)
			}
			ar.pending(t, "R behind W1")
			a2.pending(t, "W2 behind W1 and R")

			u1 := a1.unlock(t)
			gr := ar.held(t)
			if gr.n < u1 {
				t.Fatalf("R acquired (#%d) before W1 unlocked (#%d)", gr.n, u1)
			}
			a2.pending(t, "W2 behind R") // W2 decided to wait when it read R's node
			ps, err := w2.Participants(ctx)
			if err != nil || len(ps) != 2 || ps[0].ID != "R" || !ps[0].Holds || ps[1].ID != "W2" || ps[1].Holds {
				t.Fatalf("after W1's release: %+v, %v", ps, err)
			}
			ur := ar.unlock(t)
			g2 := a2.held(t)
			if g2.n < ur {
				t.Fatalf("W2 acquired (#%d) before R unlocked (#%d)", g2.n, ur)
			}
			a2.unlock(t)
			waitEmpty(t, raw, ns)
		})
	}
}

// TestWritersNotStarved: a writer queued behind a reader is not overtaken
// by readers that arrive after it. Four sessions read in a loop while
// writers queue among them: every read whose node sorts after a writer's
// is granted only after that writer unlocked, and every writer gets the
// lock while the readers keep coming.
func TestWritersNotStarved(t *testing.T) {
	const readers, writes = 4, 5
	ns := zktest.NewNamespace(t)
	ctx := ctxT(t)
	first := newRWMutex(t, connect(t, ns))
	ws, _, wrd := connectReads(t, ns)
	w := newRWMutex(t, ws, rwlock.WithID("writer"))
	var clock atomic.Int64

	// One reader holds, the writer queues behind it, then the stream starts.
	held, err := first.RLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	wa := lockAsync(t, ctx, w, Write, &clock)
	waitWaiting(t, ctx, w, wrd, 2, func(p recipes.Participant) bool { return p.ID == "writer" })

	type grant struct {
		seq      int64
		at, rel  int64 // stamps: granted, about to unlock
		acquired time.Time
	}
	var mu sync.Mutex
	var grants []grant
	stop := make(chan struct{})
	var stopOnce sync.Once
	stopReaders := func() { stopOnce.Do(func() { close(stop) }) }
	errs := make(chan error, readers)
	var wg sync.WaitGroup
	for i := 0; i < readers; i++ {
		r := newRWMutex(t, connect(t, ns), rwlock.WithID(fmt.Sprintf("reader-%d", i)))
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- func() error {
				for {
					select {
					case <-stop:
						return nil
					default:
					}
					l, err := r.RLock(ctx)
					if err != nil {
						return err
					}
					g := grant{seq: seqOf(l.Node()), at: clock.Add(1), acquired: time.Now()}
					// Work that takes a round trip under the read lock.
					if _, err := r.Participants(ctx); err != nil {
						return err
					}
					g.rel = clock.Add(1)
					mu.Lock()
					grants = append(grants, g)
					mu.Unlock()
					if err := l.Release(ctx); err != nil {
						return err
					}
				}
			}()
		}()
	}
	defer func() {
		stopReaders()
		wg.Wait()
	}()

	// The stream's first reads queue behind the writer: none is granted
	// before the writer, which is granted once the first reader unlocks.
	raw := ns.Conn(t)
	waitNodes(t, raw, ns, 2+readers)
	u := clock.Add(1)
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	type wgrant struct {
		seq           int64
		at, released  int64
		queuedAt, got time.Time
	}
	var wgrants []wgrant
	r0 := wa.held(t)
	wgrants = append(wgrants, wgrant{seq: seqOf(r0.l.Node()), at: r0.n, released: wa.unlock(t)})
	if r0.n < u {
		t.Fatalf("writer granted (#%d) before the first reader unlocked (#%d)", r0.n, u)
	}
	// More writers queue while the readers keep coming; each must get in.
	for i := 1; i < writes; i++ {
		queued := time.Now()
		a := lockAsync(t, ctx, w, Write, &clock)
		r := sessiontest.Recv(t, a.res, wait, fmt.Sprintf("write %d among a stream of readers", i))
		if r.err != nil {
			t.Fatal(r.err)
		}
		wgrants = append(wgrants, wgrant{seq: seqOf(r.l.Node()), at: r.n, released: a.unlock(t), queuedAt: queued, got: r.at})
	}
	stopReaders()
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	// No read whose node sorts after a writer's was granted before that
	// writer released: readers never overtake a queued writer.
	overtaken := 0
	for _, wg := range wgrants {
		for _, g := range grants {
			if g.seq > wg.seq && g.at < wg.released {
				overtaken++
			}
		}
	}
	if overtaken > 0 {
		t.Fatalf("%d reads overtook a queued writer", overtaken)
	}
	var waits []time.Duration
	for _, wg := range wgrants[1:] {
		waits = append(waits, wg.got.Sub(wg.queuedAt))
	}
	sort.Slice(waits, func(i, j int) bool { return waits[i] < waits[j] })
	t.Logf("%d reads by %d looping readers, %d writes among them; no read overtook a writer; writer waits %v", len(grants), readers, len(wgrants), waits)
	if len(grants) < readers {
		t.Fatalf("only %d reads: the readers did not run", len(grants))
	}
}

// TestReadersInParallel: readers of several sessions hold the read lock at
// the same time: each keeps its lease until all of them hold theirs. Then
// the measured overlap: sessions read in a loop (each read does one round
// trip under the lock); the summed length of the read intervals over the
// length of their union shows how many reads ran at once on average.
func TestReadersInParallel(t *testing.T) {
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			const n = 4
			ns := zktest.NewNamespace(t)
			ctx := ctxT(t)
			var lks []locker
			for i := 0; i < n; i++ {
				lks = append(lks, k.make(t, connect(t, ns)))
			}
			// All hold together: nobody unlocks before everybody holds.
			var all sync.WaitGroup
			all.Add(n)
			allHeld := make(chan struct{})
			go func() { all.Wait(); close(allHeld) }()
			errs := make(chan error, n)
			for _, lk := range lks {
				go func() {
					errs <- func() error {
						l, err := lk.RLock(ctx)
						if err != nil {
							all.Done()
							return err
						}
						all.Done()
						select {
						case <-allHeld:
						case <-ctx.Done():
							return fmt.Errorf("not every reader got the lock: %w", ctx.Err())
						}
						if err := l.Err(); err != nil {
							return err
						}
						return l.Release(ctx)
					}()
				}()
			}
			for i := 0; i < n; i++ {
				if err := sessiontest.Recv(t, errs, wait, "reader"); err != nil {
					t.Fatal(err)
				}
			}

			// Measured overlap.
			const cycles = 25
			var mu sync.Mutex
			var iv [][2]time.Time
			for _, lk := range lks {
				go func() {
					errs <- func() error {
						for i := 0; i < cycles; i++ {
							l, err := lk.RLock(ctx)
							if err != nil {
								return err
							}
							t0 := time.Now()
							if _, err := lk.Participants(ctx); err != nil { // one round trip of work
								return err
							}
							t1 := time.Now()
							mu.Lock()
							iv = append(iv, [2]time.Time{t0, t1})
							mu.Unlock()
							if err := l.Release(ctx); err != nil {
								return err
							}
						}
						return nil
					}()
				}()
			}
			for i := 0; i < n; i++ {
				if err := sessiontest.Recv(t, errs, time.Minute, "reader loop"); err != nil {
					t.Fatal(err)
				}
			}
			ratio := overlap(iv)
			t.Logf("%d readers x %d reads: read intervals overlap %.2fx (sum of intervals / their union)", n, cycles, ratio)
			if ratio < 1.2 {
				t.Fatalf("read intervals overlap only %.2fx: readers seem serialised", ratio)
			}
		})
	}
}

// overlap returns the summed length of the intervals over the length of
// their union.
func overlap(iv [][2]time.Time) float64 {
	if len(iv) == 0 {
		return 0
	}
	sort.Slice(iv, func(i, j int) bool { return iv[i][0].Before(iv[j][0]) })
	var sum, union time.Duration
	cur := iv[0]
	for _, x := range iv {
		sum += x[1].Sub(x[0])
		if x[0].After(cur[1]) {
			union += cur[1].Sub(cur[0])
			cur = x
		} else if x[1].After(cur[1]) {
			cur[1] = x[1]
		}
	}
	union += cur[1].Sub(cur[0])
	if union <= 0 {
		return 0
	}
	return float64(sum) / float64(union)
}

// TestNoReaderDuringWrite: 6 sessions (both kinds, 3 each) run mixed cycles
// on one counter znode, 1 in 3 cycles a write. A writer marks the counter
// "being written" before it writes the new value, and every reader checks
// that it never sees the mark; in the process, readers and writers count
// themselves in and out under the lease, and nobody may see a writer beside
// anyone. The counter is written without a version check, so it is exact
// only if writers exclude each other.
func TestNoReaderDuringWrite(t *testing.T) {
	const sessions, cycles = 6, 30
	ns := zktest.NewNamespace(t)
	raw := ns.Conn(t)
	counter := ns.Path("counter")
	if _, err := raw.Create(counter, []byte("0"), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t)
	var activeR, activeW atomic.Int32
	var reads, writesDone atomic.Int32
	errs := make(chan error, sessions)
	var wg sync.WaitGroup
	for i := 0; i < sessions; i++ {
		s := connect(t, ns)
		lk := kinds[i%2].make(t, s, rwlock.WithID(fmt.Sprintf("s%d", i)))
		wg.Add(1)
		go func(i int, s *session.Session) {
			defer wg.Done()
			errs <- mixedCycles(ctx, s.Conn(), lk, counter, i, cycles, &activeR, &activeW, &reads, &writesDone)
		}(i, s)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	data, _, err := raw.Get(counter)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(data), strconv.Itoa(int(writesDone.Load())); got != want {
		t.Fatalf("counter = %s, want %s: writes were lost", got, want)
	}
	waitEmpty(t, raw, ns)
	t.Logf("%d writes, %d reads; the counter is exact and no reader saw a write in progress", writesDone.Load(), reads.Load())
}

// mixedCycles runs n cycles of client c: cycle j writes iff (j+c)%3 == 0.
func mixedCycles(ctx context.Context, conn *zk.Conn, lk locker, counter string, c, n int, activeR, activeW, reads, writes *atomic.Int32) error {
	for j := 0; j < n; j++ {
		if (j+c)%3 == 0 {
			wl, err := lk.Lock(ctx)
			if err != nil {
				return fmt.Errorf("client %d cycle %d: Lock: %w", c, j, err)
			}
			if w := activeW.Add(1); w != 1 || activeR.Load() != 0 {
				return fmt.Errorf("client %d: writer granted beside %d writers and %d readers", c, w-1, activeR.Load())
			}
			data, _, err := conn.Get(counter)
			if err != nil {
				return err
			}
			v, err := strconv.Atoi(string(data))
			if err != nil {
				return fmt.Errorf("counter %q: %w", data, err)
			}
			if _, err := conn.Set(counter, []byte("writing"), -1); err != nil {
				return err
			}
			if _, err := conn.Set(counter, []byte(strconv.Itoa(v+1)), -1); err != nil {
				return err
			}
			if err := wl.Err(); err != nil {
				return fmt.Errorf("write lease ended while held: %w", err)
			}
			writes.Add(1)
			activeW.Add(-1)
			if err := wl.Release(ctx); err != nil {
				return err
			}
			continue
		}
		l, err := lk.RLock(ctx)
		if err != nil {
			return fmt.Errorf("client %d cycle %d: RLock: %w", c, j, err)
		}
		activeR.Add(1)
		if w := activeW.Load(); w != 0 {
			return fmt.Errorf("client %d: reader granted beside %d writers", c, w)
		}
		data, _, err := conn.Get(counter)
		if err != nil {
			return err
		}
		if _, err := strconv.Atoi(string(data)); err != nil {
			return fmt.Errorf("client %d: a reader saw the counter %q: a write in progress", c, data)
		}
		if err := l.Err(); err != nil {
			return fmt.Errorf("read lease ended while held: %w", err)
		}
		reads.Add(1)
		activeR.Add(-1)
		if err := l.Release(ctx); err != nil {
			return err
		}
	}
	return nil
}
