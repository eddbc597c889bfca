package mutex_test

import (
	"context"
	"encoding/binary"
	"errors"
	"net"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/internal/sessiontest"
	"github.com/zkrecipes/zkrecipes/mutex"
	"github.com/zkrecipes/zkrecipes/session"
	"github.com/zkrecipes/zkrecipes/zktest"
)

const lockPath = "/locks/a"

// wait is how long a test waits for something that should happen promptly.
const wait = 15 * time.Second

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func newMutex(t testing.TB, s *session.Session, opts ...mutex.Option) *mutex.Mutex {
	t.Helper()
	m, err := mutex.New(s, lockPath, opts...)
	if err != nil {
		t.Fatalf("mutex.New: %v", err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// kids lists the lock directory through a raw connection (sorted by name).
func kids(t testing.TB, c *zk.Conn, ns *zktest.Namespace) []string {
	t.Helper()
	k, _, err := c.Children(ns.Path(lockPath))
	if errors.Is(err, zk.ErrNoNode) {
		return nil
	}
	if err != nil {
		t.Fatalf("children: %v", err)
	}
	sort.Strings(k)
	return k
}

// lockKids lists the "lock-" nodes in sequence order.
func lockKids(t testing.TB, c *zk.Conn, ns *zktest.Namespace) []string {
	t.Helper()
	var out []string
	for _, k := range kids(t, c, ns) {
		if strings.Contains(k, "lock-") {
			out = append(out, k)
		}
	}
	sort.Slice(out, func(i, j int) bool { return seqOf(out[i]) < seqOf(out[j]) })
	return out
}

func seqOf(name string) string { return name[strings.LastIndex(name, "lock-")+5:] }

// waitKids waits until the lock directory has n "lock-" nodes.
func waitKids(t testing.TB, c *zk.Conn, ns *zktest.Namespace, n int) []string {
	t.Helper()
	var k []string
	zktest.Eventually(t, wait, func() bool {
		k = lockKids(t, c, ns)
		return len(k) == n
	}, "want %d lock nodes", n)
	return k
}

// waitDone waits for a lease to end and returns its cause.
func waitDone(t testing.TB, l interface {
	Done() <-chan struct{}
	Err() error
}, d time.Duration) error {
	t.Helper()
	select {
	case <-l.Done():
		return l.Err()
	case <-time.After(d):
		t.Fatalf("lease did not end within %v", d)
		return nil
	}
}

func connect(t testing.TB, ns *zktest.Namespace, opts ...session.Option) *session.Session {
	t.Helper()
	return sessiontest.Connect(t, ns, opts...)
}

// wireTap wraps a session's dialer: it counts connection attempts and records
// the watch notifications the server sends on every connection. It parses the
// server-to-client stream without altering it: frames are length-prefixed;
// the first frame of a connection is the ConnectResponse; every later frame
// starts with a ReplyHeader (xid int32, zxid int64, err int32), and a
// notification has xid -1 and a WatcherEvent body (type int32, state int32,
// path string). It is safe for concurrent use.
type wireTap struct {
	mu      sync.Mutex
	dials   int
	notes   []notification
	corrupt bool
}

// notification is one watch notification as the server sent it.
type notification struct {
	Type zk.EventType
	Path string // server path (namespace included)
}

// dialer returns the wrapping dialer, for session.WithDialer.
func (w *wireTap) dialer() zk.Dialer {
	return func(network, address string, timeout time.Duration) (net.Conn, error) {
		w.mu.Lock()
		w.dials++
		w.mu.Unlock()
		c, err := net.DialTimeout(network, address, timeout)
		if err != nil {
			return nil, err
		}
		return &tapConn{Conn: c, w: w}, nil
	}
}

// Dials returns how many connections the client tried to open.
func (w *wireTap) Dials() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.dials
}

// Notifications returns the notifications received so far; it fails the test
// if a stream could not be parsed.
func (w *wireTap) Notifications(t testing.TB) []notification {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.corrupt {
		t.Fatalf("wireTap: unparsable server stream")
	}
	return append([]notification(nil), w.notes...)
}

// Reset forgets the notifications received so far.
func (w *wireTap) Reset() {
	w.mu.Lock()
	w.notes = nil
	w.mu.Unlock()
}

// tapConn parses what go-zookeeper reads (only its receive goroutine calls
// Read, so buf needs no lock).
type tapConn struct {
	net.Conn
	w         *wireTap
	buf       []byte
	connected bool // the ConnectResponse was seen
	broken    bool
}

func (c *tapConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if n > 0 && !c.broken {
		c.buf = append(c.buf, b[:n]...)
		c.parse()
	}
	return n, err
}

func (c *tapConn) parse() {
	for len(c.buf) >= 4 {
		l := int(int32(binary.BigEndian.Uint32(c.buf)))
		if l < 0 || l > 64<<20 {
			c.fail()
			return
		}
		if len(c.buf) < 4+l {
			return
		}
		frame := c.buf[4 : 4+l]
		switch {
		case !c.connected:
			c.connected = true
		case len(frame) >= 16 && int32(binary.BigEndian.Uint32(frame)) == -1:
			ev := frame[16:]
			if len(ev) < 12 {
				c.fail()
				return
			}
			typ := zk.EventType(int32(binary.BigEndian.Uint32(ev)))
			pl := int(int32(binary.BigEndian.Uint32(ev[8:])))
			if pl < 0 || pl > len(ev)-12 {
				c.fail()
				return
			}
			c.w.mu.Lock()
			c.w.notes = append(c.w.notes, notification{Type: typ, Path: string(ev[12 : 12+pl])})
			c.w.mu.Unlock()
		}
		c.buf = c.buf[4+l:]
	}
	if len(c.buf) == 0 {
		c.buf = nil // let the backing array go
	}
}

func (c *tapConn) fail() {
	c.broken, c.buf = true, nil
	c.w.mu.Lock()
	c.w.corrupt = true
	c.w.mu.Unlock()
}
