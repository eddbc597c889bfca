package main

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/zkrecipes/zkrecipes/mutex"
	"github.com/zkrecipes/zkrecipes/session"
)

// The mntr summaries that count fired watchers: for every event of a type
// that had watchers, zk_cnt_* grows by one and zk_sum_* by the number of
// watchers notified (ZooKeeper 3.6+ WatchManager metrics).
var watchKeys = []string{"node_deleted", "node_changed", "node_children", "node_created"}

// (c) watch notifications per release with many waiters.
func (b *bench) herd(ctx context.Context) error {
	b.out.Printf("(c) herd: 1 holder + %d waiters (one session each), released one after the other", *nWaiters)
	b.legend("c")
	sessions, err := b.sessions(ctx, "herd", *nWaiters+1, nil)
	if err != nil {
		return err
	}
	if b.mntr(ctx) == nil {
		b.out.Printf("mntr is not available on %s (4lw.commands.whitelist): skipping (c)", strings.Join(b.env.Servers, ","))
		return nil
	}
	rows := [][]string{{"variant", "handoffs", "notifications", "per handoff", "mntr deltas (sum/cnt per event type)"}}
	for i, v := range []struct {
		label            string
		watch, lookAhead bool
	}{
		{"mutex, node watch on", true, false},
		{"mutex, node watch off", false, false},
		{"mutex, look-ahead", true, true},
	} {
		label, watch := v.label, v.watch
		res, err := b.herdRun(ctx, sessions, fmt.Sprintf("%s/herd-%d", *root, i), watch, v.lookAhead)
		if err != nil {
			return fmt.Errorf("%s: %w", label, err)
		}
		rows = append(rows, []string{label, fmt.Sprint(*nWaiters), fmt.Sprintf("%.0f", res.total),
			fmt.Sprintf("%.2f", res.total/float64(*nWaiters)), res.detail})
	}
	b.table(rows)
	b.out.Plain("    (notifications: deltas of the server's zk_sum_node_*_watch_count, watchers fired, over the %d releases", *nWaiters+1)
	b.out.Plain("     of a chain of %d handoffs; sum/cnt: watchers fired / events that had watchers. A waiter watches only its", *nWaiters)
	b.out.Plain("     predecessor: 1 per handoff, plus, with the node watch, the holder's own watch on its node once armed.")
	b.out.Plain("     Looking ahead, the waiter two places back is woken too, to read the directory before its turn: up to 2)")
	return nil
}

type herdResult struct {
	total  float64
	detail string
}

func (b *bench) herdRun(ctx context.Context, sessions []*session.Session, path string, watch, lookAhead bool) (*herdResult, error) {
	ms := make([]*mutex.Reentrant, len(sessions))
	for i, s := range sessions {
		m, err := mutex.NewReentrant(s, path, mutex.WithNodeWatch(watch), mutex.WithLookAhead(lookAhead), mutex.WithID(fmt.Sprintf("s%d", i)))
		if err != nil {
			return nil, err
		}
		defer m.Close()
		ms[i] = m
	}
	w0 := b.mntr(ctx)["zk_watch_count"]
	holder, err := ms[0].Lock(ctx)
	if err != nil {
		return nil, err
	}
	released := false
	defer func() {
		if !released {
			_ = holder.Release(context.WithoutCancel(ctx))
		}
	}()
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, len(ms))
	for _, m := range ms[1:] {
		wg.Add(1)
		go lockOnce(wctx, m, &wg, errs)
	}
	defer wg.Wait()
	defer cancel()

	// Every waiter must have its watch set before the releases begin (else it
	// finds the node it waits on gone and fires nothing): wait for the
	// server's watch gauge. Every waiter watches one node (its predecessor;
	// looking ahead, the node two places ahead from the third on), and
	// with the node watch the holder and the first waiter also watch their
	// own node once they have held or waited 100 ms.
	want := float64(*nWaiters)
	if watch {
		want = float64(*nWaiters + 2)
	}
	if err := b.waitServer(ctx, func(m map[string]float64) bool { return m["zk_watch_count"]-w0 >= want }, errs,
		fmt.Sprintf("%.0f watches set on the server", want)); err != nil {
		return nil, err
	}
	m0 := b.mntr(ctx)
	released = true
	if err := holder.Release(ctx); err != nil {
		return nil, err
	}
	wg.Wait()
	select {
	case err := <-errs:
		return nil, err
	default:
	}
	m1 := b.mntr(ctx)
	res := &herdResult{}
	var parts []string
	for _, k := range watchKeys {
		sum := m1["zk_sum_"+k+"_watch_count"] - m0["zk_sum_"+k+"_watch_count"]
		cnt := m1["zk_cnt_"+k+"_watch_count"] - m0["zk_cnt_"+k+"_watch_count"]
		res.total += sum
		if sum != 0 || cnt != 0 {
			parts = append(parts, fmt.Sprintf("%s %.0f/%.0f", k, sum, cnt))
		}
	}
	sort.Strings(parts)
	res.detail = strings.Join(parts, ", ")
	if res.detail == "" {
		res.detail = "none"
	}
	return res, nil
}

// waitServer polls the server's mntr counters (there is no event for them)
// until cond holds; an error from errs or ctx ends the wait.
func (b *bench) waitServer(ctx context.Context, cond func(map[string]float64) bool, errs <-chan error, what string) error {
	var failed bool
	err := waitFor(ctx, errs, what, func() bool {
		m := b.mntr(ctx)
		failed = m == nil
		return failed || cond(m)
	})
	if err == nil && failed {
		return errors.New("mntr failed")
	}
	return err
}

// lockOnce is one waiter: Lock, then Unlock at once; errors go to errs.
func lockOnce(ctx context.Context, m *mutex.Reentrant, wg *sync.WaitGroup, errs chan<- error) {
	defer wg.Done()
	l, err := m.Lock(ctx)
	if err != nil {
		errs <- err
		return
	}
	if err := l.Release(context.WithoutCancel(ctx)); err != nil {
		errs <- err
	}
}
