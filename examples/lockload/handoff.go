package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/mutex"
)

// handoffRun is one contended run: the times of every hold, in order.
type handoffRun struct {
	mu      sync.Mutex
	acq     []time.Time // Lock returned
	unlCall []time.Time // Unlock called
	unlRet  []time.Time // Unlock returned
	who     []int
}

// (b) contended handoff between sessions.
func (b *bench) handoff(ctx context.Context) error {
	b.out.Printf("(b) contended: %d sessions, one goroutine each looping Lock+Unlock for %v (node watch on, then off)", *nSessions, *handoffTime)
	b.legend("b")
	ctr := newCounter()
	sessions, err := b.sessions(ctx, "contended", *nSessions, ctr)
	if err != nil {
		return err
	}
	conn, err := b.raw(ctx, nil)
	if err != nil {
		return err
	}
	// Raw baseline: delete + getChildren on one connection, as a handoff
	// costs at least a delete (the holder's) and a children read (the
	// waiter's). Measured before and after the mutex runs, pooled.
	rawDir := *root + "/raw-contended"
	if err := b.rawDir(conn, rawDir); err != nil {
		return err
	}
	var raw rawSamples
	if err := raw.measure(conn, rawDir, *handoffTime/4); err != nil {
		return err
	}
	type p50 struct {
		label string
		d     time.Duration
	}
	var p50s []p50
	rows := [][]string{{"handoff", "holds/s", "p50 µs", "p90 µs", "p99 µs", "max µs", "req/hold", "what"}}
	for _, watch := range []bool{true, false} {
		ms := make([]*mutex.Reentrant, len(sessions))
		for i, s := range sessions {
			ms[i], err = mutex.NewReentrant(s, fmt.Sprintf("%s/contended-%v", *root, watch), mutex.WithNodeWatch(watch), mutex.WithID(fmt.Sprintf("s%d", i)))
			if err != nil {
				return err
			}
			defer ms[i].Close()
		}
		before := ctr.snapshot()
		hr, elapsed, err := contend(ctx, ms, *handoffTime)
		if err != nil {
			return err
		}
		ops := ctr.snapshot().minus(before)
		fromRet, fromCall, same := hr.gaps()
		holds := len(hr.acq)
		label := "node watch on"
		if !watch {
			label = "node watch off"
		}
		reqs := fmt.Sprintf("%.2f", float64(ops.total())/float64(max(holds, 1)))
		rows = append(rows,
			statRow("mutex, "+label, float64(holds)/elapsed.Seconds(), fromRet, reqs, "Unlock returned -> next Lock returned"),
			statRow("", float64(holds)/elapsed.Seconds(), fromCall, "", "Unlock called -> next Lock returned"))
		p50s = append(p50s, p50{label, percentile(sortDurations(fromRet), 0.5)})
		if same > 0 {
			b.out.Printf("note: %d holds went to the goroutine that had just unlocked", same)
		}
	}

	if err := raw.measure(conn, rawDir, *handoffTime/4); err != nil {
		return err
	}
	rows = append(rows,
		statRow("raw delete+getChildren", 0, raw.both, "2.00", "sequential on one connection (no mutex)"),
		statRow("raw delete", 0, raw.del, "1.00", ""),
		statRow("raw getChildren", 0, raw.kids, "1.00", ""))
	b.table(rows)
	rawP50 := percentile(sortDurations(raw.both), 0.5)
	parts := make([]string, len(p50s))
	for i, p := range p50s {
		parts[i] = fmt.Sprintf("%s %.2fx", p.label, float64(p.d)/float64(rawP50))
	}
	b.out.Plain("    handoff p50 (from Unlock returned) vs raw delete+getChildren p50: %s", strings.Join(parts, ", "))
	return nil
}

func statRow(name string, perSec float64, ds []time.Duration, reqs, what string) []string {
	ds = sortDurations(ds)
	rate := ""
	if perSec > 0 {
		rate = fmt.Sprintf("%.0f", perSec)
	}
	last := time.Duration(0)
	if len(ds) > 0 {
		last = ds[len(ds)-1]
	}
	return []string{name, rate, us(percentile(ds, 0.5)), us(percentile(ds, 0.9)), us(percentile(ds, 0.99)), us(last), reqs, what}
}

// contend runs one goroutine per mutex, each looping Lock+Unlock, for d.
func contend(ctx context.Context, ms []*mutex.Reentrant, d time.Duration) (*handoffRun, time.Duration, error) {
	hr := &handoffRun{}
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, len(ms))
	t0 := time.Now()
	for i, m := range ms {
		wg.Add(1)
		go func(i int, m *mutex.Reentrant) {
			defer wg.Done()
			for cctx.Err() == nil {
				l, err := m.Lock(cctx)
				if err != nil {
					if cctx.Err() == nil {
						errs <- err
					}
					return
				}
				now := time.Now()
				hr.mu.Lock()
				k := len(hr.acq)
				hr.acq = append(hr.acq, now)
				hr.unlCall = append(hr.unlCall, time.Time{})
				hr.unlRet = append(hr.unlRet, time.Time{})
				hr.who = append(hr.who, i)
				hr.mu.Unlock()
				t1 := time.Now()
				err = l.Release(context.WithoutCancel(cctx))
				t2 := time.Now()
				hr.mu.Lock()
				hr.unlCall[k], hr.unlRet[k] = t1, t2
				hr.mu.Unlock()
				if err != nil {
					errs <- err
					return
				}
			}
		}(i, m)
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
	case err := <-errs:
		cancel()
		wg.Wait()
		return nil, 0, err
	case <-ctx.Done():
	}
	elapsed := time.Since(t0)
	cancel()
	wg.Wait()
	if ctx.Err() != nil {
		return nil, 0, context.Cause(ctx)
	}
	select {
	case err := <-errs:
		return nil, 0, err
	default:
	}
	return hr, elapsed, nil
}

// gaps returns, for every hold followed by another, the time from its Unlock
// returning (and being called) to the next Lock returning. The next Lock may
// return before the previous Unlock does (the waiter's watch event and the
// holder's delete reply race), which gives a negative gap from the return.
func (hr *handoffRun) gaps() (fromRet, fromCall []time.Duration, same int) {
	for k := 0; k+1 < len(hr.acq); k++ {
		if hr.unlRet[k].IsZero() {
			continue
		}
		if hr.who[k] == hr.who[k+1] {
			same++
		}
		fromRet = append(fromRet, hr.acq[k+1].Sub(hr.unlRet[k]))
		fromCall = append(fromCall, hr.acq[k+1].Sub(hr.unlCall[k]))
	}
	return fromRet, fromCall, same
}

// rawSamples are latencies of plain go-zookeeper requests.
type rawSamples struct{ both, del, kids []time.Duration }

// measure times delete and getChildren of fresh ephemeral-sequential nodes in
// dir for d.
func (r *rawSamples) measure(conn *zk.Conn, dir string, d time.Duration) error {
	acl := zk.WorldACL(zk.PermAll)
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		p, err := conn.Create(dir+"/n-", nil, zk.FlagEphemeralSequential, acl)
		if err != nil {
			return err
		}
		t0 := time.Now()
		if err := conn.Delete(p, -1); err != nil {
			return err
		}
		t1 := time.Now()
		if _, _, err := conn.Children(dir); err != nil {
			return err
		}
		t2 := time.Now()
		r.both = append(r.both, t2.Sub(t0))
		r.del = append(r.del, t1.Sub(t0))
		r.kids = append(r.kids, t2.Sub(t1))
	}
	return nil
}
