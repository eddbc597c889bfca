// Command lockload measures the fair mutex (package mutex) against the raw
// go-zookeeper client on the same server in the same run, and prints the
// figures in compact tables. It asserts nothing: it is the load program behind
// the mutex's figures in docs/performance.md.
//
//	(a) uncontended Lock+Unlock on one session: cycles/s, µs per cycle and
//	    ZooKeeper requests per cycle (counted on the wire by a dialer passed
//	    with session.WithDialer / zk.WithDialer, cross-checked with the server's
//	    mntr packets_received), with the mutex's own-node watch on (the
//	    default) and off (mutex.WithNodeWatch(false)), against raw
//	    create(ephemeral-sequential)+getData+delete and create+delete;
//	(b) contended handoff between 8 sessions: p50/p90/p99 of the time from a
//	    holder's Unlock (returning, and called) to the next holder's Lock
//	    returning, against raw delete+getChildren latency;
//	(c) 50 waiters released one after the other: watch notifications per
//	    handoff, from the server's mntr counters (zk_sum_node_*_watch_count:
//	    watchers fired per event type), with the raw deltas;
//	(d) 1,000 waiters in this process (10 sessions x 100 goroutines calling
//	    Lock): live heap bytes, stack bytes and goroutines per waiting
//	    acquirer, then the time to release them all.
//
// Run it on an embedded ZooKeeper (started from the local install, stopped on
// exit, Ctrl-C included), in about 25 s with the defaults:
//
//	go run ./examples/lockload
//
// or against your own ensemble (mntr must be allowed by
// 4lw.commands.whitelist for the server-side columns):
//
//	go run ./examples/lockload -zk 10.0.0.1:2181,10.0.0.2:2181,10.0.0.3:2181
//
// (with -zk it first opens one session to those addresses and exits with the
// addresses and the dial error if none comes within -connect-timeout, 5 s by
// default).
//
// With -vs-zk it runs only a side-by-side comparison with go-zookeeper's own
// lock (zk.NewLock) on the same server in the same run:
//
//	go run ./examples/lockload -vs-zk
//
// zk.NewLock, mutex.New (the default), mutex.New with WithLookAhead(true),
// mutex.New with WithNodeWatch(false), mutex.NewReentrant and, uncontended
// only, the floor (the bare create and delete of an ephemeral sequential
// node) on four workloads: uncontended Lock+Unlock on one session; 8
// sessions contending, each looping Lock, counter++ on a shared counter,
// Unlock; the same with a counter znode read and written inside the lock
// (counter); 50 sessions as the first (herd, -vs-herd). Every round
// (-vs-rounds, 3) runs every variant on the workload for -vs-time (1 s), in
// a rotating order, after an untimed Lock+Unlock of every locker. Per
// variant it prints ops/s (the median of the rounds), the ratio of ops/s to
// zk.NewLock in each round (compare ratios within a run: the machine's load
// moves the absolute figures), p50/p99 of the handoff (the holder's Unlock
// call to the next Lock returning; uncontended: of the whole cycle),
// ZooKeeper requests and watch notifications per lock counted on the wire
// (a zktest.Tap; -vs-byop splits the requests by type), the CPU time this
// process used per lock (user and system; the clients, go-zookeeper and the
// tap, not the server) and, uncontended, heap allocations per cycle (the
// whole process: go-zookeeper and the tap included). -vs-only runs only some
// of the variants (zk, floor, default, lookahead, watchoff, reentrant),
// -vs-workloads only some of the workloads (uncontended, contended, counter,
// herd); -cpuprofile writes a
// CPU profile of the run, -memprofile an allocation profile of it; -vs-json
// prints, after each workload's table, the same figures as one line of JSON
// (internal/tools/perfreport reads them).
//
// Flags change the counts and durations (-rounds, -cycle-time, -sessions,
// -handoff-time, -waiters, -big-sessions, -per-session) and select sections
// (-only a,c). The machine's load shows in the figures: run it on a quiet one.
//
// # Columns
//
// Each section prints what its columns mean above its table (and -h prints
// them all). In words:
//
// (a) variant: what one cycle does, the mutex's Lock then Unlock on one
// session (its node watch on or off), or by hand on the raw client the
// requests a lock needs at least. cycles/s: cycles completed per second, one
// after the other by one goroutine. µs/cycle: microseconds per cycle, the
// median of the rounds. vs raw c+g+d: µs/cycle divided by that of the raw
// create+getData+delete cycle (1.00x: as fast as those requests by hand).
// req/cycle: ZooKeeper requests the client sent per cycle, counted on its
// connection (pings excluded). srv pkts/cycle: packets the server received
// per cycle, every client included (mntr packets_received; n/a when mntr is
// refused). requests per cycle by op: req/cycle split by request type.
//
// (b) handoff: the mutex with its node watch on or off, or the raw baseline
// (delete then getChildren on one connection, the least a handoff costs).
// holds/s: locks granted per second, all sessions together. p50, p90, p99,
// max µs: the handoff time in microseconds at those percentiles and the
// longest, from the holder's Unlock (returning on a variant's first row,
// called on its second) to the next holder's Lock returning; on raw rows the
// requests' round trip. req/hold: ZooKeeper requests per hold, all sessions
// together. what: which interval the row measures.
//
// (c) handoffs: releases in a chain, each holder unlocking and the next
// waiter taking the lock. notifications: watch notifications the server sent
// during the chain (deltas of mntr zk_sum_node_*_watch_count). per handoff:
// notifications divided by handoffs; 1.00 means every release woke exactly
// one waiter; looking ahead up to 2.00 (the next waiter and the one after
// it); the holder's own node watch, once armed, adds one; a herd effect
// shows as many more. mntr deltas: the same per event type, as
// watchers fired / events that had watchers.
//
// (d) per waiting acquirer: what one goroutine blocked in Lock costs this
// process (live heap, goroutine stacks, goroutines), averaged over all the
// waiters, with how each figure is measured; then the time to queue them
// and to release them one after the other.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"net"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"
	"go.uber.org/zap"

	"github.com/zkrecipes/zkrecipes/examples/internal/demo"
	"github.com/zkrecipes/zkrecipes/session"
	"github.com/zkrecipes/zkrecipes/zktest"
)

var (
	only        = flag.String("only", "a,b,c,d", "sections to run, comma-separated")
	rounds      = flag.Int("rounds", 3, "(a) rounds; each round runs every variant once, interleaved")
	cycleTime   = flag.Duration("cycle-time", time.Second, "(a) duration of one variant in one round")
	nSessions   = flag.Int("sessions", 8, "(b) contending sessions")
	handoffTime = flag.Duration("handoff-time", 2*time.Second, "(b) duration of each contended run")
	nWaiters    = flag.Int("waiters", 50, "(c) waiters behind the holder")
	bigSessions = flag.Int("big-sessions", 10, "(d) sessions")
	perSession  = flag.Int("per-session", 100, "(d) goroutines calling Lock per session")
	root        = flag.String("path", "/zkrecipes-lockload", "parent of the paths used")
)

func main() {
	flag.Usage = usage
	demo.Main("lockload", 5*time.Minute, run)
}

type bench struct {
	env *demo.Env
	out *demo.Printer
	// sessions opened so far, closed at the end
	closers []func()
}

func run(ctx context.Context, env *demo.Env) error {
	b := &bench{env: env, out: env.Out}
	defer b.closeAll()
	if *vsZK {
		if err := b.vsCompare(ctx); err != nil {
			return fmt.Errorf("-vs-zk: %w", err)
		}
		b.out.Printf("done")
		return nil
	}
	sections := map[string]func(context.Context) error{
		"a": b.uncontended, "b": b.handoff, "c": b.herd, "d": b.memory,
	}
	want := strings.Split(*only, ",")
	for _, s := range want {
		if sections[strings.TrimSpace(s)] == nil {
			return fmt.Errorf("-only %q: sections are a, b, c and d", *only)
		}
	}
	for _, s := range want {
		if err := sections[strings.TrimSpace(s)](ctx); err != nil {
			return fmt.Errorf("section (%s): %w", strings.TrimSpace(s), err)
		}
		b.closeAll()
	}
	b.out.Printf("done")
	return nil
}

func (b *bench) closeAll() {
	for i := len(b.closers) - 1; i >= 0; i-- {
		b.closers[i]()
	}
	b.closers = nil
}

// session connects a session whose requests ctr counts (ctr may be nil).
func (b *bench) session(ctx context.Context, name string, ctr *counter, opts ...session.Option) (*session.Session, error) {
	opts = append([]session.Option{session.WithLogger(b.env.Logger.Named(name))}, opts...)
	if ctr != nil {
		opts = append(opts, session.WithDialer(ctr.dialer()))
	}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	s, err := session.Connect(cctx, b.env.Servers, opts...)
	if err != nil {
		return nil, err
	}
	b.closers = append(b.closers, func() { _ = s.Close() })
	return s, nil
}

// sessions connects n sessions in parallel.
func (b *bench) sessions(ctx context.Context, name string, n int, ctr *counter, opts ...session.Option) ([]*session.Session, error) {
	out := make([]*session.Session, n)
	errs := make([]error, n)
	done := make(chan int)
	for i := 0; i < n; i++ {
		go func(i int) {
			cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			o := append([]session.Option{session.WithLogger(b.env.Logger.Named(fmt.Sprintf("%s-%d", name, i)))}, opts...)
			if ctr != nil {
				o = append(o, session.WithDialer(ctr.dialer()))
			}
			out[i], errs[i] = session.Connect(cctx, b.env.Servers, o...)
			done <- i
		}(i)
	}
	for i := 0; i < n; i++ {
		<-done
	}
	for i, s := range out {
		if s != nil {
			b.closers = append(b.closers, func() { _ = s.Close() })
		} else if errs[i] != nil {
			return nil, errs[i]
		}
	}
	return out, nil
}

// raw connects a plain go-zookeeper client (the baseline) through ctr.
func (b *bench) raw(ctx context.Context, ctr *counter) (*zk.Conn, error) {
	dial := zk.WithDialer(net.DialTimeout)
	if ctr != nil {
		dial = zk.WithDialer(ctr.dialer())
	}
	conn, events, err := zk.Connect(b.env.Servers, 10*time.Second, zk.WithLogger(zkLogger{b.env.Logger.Named("raw")}), dial)
	if err != nil {
		return nil, err
	}
	b.closers = append(b.closers, conn.Close)
	for {
		select {
		case ev := <-events:
			if ev.State == zk.StateHasSession {
				return conn, nil
			}
		case <-ctx.Done():
			return nil, fmt.Errorf("raw client: waiting for a session: %w", context.Cause(ctx))
		}
	}
}

// rawDir creates the directory p for the raw client's nodes as a persistent
// node (a container could be reaped between two cycles) under container
// parents, and deletes it when the bench closes, so that nothing is left
// behind on the ensemble once the server reaps the emptied containers.
func (b *bench) rawDir(conn *zk.Conn, p string) error {
	acl := zk.WorldACL(zk.PermAll)
	parts := strings.Split(strings.TrimPrefix(p, "/"), "/")
	cur := ""
	for i, part := range parts {
		cur += "/" + part
		var err error
		if i < len(parts)-1 {
			_, err = conn.CreateContainer(cur, nil, zk.FlagContainer, acl)
		} else {
			_, err = conn.Create(cur, nil, zk.FlagPersistent, acl)
		}
		if err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return fmt.Errorf("create %s: %w", cur, err)
		}
	}
	b.closers = append(b.closers, func() { _ = conn.Delete(p, -1) })
	return nil
}

// mntr reads the numeric mntr counters of every server and sums them (in an
// ensemble each member counts its own clients). nil if mntr is refused.
func (b *bench) mntr(ctx context.Context) map[string]float64 {
	sum := make(map[string]float64)
	for _, addr := range b.env.Servers {
		mctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		m, err := zktest.Mntr(mctx, addr)
		cancel()
		if err != nil || len(m) == 0 {
			return nil
		}
		for k, v := range m {
			if f, err := strconv.ParseFloat(v, 64); err == nil {
				sum[k] += f
			}
		}
	}
	return sum
}

// zkLogger sends go-zookeeper's log lines to zap at debug level.
type zkLogger struct{ lg *zap.Logger }

func (l zkLogger) Printf(format string, args ...any) {
	if ce := l.lg.Check(zap.DebugLevel, "zk"); ce != nil {
		ce.Write(zap.String("msg", fmt.Sprintf(format, args...)))
	}
}

// percentile returns the q-quantile (0 < q <= 1) of sorted ds, nearest rank.
func percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

func sortDurations(ds []time.Duration) []time.Duration {
	sort.Slice(ds, func(i, k int) bool { return ds[i] < ds[k] })
	return ds
}

func us(d time.Duration) string { return fmt.Sprintf("%.0f", float64(d)/float64(time.Microsecond)) }

// table prints rows with columns padded to the widest cell; the first row is
// the header.
func (b *bench) table(rows [][]string) {
	widths := make([]int, 0)
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
			pad := widths[i] - len([]rune(c))
			if i == 0 || i == len(r)-1 {
				sb.WriteString(c + strings.Repeat(" ", pad)) // left-aligned
			} else {
				sb.WriteString(strings.Repeat(" ", pad) + c) // numbers right-aligned
			}
			if i < len(r)-1 {
				sb.WriteString("  ")
			}
		}
		b.out.Plain("%s", strings.TrimRight(sb.String(), " "))
	}
}
