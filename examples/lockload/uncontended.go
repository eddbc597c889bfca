package main

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/mutex"
)

// variant is one way of doing an uncontended cycle.
type variant struct {
	name  string
	ctr   *counter // the wire counter of the connection it uses
	cycle func(ctx context.Context) error

	perRound []time.Duration // time per cycle, one per round
	cycles   int
	ops      opCounts
	pkts     float64 // server packets_received delta
}

// (a) uncontended Lock+Unlock vs raw requests.
func (b *bench) uncontended(ctx context.Context) error {
	b.out.Printf("(a) uncontended: one session; each variant runs %v per round, %d rounds, interleaved", *cycleTime, *rounds)
	b.legend("a")
	mctr, rctr := newCounter(), newCounter()
	sess, err := b.session(ctx, "uncontended", mctr)
	if err != nil {
		return err
	}
	conn, err := b.raw(ctx, rctr)
	if err != nil {
		return err
	}
	mOn, err := mutex.NewReentrant(sess, *root+"/uncontended-watch")
	if err != nil {
		return err
	}
	defer mOn.Close()
	mOff, err := mutex.NewReentrant(sess, *root+"/uncontended-nowatch", mutex.WithNodeWatch(false))
	if err != nil {
		return err
	}
	defer mOff.Close()
	rawDir := *root + "/raw"
	if err := b.rawDir(conn, rawDir); err != nil {
		return err
	}
	acl := zk.WorldACL(zk.PermAll)
	lockUnlock := func(m *mutex.Reentrant) func(ctx context.Context) error {
		return func(ctx context.Context) error {
			l, err := m.Lock(ctx)
			if err != nil {
				return err
			}
			return l.Release(ctx)
		}
	}
	variants := []*variant{
		{name: "mutex Lock+Unlock, node watch on (default)", ctr: mctr, cycle: lockUnlock(mOn)},
		{name: "mutex Lock+Unlock, node watch off", ctr: mctr, cycle: lockUnlock(mOff)},
		{name: "raw create(e-seq)+getData+delete", ctr: rctr, cycle: func(context.Context) error {
			p, err := conn.Create(rawDir+"/n-", nil, zk.FlagEphemeralSequential, acl)
			if err != nil {
				return err
			}
			if _, _, err := conn.Get(p); err != nil {
				return err
			}
			return conn.Delete(p, -1)
		}},
		{name: "raw create(e-seq)+delete", ctr: rctr, cycle: func(context.Context) error {
			p, err := conn.Create(rawDir+"/n-", nil, zk.FlagEphemeralSequential, acl)
			if err != nil {
				return err
			}
			return conn.Delete(p, -1)
		}},
	}
	// Warm up the JIT of the server and our connections.
	for _, v := range variants {
		for i := 0; i < 200; i++ {
			if err := v.cycle(ctx); err != nil {
				return fmt.Errorf("%s: %w", v.name, err)
			}
		}
	}
	for r := 0; r < *rounds; r++ {
		for _, v := range variants {
			if err := b.runVariant(ctx, v); err != nil {
				return fmt.Errorf("%s: %w", v.name, err)
			}
		}
	}
	base := median(variants[2].perRound)
	rows := [][]string{{"variant", "cycles/s", "µs/cycle", "vs raw c+g+d", "req/cycle", "srv pkts/cycle", "requests per cycle by op"}}
	for _, v := range variants {
		per := median(v.perRound)
		pkts := "n/a"
		if v.pkts >= 0 {
			pkts = fmt.Sprintf("%.2f", v.pkts/float64(v.cycles))
		}
		rows = append(rows, []string{
			v.name,
			fmt.Sprintf("%.0f", float64(time.Second)/float64(per)),
			us(per),
			fmt.Sprintf("%.2fx", float64(per)/float64(base)),
			fmt.Sprintf("%.2f", float64(v.ops.total())/float64(v.cycles)),
			pkts,
			v.ops.per(v.cycles),
		})
	}
	b.table(rows)
	b.out.Plain("    (µs/cycle: median of the rounds; requests counted on the client's wire, pings excluded;")
	b.out.Plain("     srv pkts/cycle: the server's mntr packets_received delta, every client included)")
	return nil
}

// runVariant runs v for -cycle-time and records the round.
func (b *bench) runVariant(ctx context.Context, v *variant) error {
	before := v.ctr.snapshot()
	m0 := b.mntr(ctx)
	n := 0
	t0 := time.Now()
	deadline := t0.Add(*cycleTime)
	for time.Now().Before(deadline) {
		if err := v.cycle(ctx); err != nil {
			return err
		}
		n++
	}
	elapsed := time.Since(t0)
	m1 := b.mntr(ctx)
	v.ops = addCounts(v.ops, v.ctr.snapshot().minus(before))
	v.cycles += n
	v.perRound = append(v.perRound, elapsed/time.Duration(n))
	if m0 != nil && m1 != nil && v.pkts >= 0 {
		v.pkts += m1["zk_packets_received"] - m0["zk_packets_received"]
	} else {
		v.pkts = -1
	}
	return nil
}

func addCounts(a, b opCounts) opCounts {
	out := make(opCounts)
	for op, n := range a {
		out[op] += n
	}
	for op, n := range b {
		out[op] += n
	}
	return out
}

func median(ds []time.Duration) time.Duration {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, k int) bool { return s[i] < s[k] })
	if len(s) == 0 {
		return 0
	}
	return s[len(s)/2]
}
