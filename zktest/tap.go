package zktest

import (
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
)

// Tap wraps a client's dialer and watches the ZooKeeper wire of every
// connection made through it, on the client side, without altering the byte
// stream. It records:
//
//   - the session credentials in every ConnectResponse (go-zookeeper has no
//     password accessor): Last, Sessions;
//   - the connection attempts: Dials;
//   - the requests the client writes, by operation: Requests;
//   - the watch notifications the server sends: Notifications.
//
// Frames are parsed as the bytes pass: a notification or credentials are
// recorded before the Read that delivers them returns to the client, and a
// request is counted before its bytes are written. A stream that cannot be
// parsed stops being observed (its bytes still pass) and Err reports it.
// It is safe for concurrent use.
type Tap struct {
	base zk.Dialer

	mu       sync.Mutex
	sessions []SessionCreds
	dials    int
	requests map[int32]int64
	notes    []Notification
	err      error
}

// Notification is one watch notification as the server sent it: a frame with
// xid -1 and a WatcherEvent body.
type Notification struct {
	Type  zk.EventType
	State zk.State
	// Path is the server's path: it includes any chroot the client hides.
	Path string
}

// NewTap returns a Tap over net.DialTimeout.
func NewTap() *Tap { return NewTapWith(net.DialTimeout) }

// NewTapWith returns a Tap over base (for example a TLS dialer); a nil base
// means net.DialTimeout.
func NewTapWith(base zk.Dialer) *Tap {
	if base == nil {
		base = net.DialTimeout
	}
	return &Tap{base: base, requests: make(map[int32]int64)}
}

// Dialer returns the wrapping dialer, for zk.WithDialer or session.WithDialer.
func (t *Tap) Dialer() zk.Dialer {
	return func(network, address string, timeout time.Duration) (net.Conn, error) {
		t.mu.Lock()
		t.dials++
		id := t.dials
		t.mu.Unlock()
		c, err := t.base(network, address, timeout)
		if err != nil {
			return nil, err
		}
		return newTapConn(c, t, id), nil
	}
}

// Last returns the credentials of the most recent session established
// through the tap; false if there was none.
func (t *Tap) Last() (SessionCreds, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.sessions) == 0 {
		return SessionCreds{}, false
	}
	return t.sessions[len(t.sessions)-1], true
}

// Sessions returns every session seen, oldest first, one entry per id.
func (t *Tap) Sessions() []SessionCreds {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]SessionCreds(nil), t.sessions...)
}

// Dials returns how many connections the client tried to open through the
// tap, failed attempts included (a refused reconnect counts).
func (t *Tap) Dials() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.dials
}

// Requests returns a copy of the number of requests the client has written,
// by operation code (OpCreate, OpGetData...; see OpName), over every
// connection. Counted: every frame after a connection's ConnectRequest, by
// the op in its header, whatever its xid: the requests the client sends on
// its own (setWatches after a reconnect, setAuth; other clients give those a
// negative xid) and closeSession included. Not counted: the ConnectRequest
// (it has no request header) and pings (xid -2 or OpPing), which depend on
// time, not on work. A multi counts once, as OpMulti.
func (t *Tap) Requests() map[int32]int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make(map[int32]int64, len(t.requests))
	for op, n := range t.requests {
		out[op] = n
	}
	return out
}

// Notifications returns the watch notifications received since the tap was
// made or ResetNotifications, oldest first, and Err: with an error, some
// notifications may be missing.
func (t *Tap) Notifications() ([]Notification, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]Notification(nil), t.notes...), t.err
}

// ResetNotifications forgets the notifications received so far.
func (t *Tap) ResetNotifications() {
	t.mu.Lock()
	t.notes = nil
	t.mu.Unlock()
}

// Err returns the first parse failure on any connection (a stream that is not
// ZooKeeper's framed protocol, or a malformed frame), or nil. After a failure
// that direction of that connection is no longer observed.
func (t *Tap) Err() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.err
}

func (t *Tap) record(c SessionCreds) {
	if c.ID == 0 { // the server refused the session (expired)
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for i, s := range t.sessions {
		if s.ID == c.ID {
			// move to the end: it is the most recent
			t.sessions = append(t.sessions[:i], t.sessions[i+1:]...)
			break
		}
	}
	t.sessions = append(t.sessions, c)
}

func (t *Tap) fail(err error) {
	t.mu.Lock()
	if t.err == nil {
		t.err = err
	}
	t.mu.Unlock()
}

// tapConn feeds what the client reads and writes to one scanner per
// direction. go-zookeeper reads from one goroutine and writes from another;
// the locks make other uses safe too.
type tapConn struct {
	net.Conn
	tap *Tap
	id  int // dial number, for errors

	rmu sync.Mutex
	in  *frameScanner // server to client
	wmu sync.Mutex
	out *frameScanner // client to server
}

func newTapConn(c net.Conn, t *Tap, id int) *tapConn {
	tc := &tapConn{Conn: c, tap: t, id: id}
	// Replies: the xid tells a notification (kept whole) from a reply
	// (skipped); the first frame is the ConnectResponse.
	tc.in = newFrameScanner(4, func(n int, h []byte) (bool, error) {
		if n == 0 {
			return true, nil
		}
		xid, ok := replyXid(h)
		if !ok {
			return false, fmt.Errorf("zktest: short reply (%d bytes)", len(h)-4)
		}
		return xid == xidWatchEvent, nil
	}, func(n int, f []byte) error {
		if n == 0 {
			creds, err := parseConnectResponse(f[4:])
			if err != nil {
				return err
			}
			t.record(creds)
			return nil
		}
		ev, err := parseWatcherEvent(f)
		if err != nil {
			return err
		}
		t.mu.Lock()
		t.notes = append(t.notes, ev)
		t.mu.Unlock()
		return nil
	})
	// Requests: the header (xid, op) is all that is needed; the first frame
	// is the ConnectRequest.
	tc.out = newFrameScanner(8, func(n int, h []byte) (bool, error) {
		if n == 0 {
			return false, nil
		}
		req, ok := parseRequest(h)
		if !ok {
			return false, fmt.Errorf("zktest: short request (%d bytes)", len(h)-4)
		}
		if req.Xid == xidPing || req.Op == OpPing {
			return false, nil
		}
		t.mu.Lock()
		t.requests[req.Op]++
		t.mu.Unlock()
		return false, nil
	}, nil)
	return tc
}

func (c *tapConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if n > 0 {
		c.rmu.Lock()
		if c.in.err == nil {
			if perr := c.in.feed(b[:n]); perr != nil {
				c.tap.fail(fmt.Errorf("zktest: tap: connection %d: server stream: %w", c.id, perr))
			}
		}
		c.rmu.Unlock()
	}
	return n, err
}

func (c *tapConn) Write(b []byte) (int, error) {
	// Held across the write so that concurrent writers are parsed in the
	// order their bytes go out.
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.out.err == nil {
		if perr := c.out.feed(b); perr != nil {
			c.tap.fail(fmt.Errorf("zktest: tap: connection %d: client stream: %w", c.id, perr))
		}
	}
	return c.Conn.Write(b)
}
