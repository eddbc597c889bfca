package zktest

import (
	"encoding/binary"
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
//     password accessor): Sessions;
//   - the connection attempts: Dials;
//   - the requests the client writes, by operation: Requests;
//   - the watch notifications the server sends: Notifications;
//   - the watches the client holds: Watches.
//
// Frames are parsed as the bytes pass: a notification or credentials are
// recorded before the Read that delivers them returns to the client, and a
// request is counted before its bytes are written. A stream that cannot be
// parsed stops being observed (its bytes still pass) and Notifications
// reports it: a tap observes plaintext connections only (under
// session.WithTLS its connections carry TLS records). It is safe for
// concurrent use.
type Tap struct {
	base zk.Dialer

	mu       sync.Mutex
	sessions []SessionCreds
	dials    int
	requests map[int32]int64
	notes    []Notification
	err      error
	sid      int64            // the session of the last ConnectResponse
	watches  map[watchKey]int // client-side watch registrations, see Watches
}

// watchKey is one of go-zookeeper's watcher lists: a path and a watch type.
type watchKey struct {
	path string
	kind watchKind
}

// watchKind mirrors go-zookeeper v1.0.4's watch types.
type watchKind uint8

const (
	watchData  watchKind = iota // GetW, ExistsW on an existing node
	watchExist                  // ExistsW on a missing node
	watchChild                  // ChildrenW
)

// zkErrNoNode is ZooKeeper's error code for a missing node in a reply header.
const zkErrNoNode int32 = -101

// Notification is one watch notification as the server sent it (a frame
// with xid -1 and a WatcherEvent body), in go-zookeeper's form: Type, State
// and Path, the server's path, which includes any chroot the client hides.
type Notification = zk.Event

// NewTap returns a Tap whose Dialer dials with net.DialTimeout.
func NewTap() *Tap {
	return &Tap{base: net.DialTimeout, requests: make(map[int32]int64), watches: make(map[watchKey]int)}
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

// Sessions returns the credentials of every session established through the
// tap, one entry per session id, by the time each was last established
// (a reconnect to a session moves it to the end): the last entry is the
// client's current or latest session.
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
// made or ResetNotifications, oldest first, and the first parse failure on
// any connection (a stream that is not ZooKeeper's framed protocol, such as
// TLS, or a malformed frame), or nil. After a failure that direction of that
// connection is no longer observed, so notifications, requests and watches
// may be missing from every record of the tap: check the error before
// trusting Requests or Watches too.
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

// Watches returns the watches the client holds now, by server path: how
// many watcher registrations go-zookeeper keeps for each path (all watch
// types together), as the tap infers them from the wire.
//
// go-zookeeper v1.0.4 cannot remove a watch. Each GetW, ExistsW or ChildrenW
// whose reply succeeds (for ExistsW, also a reply "no node") adds one channel
// to the client's list for that path and watch type, even when the same
// path is already watched; the server, which keeps one watch per path, type
// and session, says nothing of it. The list goes only when a notification for
// that path and type arrives (NodeCreated clears exists-watches;
// NodeDataChanged clears exists- and data-watches; NodeChildrenChanged clears
// child-watches; NodeDeleted clears all three), or when the session expires
// (every list goes). A reconnect to the same session keeps them. The tap
// applies the same rules to the requests with the watch flag, their replies
// (matched by xid on their connection) and the notifications it sees, so a
// count that only grows means channels that pile up in the client.
func (t *Tap) Watches() map[string]int {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make(map[string]int)
	for k, n := range t.watches {
		out[k.path] += n
	}
	return out
}

// watchCount returns the total of Watches: every watcher registration the
// client holds now.
func (t *Tap) watchCount() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, c := range t.watches {
		n += c
	}
	return n
}

func (t *Tap) record(c SessionCreds) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if c.ID == 0 || c.ID != t.sid {
		// The session expired (the server refuses it) or a new one began:
		// go-zookeeper drops every watcher when it learns of the expiry.
		clear(t.watches)
	}
	if c.ID == 0 { // the server refused the session (expired)
		return
	}
	t.sid = c.ID
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

	// pending are this connection's requests with the watch flag, by xid,
	// until their reply (guarded by tap.mu).
	pending map[int32]pendingWatch
}

// pendingWatch is a request with the watch flag awaiting its reply.
type pendingWatch struct {
	op   int32
	path string
}

func newTapConn(c net.Conn, t *Tap, id int) *tapConn {
	tc := &tapConn{Conn: c, tap: t, id: id, pending: make(map[int32]pendingWatch)}
	// Replies: the xid tells a notification (kept whole) from a reply
	// (skipped, after its header has settled a pending watch); the first
	// frame is the ConnectResponse.
	tc.in = newFrameScanner(replyHeaderLen, func(n int, h []byte) (bool, error) {
		if n == 0 {
			return true, nil
		}
		xid, ok := replyXid(h)
		if !ok {
			return false, fmt.Errorf("zktest: short reply (%d bytes)", len(h)-4)
		}
		if xid == xidWatchEvent {
			return true, nil
		}
		tc.settle(xid, h)
		return false, nil
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
		t.fired(ev)
		t.mu.Unlock()
		return nil
	})
	// Requests: the header (xid, op) is enough to count them; reads that may
	// carry the watch flag are taken whole (they are small) to learn it. The
	// first frame is the ConnectRequest.
	tc.out = newFrameScanner(8, func(n int, h []byte) (bool, error) {
		if n == 0 {
			return false, nil
		}
		req, ok := parseRequest(h)
		if !ok {
			return false, fmt.Errorf("zktest: short request (%d bytes)", len(h)-4)
		}
		if req.xid == xidPing || req.Op == OpPing {
			return false, nil
		}
		t.mu.Lock()
		t.requests[req.Op]++
		t.mu.Unlock()
		return watchOps[req.Op], nil
	}, func(n int, f []byte) error {
		req, _ := parseRequest(f)
		if !watchFlag(f, req.Path) {
			return nil
		}
		t.mu.Lock()
		tc.pending[req.xid] = pendingWatch{op: req.Op, path: req.Path}
		t.mu.Unlock()
		return nil
	})
	return tc
}

// replyHeaderLen is the length of a ReplyHeader: xid int32, zxid int64,
// err int32.
const replyHeaderLen = 16

// watchOps are the requests whose body is a path and a watch flag.
var watchOps = map[int32]bool{OpGetData: true, opExists: true, opGetChildren: true, OpGetChildren2: true}

// watchFlag reports whether the request frame f (prefix included) whose
// body starts with path has its watch flag set.
func watchFlag(f []byte, path string) bool {
	i := 4 + 8 + 4 + len(path) // prefix, header, path length, path
	return len(f) > i && f[i] != 0
}

// settle registers the watch of the pending request xid, if any, as
// go-zookeeper does on its reply: on success, or for an exists on a missing
// node (an exists-watch). h is the reply's prefix and header.
func (tc *tapConn) settle(xid int32, h []byte) {
	t := tc.tap
	t.mu.Lock()
	defer t.mu.Unlock()
	pw, ok := tc.pending[xid]
	if !ok {
		return
	}
	delete(tc.pending, xid)
	if len(h) < 4+replyHeaderLen {
		return
	}
	k := watchKey{path: pw.path, kind: watchData}
	if pw.op == opGetChildren || pw.op == OpGetChildren2 {
		k.kind = watchChild
	}
	switch code := int32(binary.BigEndian.Uint32(h[4+12:])); {
	case code == 0:
	case code == zkErrNoNode && pw.op == opExists:
		k.kind = watchExist
	default:
		return
	}
	t.watches[k]++
}

// fired removes the watcher lists a notification empties, as go-zookeeper's
// notifyWatches does. t.mu must be held.
func (t *Tap) fired(ev Notification) {
	var kinds []watchKind
	switch ev.Type {
	case zk.EventNodeCreated:
		kinds = []watchKind{watchExist}
	case zk.EventNodeDataChanged:
		kinds = []watchKind{watchExist, watchData}
	case zk.EventNodeChildrenChanged:
		kinds = []watchKind{watchChild}
	case zk.EventNodeDeleted:
		kinds = []watchKind{watchExist, watchData, watchChild}
	}
	for _, k := range kinds {
		delete(t.watches, watchKey{path: ev.Path, kind: k})
	}
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
