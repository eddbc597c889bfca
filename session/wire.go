package session

import (
	"encoding/binary"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"
)

// connectInfo is what the server said in a ConnectResponse.
type connectInfo struct {
	sessionID int64
	timeout   time.Duration
}

// wire wraps the user's dialer. It learns the negotiated timeout and session id
// of each connection by reading the first frame the server sends (the
// ConnectResponse: int32 length, int32 protocolVersion, int32 timeOut, int64
// sessionId, passwd), records when the server was last heard from, and can
// force every connection closed so that Close never waits on a silent server.
type wire struct {
	dial zk.Dialer

	lastRead atomic.Int64 // unix nanoseconds of the last byte read from any server
	info     atomic.Pointer[connectInfo]

	// current is the connection dialed last: go-zookeeper reads one at a
	// time and dials the next only after the previous one's reader ended.
	current atomic.Pointer[wireConn]
	// onBroken is called (once per connection) when a read of the current
	// connection fails: the earliest moment the client can know the
	// connection is gone, before go-zookeeper's own goroutines report it.
	onBroken func()

	mu      sync.Mutex
	conns   map[*wireConn]struct{}
	closed  bool
	lastErr error // last dial error, for Connect's error message
}

var errWireClosed = errors.New("session: dialer closed")

func newWire(d zk.Dialer) *wire {
	return &wire{dial: d, conns: make(map[*wireConn]struct{})}
}

func (w *wire) Dial(network, address string, timeout time.Duration) (net.Conn, error) {
	w.mu.Lock()
	closed := w.closed
	w.mu.Unlock()
	if closed {
		return nil, errWireClosed
	}
	c, err := w.dial(network, address, timeout)
	w.mu.Lock()
	defer w.mu.Unlock()
	if err != nil {
		w.lastErr = err
		return nil, err
	}
	if w.closed {
		c.Close()
		return nil, errWireClosed
	}
	wc := &wireConn{Conn: c, w: w}
	w.conns[wc] = struct{}{}
	w.current.Store(wc)
	return wc, nil
}

// lastHeard returns when the server was last heard from (zero if never).
func (w *wire) lastHeard() time.Time {
	n := w.lastRead.Load()
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n)
}

func (w *wire) dialError() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.lastErr
}

// closeAll refuses new connections and closes the open ones, which unblocks
// go-zookeeper's goroutines if they wait on a silent server.
func (w *wire) closeAll() {
	w.mu.Lock()
	w.closed = true
	conns := make([]*wireConn, 0, len(w.conns))
	for c := range w.conns {
		conns = append(conns, c)
	}
	w.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
}

const connectResponsePrefix = 4 + 4 + 4 + 8 // length, protocolVersion, timeOut, sessionId

type wireConn struct {
	net.Conn
	w *wire

	// Only the goroutine currently reading touches these; go-zookeeper reads
	// the handshake and then the stream sequentially.
	hdr  [connectResponsePrefix]byte
	nhdr int

	closeOnce  sync.Once
	brokenOnce sync.Once
}

func (c *wireConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.w.lastRead.Store(time.Now().UnixNano())
		if c.nhdr < len(c.hdr) {
			c.nhdr += copy(c.hdr[c.nhdr:], p[:n])
			if c.nhdr == len(c.hdr) {
				timeoutMs := int32(binary.BigEndian.Uint32(c.hdr[8:12]))
				id := int64(binary.BigEndian.Uint64(c.hdr[12:20]))
				c.w.info.Store(&connectInfo{sessionID: id, timeout: time.Duration(timeoutMs) * time.Millisecond})
			}
		}
	}
	if err != nil && c.w.onBroken != nil && c.w.current.Load() == c {
		c.brokenOnce.Do(c.w.onBroken)
	}
	return n, err
}

func (c *wireConn) Close() error {
	var err error
	c.closeOnce.Do(func() {
		err = c.Conn.Close()
		c.w.mu.Lock()
		delete(c.w.conns, c)
		c.w.mu.Unlock()
	})
	return err
}
