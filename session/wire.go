package session

import (
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
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

// wire wraps the user's dialer, adding TLS on top of it when tls is set
// (WithTLS). It learns the negotiated timeout and session id
// of each connection by reading the first frame the server sends (the
// ConnectResponse: int32 length, int32 protocolVersion, int32 timeOut, int64
// sessionId, passwd), records when the server was last heard from, and can
// force every connection closed so that Close never waits on a silent server.
type wire struct {
	dial zk.Dialer
	tls  *tls.Config // nil: plaintext; set before the first Dial

	lastRead atomic.Int64 // unix nanoseconds of the last byte read from any server
	info     atomic.Pointer[connectInfo]

	// current is the connection dialed last: go-zookeeper reads one at a
	// time and dials the next only after the previous one's reader ended.
	current atomic.Pointer[wireConn]
	// onBroken is called (once per connection) when a read of the current
	// connection fails: the earliest moment the client can know the
	// connection is gone, before go-zookeeper's own goroutines report it.
	onBroken func()

	mu        sync.Mutex
	conns     map[*wireConn]struct{}
	handshake map[net.Conn]struct{} // raw connections in their TLS handshake
	closed    bool
	// lastErr is the last dial error (a failed TLS handshake included), or
	// the last connection the server closed before it answered the ZooKeeper
	// handshake; for Connect's error message.
	lastErr error
}

var errWireClosed = errors.New("session: dialer closed")

func newWire(d zk.Dialer) *wire {
	return &wire{dial: d, conns: make(map[*wireConn]struct{}), handshake: make(map[net.Conn]struct{})}
}

func (w *wire) Dial(network, address string, timeout time.Duration) (net.Conn, error) {
	w.mu.Lock()
	closed := w.closed
	w.mu.Unlock()
	if closed {
		return nil, errWireClosed
	}
	c, err := w.dial(network, address, timeout)
	if err == nil && w.tls != nil {
		c, err = w.tlsHandshake(c, address, timeout)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if err != nil {
		if !errors.Is(err, errWireClosed) {
			w.lastErr = err
		}
		return nil, err
	}
	if w.closed {
		c.Close()
		return nil, errWireClosed
	}
	wc := &wireConn{Conn: c, w: w, addr: address}
	w.conns[wc] = struct{}{}
	w.current.Store(wc)
	return wc, nil
}

// tlsHandshake runs a TLS client handshake on raw within timeout (the dial
// timeout go-zookeeper passes; none if it is not positive). When the config
// names no server, the address's host is the name verified. closeAll aborts a
// handshake in progress, so that Close never waits for a silent server.
func (w *wire) tlsHandshake(raw net.Conn, address string, timeout time.Duration) (net.Conn, error) {
	cfg := w.tls
	if cfg.ServerName == "" {
		host, _, err := net.SplitHostPort(address)
		if err != nil {
			host = address
		}
		cfg = cfg.Clone()
		cfg.ServerName = host
	}
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		raw.Close()
		return nil, errWireClosed
	}
	w.handshake[raw] = struct{}{}
	w.mu.Unlock()
	defer func() {
		w.mu.Lock()
		delete(w.handshake, raw)
		w.mu.Unlock()
	}()
	if timeout > 0 {
		_ = raw.SetDeadline(time.Now().Add(timeout))
	}
	tc := tls.Client(raw, cfg)
	if err := tc.Handshake(); err != nil {
		raw.Close()
		w.mu.Lock()
		closed := w.closed
		w.mu.Unlock()
		if closed {
			return nil, errWireClosed
		}
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, fmt.Errorf("session: TLS handshake with %s: %w (the server closed the connection: is it a plaintext port?)", address, err)
		}
		return nil, fmt.Errorf("session: TLS handshake with %s: %w", address, err)
	}
	_ = raw.SetDeadline(time.Time{})
	return tc, nil
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
	raws := make([]net.Conn, 0, len(w.handshake))
	for c := range w.handshake {
		raws = append(raws, c)
	}
	w.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
	for _, c := range raws {
		c.Close()
	}
}

// noteUnanswered records, for Connect's error message, that the server at
// addr ended a connection before the first byte of its ConnectResponse: what
// a TLS-only port does to a plaintext client (it sends no alert), and also
// what a server that does not serve yet does. Our own closing and read
// timeouts (a silent server) are not recorded.
func (w *wire) noteUnanswered(addr string, tlsConn bool, err error) {
	var ne net.Error
	if errors.Is(err, net.ErrClosed) || (errors.As(err, &ne) && ne.Timeout()) {
		return
	}
	var note error
	if tlsConn {
		note = fmt.Errorf("session: %s ended the TLS connection before it answered the ZooKeeper handshake: %w", addr, err)
	} else {
		note = fmt.Errorf("session: %s closed the connection before it answered the ZooKeeper handshake (%w): "+
			"a port that serves only TLS does this to a plaintext client (connect with WithTLS), "+
			"and so does a server that is not serving (e.g. without a quorum)", addr, err)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.closed {
		w.lastErr = note
	}
}

const connectResponsePrefix = 4 + 4 + 4 + 8 // length, protocolVersion, timeOut, sessionId

type wireConn struct {
	net.Conn
	w    *wire
	addr string

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
	if err != nil && c.nhdr == 0 {
		_, isTLS := c.Conn.(*tls.Conn)
		c.w.noteUnanswered(c.addr, isTLS, err)
	}
	if err != nil && c.w.onBroken != nil && c.w.current.Load() == c {
		c.brokenOnce.Do(c.w.onBroken)
	}
	return n, err
}

func (c *wireConn) Close() error {
	var err error
	c.closeOnce.Do(func() {
		if tc, ok := c.Conn.(*tls.Conn); ok {
			// Without a close_notify alert: tls.Conn.Close writes one and
			// may wait up to 5 s for a server that reads nothing (frozen),
			// and ZooKeeper does not need it.
			err = tc.NetConn().Close()
		} else {
			err = c.Conn.Close()
		}
		c.w.mu.Lock()
		delete(c.w.conns, c)
		c.w.mu.Unlock()
	})
	return err
}
