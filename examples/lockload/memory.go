package main

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"time"

	"github.com/zkrecipes/zkrecipes/mutex"
)

// (d) memory and goroutines per waiting acquirer.
func (b *bench) memory(ctx context.Context) error {
	n := *bigSessions * *perSession
	b.out.Printf("(d) %d waiters in this process: %d sessions x %d goroutines calling Lock (node watch on)", n, *bigSessions, *perSession)
	b.legend("d")
	ctr := newCounter()
	sessions, err := b.sessions(ctx, "big", *bigSessions+1, ctr)
	if err != nil {
		return err
	}
	path := *root + "/waiters"
	ms := make([]*mutex.Reentrant, len(sessions))
	for i, s := range sessions {
		m, err := mutex.NewReentrant(s, path, mutex.WithID(fmt.Sprintf("s%d", i)))
		if err != nil {
			return err
		}
		defer m.Close()
		ms[i] = m
	}
	holder, err := ms[0].Lock(ctx)
	if err != nil {
		return err
	}
	released := false
	defer func() {
		if !released {
			_ = holder.Release(context.WithoutCancel(ctx))
		}
	}()
	before, g0 := memStats()
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	t0 := time.Now()
	for _, m := range ms[1:] {
		for k := 0; k < *perSession; k++ {
			wg.Add(1)
			go lockOnce(wctx, m, &wg, errs)
		}
	}
	defer wg.Wait()
	defer cancel()
	// Wait until every waiter has settled: all nodes are in the directory,
	// then neither the requests on the wire nor the goroutine count move
	// between two looks 50 ms apart (watches set, replies handled).
	full, err := sessions[0].Path(path)
	if err != nil {
		return err
	}
	conn := sessions[0].Conn()
	if err := waitFor(ctx, errs, fmt.Sprintf("%d waiters' nodes", n), func() bool {
		kids, _, err := conn.Children(full)
		return err == nil && len(kids) == n+1
	}); err != nil {
		return err
	}
	lastReqs, lastG := int64(-1), -1
	if err := waitFor(ctx, errs, "the waiters to settle", func() bool {
		reqs, g := ctr.snapshot().total(), runtime.NumGoroutine()
		settled := reqs == lastReqs && g == lastG
		lastReqs, lastG = reqs, g
		return settled
	}); err != nil {
		return err
	}
	queued := time.Since(t0)
	after, g1 := memStats()

	t1 := time.Now()
	released = true
	if err := holder.Release(ctx); err != nil {
		return err
	}
	wg.Wait()
	drained := time.Since(t1)
	select {
	case err := <-errs:
		return err
	default:
	}
	fn := float64(n)
	rows := [][]string{
		{"per waiting acquirer", "value", "what"},
		{"live heap", fmt.Sprintf("%.0f B", float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/fn), "runtime.MemStats.HeapAlloc delta after GC, / waiters"},
		{"goroutine stacks", fmt.Sprintf("%.0f B", float64(int64(after.StackInuse)-int64(before.StackInuse))/fn), "StackInuse delta / waiters"},
		{"goroutines", fmt.Sprintf("%.2f", float64(g1-g0)/fn), "runtime.NumGoroutine delta / waiters (the caller's own goroutine included)"},
	}
	b.table(rows)
	b.out.Plain("    queueing %d waiters took %v; releasing them one after the other took %v (%.0f handoffs/s)",
		n, queued.Round(time.Millisecond), drained.Round(time.Millisecond), fn/drained.Seconds())
	return nil
}

// memStats returns the memory statistics after a full GC, and the number of
// goroutines.
func memStats() (runtime.MemStats, int) {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms, runtime.NumGoroutine()
}

// waitFor polls cond every 50 ms (there is no event for it) until it holds;
// an error from errs or ctx ends the wait, and so do 60 s.
func waitFor(ctx context.Context, errs <-chan error, what string, cond func() bool) error {
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			return fmt.Errorf("waiting for %s: 60 s passed", what)
		}
		t := time.NewTimer(50 * time.Millisecond)
		select {
		case <-t.C:
		case err := <-errs:
			t.Stop()
			return fmt.Errorf("waiting for %s: %w", what, err)
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("waiting for %s: %w", what, context.Cause(ctx))
		}
	}
	return nil
}
