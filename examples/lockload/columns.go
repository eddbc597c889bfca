package main

import (
	"flag"
	"fmt"
	"strings"
)

// column is one column of a table and what it means, in words.
type column struct{ name, meaning string }

// columns explains the columns of each section's table; the program prints
// them above the table and in -h (keep the package comment in step).
var columns = map[string][]column{
	"a": {
		{"variant", "what one cycle does: the mutex's Lock then Unlock on one session (its node watch on or off), or by hand on the raw client the requests a lock needs at least"},
		{"cycles/s", "cycles completed per second, one after the other by one goroutine"},
		{"µs/cycle", "microseconds per cycle, the median of the rounds"},
		{"vs raw c+g+d", "µs/cycle divided by that of the raw create+getData+delete cycle (1.00x: as fast as those requests by hand)"},
		{"req/cycle", "ZooKeeper requests the client sent per cycle, counted on its connection (pings excluded)"},
		{"srv pkts/cycle", "packets the server received per cycle, every client included (mntr packets_received; n/a if mntr is refused)"},
		{"requests per cycle by op", "req/cycle split by request type"},
	},
	"b": {
		{"handoff", "the mutex with its node watch on or off, or the raw baseline: delete then getChildren on one connection, the least a handoff costs"},
		{"holds/s", "locks granted per second, all sessions together"},
		{"p50/p90/p99/max µs", "handoff time in microseconds, at the 50th, 90th and 99th percentile and the longest: from the holder's Unlock (returning on the first row of a variant, called on the second) to the next holder's Lock returning; on raw rows, the requests' round trip"},
		{"req/hold", "ZooKeeper requests per hold, all sessions together"},
		{"what", "which interval the row measures"},
	},
	"c": {
		{"variant", "the mutex with its node watch on or off"},
		{"handoffs", "releases in a chain: each holder unlocks and the next waiter takes the lock"},
		{"notifications", "watch notifications the server sent during the chain (deltas of mntr zk_sum_node_*_watch_count)"},
		{"per handoff", "notifications divided by handoffs: 1.00 means every release woke exactly one waiter; looking ahead up to 2.00 (the next waiter and the one after it); a herd effect shows as many more"},
		{"mntr deltas", "the same per event type, as watchers fired / events that had watchers"},
	},
	"d": {
		{"per waiting acquirer", "what one goroutine blocked in Lock costs this process, averaged over all the waiters"},
		{"value", "the figure"},
		{"what", "how it is measured"},
	},
}

// legend prints section s's columns, indented under its title.
func (b *bench) legend(s string) {
	b.out.Plain("    columns:")
	for _, c := range columns[s] {
		b.out.Plain("      %-26s %s", c.name, c.meaning)
	}
}

// usage is flag.Usage: the flags, then what the tables' columns mean.
func usage() {
	w := flag.CommandLine.Output()
	fmt.Fprintf(w, "Usage of lockload: lockload [flags]\n\nFlags:\n")
	flag.PrintDefaults()
	fmt.Fprintf(w, "\nColumns of the tables:\n")
	for _, s := range strings.Split("a,b,c,d", ",") {
		fmt.Fprintf(w, "  (%s)\n", s)
		for _, c := range columns[s] {
			fmt.Fprintf(w, "    %-26s %s\n", c.name, c.meaning)
		}
	}
}
