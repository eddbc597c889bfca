package main

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zkrecipes/zkrecipes/examples/internal/demo"
	"github.com/zkrecipes/zkrecipes/rwlock"
	"github.com/zkrecipes/zkrecipes/session"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// writes reports whether cycle k of client c writes: (k+3c) mod 5 == 0, 20 %
// of the cycles, spread so that clients write in different cycles.
func writes(k, c int) bool { return (k+3*c)%5 == 0 }

// runLoad runs the mixed workload and prints its figures.
func runLoad(ctx context.Context, env *demo.Env) error {
	out := env.Out
	if *nClients < 1 || *cycles < 1 {
		return fmt.Errorf("need positive -clients and -cycles")
	}
	path := *root + "/load"
	tap := zktest.NewTap()
	var lks []*rwlock.RWMutex
	var sessions []*session.Session
	defer func() {
		for _, lk := range lks {
			_ = lk.Close()
		}
		for _, s := range sessions {
			_ = s.Close()
		}
	}()
	for i := 0; i < *nClients; i++ {
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		s, err := session.Connect(cctx, env.Servers,
			session.WithSessionTimeout(max(*sessionTimeout, 10*time.Second)),
			session.WithDialer(tap.Dialer()),
			session.WithLogger(env.Logger.Named(fmt.Sprintf("load-%d", i))))
		cancel()
		if err != nil {
			return err
		}
		sessions = append(sessions, s)
		lk, err := rwlock.New(s, path, rwlock.WithID(fmt.Sprintf("load-%d", i)), rwlock.WithNodeWatch(*nodeWatch))
		if err != nil {
			return err
		}
		lks = append(lks, lk)
	}
	out.Printf("--- load: %d sessions, %d cycles each, 20 %% writes (client c's cycle k writes iff (k+3c) mod 5 == 0), empty critical sections ---", *nClients, *cycles)
	if _, err := mixedLoad(ctx, lks, 5); err != nil { // warm-up: the directory exists, connections are hot
		return err
	}
	req0 := tap.Requests()
	notes0, _ := tap.Notifications()
	start := time.Now()
	res, err := mixedLoad(ctx, lks, *cycles)
	elapsed := time.Since(start)
	if err != nil {
		return err
	}
	for _, lk := range lks {
		_ = lk.Close() // joins the lease goroutines, whose requests count too
	}
	notes, nerr := tap.Notifications()
	ops := len(res.reads) + len(res.writes)
	out.Printf("%d cycles in %s: %.0f cycles/s; never a writer beside anyone", ops, demo.Ms(elapsed), float64(ops)/elapsed.Seconds())
	rows := [][]string{{"side", "cycles", "acquire p50", "acquire p99"}}
	for _, side := range []struct {
		name string
		ds   []time.Duration
	}{{"read", res.reads}, {"write", res.writes}} {
		s := sortDurations(side.ds)
		rows = append(rows, []string{side.name, fmt.Sprint(len(s)), demo.Ms(percentile(s, 0.5)), demo.Ms(percentile(s, 0.99))})
	}
	table(out, rows)
	var total int64
	var per []string
	after := tap.Requests()
	ops32 := make([]int32, 0, len(after))
	for op := range after {
		ops32 = append(ops32, op)
	}
	sort.Slice(ops32, func(i, j int) bool { return after[ops32[i]]-req0[ops32[i]] > after[ops32[j]]-req0[ops32[j]] })
	for _, op := range ops32 {
		if d := after[op] - req0[op]; d > 0 {
			total += d
			per = append(per, fmt.Sprintf("%s %.2f", zktest.OpName(op), float64(d)/float64(ops)))
		}
	}
	out.Printf("ZooKeeper requests per cycle: %.2f (%s)", float64(total)/float64(ops), strings.Join(per, ", "))
	if nerr == nil {
		out.Printf("watch notifications per cycle: %.2f", float64(len(notes)-len(notes0))/float64(ops))
	}
	out.Printf("(acquire: from the RLock or Lock call to its return; a cycle is an acquire and its Release;")
	out.Printf(" requests and notifications are counted on the clients' side of the wire, pings excluded)")
	return nil
}

type loadResult struct {
	reads, writes []time.Duration
}

// mixedLoad runs n cycles on each lock, one goroutine each, and checks every
// grant against the others: a writer must hold alone.
func mixedLoad(ctx context.Context, lks []*rwlock.RWMutex, n int) (loadResult, error) {
	var (
		mu               sync.Mutex
		res              loadResult
		first            error
		wg               sync.WaitGroup
		activeR, activeW atomic.Int32
	)
	for c, lk := range lks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var rs, ws []time.Duration
			err := func() error {
				for k := 0; k < n; k++ {
					w := writes(k, c)
					t0 := time.Now()
					if w {
						l, err := lk.Lock(ctx)
						if err != nil {
							return err
						}
						ws = append(ws, time.Since(t0))
						if activeW.Add(1) != 1 || activeR.Load() != 0 {
							return fmt.Errorf("client %d: a writer was granted beside others", c)
						}
						activeW.Add(-1)
						if err := l.Release(ctx); err != nil {
							return err
						}
						continue
					}
					l, err := lk.RLock(ctx)
					if err != nil {
						return err
					}
					rs = append(rs, time.Since(t0))
					activeR.Add(1)
					if activeW.Load() != 0 {
						return fmt.Errorf("client %d: a reader was granted beside a writer", c)
					}
					activeR.Add(-1)
					if err := l.Release(ctx); err != nil {
						return err
					}
				}
				return nil
			}()
			mu.Lock()
			res.reads = append(res.reads, rs...)
			res.writes = append(res.writes, ws...)
			if err != nil && first == nil {
				first = err
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	return res, first
}

func sortDurations(ds []time.Duration) []time.Duration {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s
}

// percentile returns the q-quantile (0 < q <= 1) of sorted ds, nearest rank.
func percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

// table prints rows with columns padded to the widest cell; the first row is
// the header.
func table(out *demo.Printer, rows [][]string) {
	var widths []int
	for _, r := range rows {
		for i, c := range r {
			if i >= len(widths) {
				widths = append(widths, 0)
			}
			widths[i] = max(widths[i], len([]rune(c)))
		}
	}
	for _, r := range rows {
		var sb strings.Builder
		sb.WriteString("    ")
		for i, c := range r {
			pad := strings.Repeat(" ", widths[i]-len([]rune(c)))
			if i == 0 {
				sb.WriteString(c + pad)
			} else {
				sb.WriteString(pad + c)
			}
			if i < len(r)-1 {
				sb.WriteString("  ")
			}
		}
		out.Plain("%s", sb.String())
	}
}
