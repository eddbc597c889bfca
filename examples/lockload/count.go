package main

import (
	"encoding/binary"
	"fmt"
	"net"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/zktest"
)

// counter counts the ZooKeeper requests that clients send through its dialer,
// by operation, from the client side of the wire: every length-prefixed frame
// after a connection's ConnectRequest is one request whose header is
// (xid, op). Pings (xid -2) are counted apart. It is safe for concurrent use.
type counter struct {
	mu    sync.Mutex
	ops   map[int32]int64
	pings int64
}

func newCounter() *counter { return &counter{ops: make(map[int32]int64)} }

// dialer returns a zk.Dialer (for session.WithDialer or zk.WithDialer) that
// counts what is written to each connection.
func (c *counter) dialer() zk.Dialer {
	return func(network, address string, timeout time.Duration) (net.Conn, error) {
		conn, err := net.DialTimeout(network, address, timeout)
		if err != nil {
			return nil, err
		}
		return &countConn{Conn: conn, c: c}, nil
	}
}

// snapshot returns the counts so far (requests by op, pings excluded).
func (c *counter) snapshot() opCounts {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(opCounts, len(c.ops))
	for op, n := range c.ops {
		out[op] = n
	}
	return out
}

func (c *counter) record(xid, op int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if xid == -2 {
		c.pings++
		return
	}
	c.ops[op]++
}

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
		parts = append(parts, fmt.Sprintf("%s %.2f", opName(op), float64(c[op])/float64(n)))
	}
	return strings.Join(parts, ", ")
}

func opName(op int32) string {
	switch op {
	case zktest.OpCreate:
		return "create"
	case zktest.OpCreate2:
		return "create2"
	case zktest.OpCreateContainer:
		return "createContainer"
	case zktest.OpDelete:
		return "delete"
	case zktest.OpExists:
		return "exists"
	case zktest.OpGetData:
		return "getData"
	case zktest.OpSetData:
		return "setData"
	case zktest.OpGetChildren:
		return "getChildren"
	case zktest.OpGetChildren2:
		return "getChildren2"
	case zktest.OpSync:
		return "sync"
	case zktest.OpMulti:
		return "multi"
	case zktest.OpSetWatches:
		return "setWatches"
	case zktest.OpSetAuth:
		return "setAuth"
	case zktest.OpCloseSession:
		return "closeSession"
	}
	return fmt.Sprintf("op%d", op)
}

// countConn parses the client's outgoing frames as they are written.
type countConn struct {
	net.Conn
	c *counter

	started bool   // the ConnectRequest has gone by
	head    []byte // bytes of the current frame's length and header so far
	skip    int    // bytes of the current frame's body still to pass over
}

func (cc *countConn) Write(p []byte) (int, error) {
	cc.parse(p)
	return cc.Conn.Write(p)
}

func (cc *countConn) parse(p []byte) {
	for len(p) > 0 {
		if cc.skip > 0 {
			n := min(cc.skip, len(p))
			cc.skip -= n
			p = p[n:]
			continue
		}
		need := 12 // length + xid + op
		if !cc.started {
			need = 4 // ConnectRequest: no request header
		}
		n := min(need-len(cc.head), len(p))
		cc.head = append(cc.head, p[:n]...)
		p = p[n:]
		if len(cc.head) < need {
			return
		}
		length := int(binary.BigEndian.Uint32(cc.head[:4]))
		if !cc.started {
			cc.started = true
			cc.skip = length
		} else {
			cc.c.record(int32(binary.BigEndian.Uint32(cc.head[4:8])), int32(binary.BigEndian.Uint32(cc.head[8:12])))
			cc.skip = length - 8
		}
		cc.head = cc.head[:0]
	}
}
