package main

import (
	"fmt"
	"sort"
	"strings"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/zktest"
)

// counter counts the ZooKeeper requests that clients send through its dialer,
// by operation, on the client's side of the wire (a zktest.Tap; pings are not
// counted). It is safe for concurrent use.
type counter struct{ tap *zktest.Tap }

func newCounter() *counter { return &counter{tap: zktest.NewTap()} }

// dialer returns a zk.Dialer (for session.WithDialer or zk.WithDialer) that
// counts what is written to each connection.
func (c *counter) dialer() zk.Dialer { return c.tap.Dialer() }

// snapshot returns the counts so far (requests by op, pings excluded).
func (c *counter) snapshot() opCounts { return c.tap.Requests() }

// opCounts are request counts by operation code.
type opCounts map[int32]int64

// minus returns c - before.
func (c opCounts) minus(before opCounts) opCounts {
	out := make(opCounts)
	for op, n := range c {
		if d := n - before[op]; d != 0 {
			out[op] = d
		}
	}
	return out
}

func (c opCounts) total() int64 {
	var t int64
	for _, n := range c {
		t += n
	}
	return t
}

// per formats the counts divided by n, e.g. "create 1.00 getChildren2 1.00".
func (c opCounts) per(n int) string {
	if n == 0 {
		return "-"
	}
	ops := make([]int32, 0, len(c))
	for op := range c {
		ops = append(ops, op)
	}
	sort.Slice(ops, func(i, k int) bool { return c[ops[i]] > c[ops[k]] || (c[ops[i]] == c[ops[k]] && ops[i] < ops[k]) })
	parts := make([]string, 0, len(ops))
	for _, op := range ops {
		parts = append(parts, fmt.Sprintf("%s %.2f", zktest.OpName(op), float64(c[op])/float64(n)))
	}
	return strings.Join(parts, ", ")
}
