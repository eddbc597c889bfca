package zksession

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
	// hosts, if set, says which name an address came from (the name TLS
	// verifies, the server Connect's error names) and fails the dial of a
	// name that did not resolve at once with its lookup error.
	hosts *hostProvider
	tls   *tls.Config // nil: plaintext; set before the first Dial
	// handshakeLimit bounds the wait for a server's answer to the ZooKeeper
	// handshake (see handshakeBound), and the TLS handshake before it when
	// longer than go-zookeeper's dial timeout; 0: go-zookeeper's own
	// deadlines. Set before the first Dial.
	handshakeLimit time.Duration

	lastRead atomic.Int64 // when the last byte was read from any server (monoNow)
	// heardBy is the newest send time (monoNow) of a request that
	// a server has answered, over every connection: the server heard from
	// us at that time or later (see wireConn.heardBy).
	heardBy atomic.Int64
	info    atomic.Pointer[connectInfo]

	// lastZxid is the zxid of the last reply the session received: the
	// wire, not go-zookeeper, keeps it (see zxidBook).
	lastZxid atomic.Int64

	// writes counts the write requests (see isWriteOp) handed to any
	// connection's socket, counted before their first byte goes out: a
	// write that go-zookeeper failed while the count did not move was never
	// written (see outcome.go).
	writes atomic.Uint64

	// created holds the zxids of the latest successful creates by path
	// (see createBook); createdRing their paths in the order recorded, the
	// oldest at createdNext once it is full.
	createdMu   sync.Mutex
	created     map[string]createdNode
	createdRing []string
	createdNext int
	// gates, under createdMu: the reads waiting for a create to be
	// written (see createGateBook).
	gates createGates

	// serverOnly holds the paths whose getData requests get their watch
	// flag set on the wire (see serverOnlyBook), with a count of the
	// requests in flight for each.
	serverOnlyMu sync.Mutex
	serverOnly   map[string]int
	// serverOnlyLen is len(serverOnly), written under serverOnlyMu: most
	// of the time no such request is in flight, and a request's Write
	// then needs neither the lock nor a lookup. An addServerOnly happens
	// before the request it is for reaches the Write (go-zookeeper hands it
	// to its send loop through a channel), so that Write sees it.
	serverOnlyLen atomic.Int32

	// current is the connection dialed last: go-zookeeper reads one at a
	// time and dials the next only after the previous one's reader ended.
	current atomic.Pointer[wireConn]
	// onBroken is called (once per connection) when a read of the current
	// connection fails: the earliest moment the client can know the
	// connection is gone, before go-zookeeper's own goroutines report it.
	onBroken func()
	// onRequest, if set, is told of each request's answer or loss (the
	// Request hook); set before the first Dial.
	onRequest func(op string, d time.Duration, err error)

	mu        sync.Mutex
	conns     map[*wireConn]struct{}
	handshake map[net.Conn]struct{} // raw connections in their TLS handshake
	closed    bool
	// lastErr is the last dial error (a failed TLS handshake included), or
	// the last connection the server closed before it answered the ZooKeeper
	// handshake; for Connect's error message.
	lastErr error
}

var errWireClosed = errors.New("dialer closed")

func newWire(d zk.Dialer) *wire {
	return &wire{dial: d, conns: make(map[*wireConn]struct{}), handshake: make(map[net.Conn]struct{})}
}

func (w *wire) Dial(network, address string, timeout time.Duration) (net.Conn, error) {
	// go-zookeeper dials only once it is done with its previous connection,
	// which it leaves open after a handshake answered "expired" (its loop
	// closes a connection only after an authenticated one ends): close it
	// here, or every expiry would keep a socket until Close.
	if prev := w.current.Load(); prev != nil {
		prev.Close()
	}
	w.mu.Lock()
	closed := w.closed
	w.mu.Unlock()
	if closed {
		return nil, errWireClosed
	}
	name := address
	var c net.Conn
	var err error
	if w.hosts != nil {
		address, name, err = w.hosts.target(address)
	}
	if err == nil {
		c, err = w.dial(network, address, timeout)
	}
	if err == nil && w.tls != nil {
		c, err = w.tlsHandshake(c, name, timeout)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if err != nil {
		if !errors.Is(err, errWireClosed) {
			w.lastErr = err
			if w.hosts != nil {
				w.hosts.noteFailure(address, err)
			}
		}
		return nil, err
	}
	if w.closed {
		c.Close()
		return nil, errWireClosed
	}
	wc := newWireConn(c, w, address)
	w.conns[wc] = struct{}{}
	w.current.Store(wc)
	return wc, nil
}

// tlsHandshake runs a TLS client handshake on raw within timeout (the dial
// timeout go-zookeeper passes; none if it is not positive), or within the
// wire's handshakeLimit if that is longer: go-zookeeper's dial timeout is a
// fixed second, and a server that needs longer for its half of the handshake
// (a loaded machine, a JVM serving its first TLS connection, a long round
// trip) would otherwise be given up on at every attempt, never connected to,
// while the same server over plaintext gets handshakeLimit for its answer.
// When the config names no server, the host of the server's name (as given
// to Connect or announced by the ensemble, before it was resolved) is the
// name verified. closeAll aborts a handshake in progress, so that Close
// never waits for a silent server.
func (w *wire) tlsHandshake(raw net.Conn, address string, timeout time.Duration) (net.Conn, error) {
	if timeout > 0 && w.handshakeLimit > timeout {
		timeout = w.handshakeLimit
	}
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
			return nil, fmt.Errorf("TLS handshake with %s: %w (the server closed the connection: is it a plaintext port?)", address, err)
		}
		return nil, fmt.Errorf("TLS handshake with %s: %w", address, err)
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
	return monoTime(n)
}

// heardSince returns the send time of the newest request a server has
// answered (zero if none): the server heard from us then or later.
func (w *wire) heardSince() time.Time {
	n := w.heardBy.Load()
	if n == 0 {
		return time.Time{}
	}
	return monoTime(n)
}

// The wire's times (lastRead, heardBy, the send times of requests) are kept
// as nanoseconds since monoBase, a time with the monotonic clock's reading:
// the times made back from them (monoTime) keep that reading, so the
// deadlines computed from them (the read deadline of heardDeadline, the
// local loss timer) are not moved by a step of the wall clock. A wall clock
// set back by a minute would otherwise keep a lease held for a minute after
// the server could have expired its session.
var monoBase = time.Now().Add(-time.Second) // every monoNow is > 0

// monoNow returns the time now, as nanoseconds since monoBase.
func monoNow() int64 { return int64(time.Since(monoBase)) }

// monoTime returns the time n (from monoNow), with its monotonic reading.
func monoTime(n int64) time.Time { return monoBase.Add(time.Duration(n)) }

func (w *wire) dialError() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.lastErr
}

// currentAddr returns the address of the connection dialed last ("" if
// none): the server the session is connected to while it is up.
func (w *wire) currentAddr() string {
	if c := w.current.Load(); c != nil {
		return c.addr
	}
	return ""
}

// dropCurrent closes the connection dialed last: go-zookeeper reconnects,
// on the same session, to the next server the host provider gives.
func (w *wire) dropCurrent() {
	if c := w.current.Load(); c != nil {
		c.Close()
	}
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
		note = fmt.Errorf("%s ended the TLS connection before it answered the ZooKeeper handshake: %w", addr, err)
	} else {
		note = fmt.Errorf("%s closed the connection before it answered the ZooKeeper handshake (%w): "+
			"a port that serves only TLS does this to a plaintext client (connect with WithTLS), "+
			"and so does a server that is not serving (e.g. without a quorum)", addr, err)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.closed {
		w.lastErr = note
		if w.hosts != nil {
			w.hosts.noteFailure(addr, note)
		}
	}
}

const connectResponsePrefix = 4 + 4 + 4 + 8 // length, protocolVersion, timeOut, sessionId

// zxidBook: the wire keeps the session's last seen zxid instead of
// go-zookeeper, whose Conn.lastZxid is a plain int64 written by its receive
// goroutine and read, without synchronisation, by the goroutine that re-sends
// the watches after a reconnect (a data race that -race reports; go-zookeeper
// v1.0.4, unfixed upstream). The wire therefore
//
//   - records the zxid of each reply to a request (xid >= 0) in lastZxid and
//     zeroes it in the header before go-zookeeper reads it, so go-zookeeper
//     never writes its own copy (it only does for a zxid > 0, and uses the
//     header's zxid for nothing else);
//   - writes lastZxid into each ConnectRequest (lastZxidSeen: a server that
//     has not seen that zxid refuses the connection, which keeps reads
//     monotonic across servers) and freezes it for the connection;
//   - writes the frozen value into each SetWatches request (relativeZxid: the
//     server fires a re-set watch whose node changed after it). This is the
//     Java client's value: the last zxid seen before the connection.
//     go-zookeeper's value could also include replies on the new connection,
//     and so skip changes made while the client was away;
//   - forgets lastZxid when the server answers a ConnectRequest with session
//     id 0 (expired), as go-zookeeper does.
//
// ZooKeeper's framing: every packet is an int32 length and that many bytes. A
// reply starts with xid (int32), zxid (int64), err (int32); a request with
// xid (int32), opcode (int32); the first packet each way is the
// ConnectRequest / ConnectResponse, which have no such header.
const (
	opSetWatches = 101 // go-zookeeper's opSetWatches

	connectReqZxidAt  = 4 + 4  // length, protocolVersion, then lastZxidSeen
	setWatchesZxidAt  = 4 + 8  // length, xid, opcode, then relativeZxid
	replyXidAt        = 4      // length, then xid
	replyZxidAt       = 4 + 4  // length, xid, then zxid
	replyHeaderEnd    = 4 + 12 // the end of xid and zxid
	requestOpcodeEnd  = 4 + 8  // the end of xid and opcode
	requestXidEnd     = 4 + 4  // the end of a request's xid
	xidNotification   = -1     // the xid of a watch notification
	zxidFieldLen      = 8
	framePrefixLength = 4
)

// createBook: go-zookeeper v1.0.4 returns only the path of a create, yet
// the reply's header carries the zxid of the transaction, which is the new
// node's czxid (a server builds each write's reply right after applying it,
// one transaction at a time, with the zxid it last applied). The wire
// remembers the path asked for by each create request (opcode 1) it writes,
// and when the reply to it comes without an error, records that path with
// the reply's zxid (createdZxid hands it out once). Only a create written in
// one Write, as go-zookeeper writes every request, is remembered; the
// record keeps the last createdKept creates of the session (a burst of
// concurrent acquires on one session must find theirs). A caller that
// finds nothing reads the node instead.
const (
	opCreate       = 1  // go-zookeeper's opCreate
	requestPathAt  = 12 // length, xid, opcode, then the path (int32 length, bytes)
	replyErrEnd    = replyHeaderEnd + 4
	createdKept    = 4096
	maxCreatedPath = 4096
)

// containerBook: go-zookeeper v1.0.4's CreateContainer reads the reply's
// path after a request that Close ended early, while its receive goroutine
// may still be writing that reply into it (a data race that -race reports;
// its other calls check for ErrConnectionClosed first). The Session
// therefore creates a container with Create and the container flag, which
// go-zookeeper sends as a plain create (opcode 1) and the server would take
// for a persistent node; the wire rewrites the opcode of such a request,
// whole in one Write as go-zookeeper writes every request (a CreateRequest
// ends with its flags), to createContainer. The body is the same, and the
// reply (a path, then a Stat) decodes as a create's (a path).
const opCreateContainer = 19 // ZooKeeper's createContainer

// serverOnlyBook: a watch that go-zookeeper does not know of. go-zookeeper
// v1.0.4 keeps a channel and a map entry for every watch it sets (about 290
// bytes), which is most of what a held lease would cost with ten thousand
// leases held. For a path in serverOnly the wire sets the watch flag (the
// request's last byte) of a getData request that go-zookeeper sends without
// a watch (and of a getChildren2 or exists request, for the tree
// subscriptions of treesub.go: their bodies are also a path and the flag),
// whole in one Write as it writes every request: the server
// registers the watch, and its notification reaches the session's event
// callback (go-zookeeper passes every notification to it before it looks
// for channels, and finds none). go-zookeeper does not re-set such a watch
// after a reconnect (SetWatches lists only its own): the Session does, for
// every node subscription of WatchNode (rearmBook).
const opGetData = 4 // go-zookeeper's opGetData

// addServerOnly makes the next getData requests of path set a watch, until
// removeServerOnly.
func (w *wire) addServerOnly(path string) {
	w.serverOnlyMu.Lock()
	if w.serverOnly == nil {
		w.serverOnly = make(map[string]int)
	}
	w.serverOnly[path]++
	w.serverOnlyLen.Store(int32(len(w.serverOnly)))
	w.serverOnlyMu.Unlock()
}

// removeServerOnly undoes one addServerOnly.
func (w *wire) removeServerOnly(path string) {
	w.serverOnlyMu.Lock()
	if w.serverOnly[path] <= 1 {
		delete(w.serverOnly, path)
	} else {
		w.serverOnly[path]--
	}
	w.serverOnlyLen.Store(int32(len(w.serverOnly)))
	w.serverOnlyMu.Unlock()
}

// isServerOnly reports whether getData requests of path set a watch.
func (w *wire) isServerOnly(path []byte) bool {
	if w.serverOnlyLen.Load() == 0 {
		return false
	}
	w.serverOnlyMu.Lock()
	defer w.serverOnlyMu.Unlock()
	return w.serverOnly[string(path)] > 0 // no allocation for the lookup
}

// createdNode is one create recorded by the wire (see createBook).
type createdNode struct {
	zxid int64
	slot int // its place in createdRing
}

// recordCreated records a successful create of path at zxid.
func (w *wire) recordCreated(path string, zxid int64) {
	w.createdMu.Lock()
	defer w.createdMu.Unlock()
	if w.created == nil {
		w.created = make(map[string]createdNode)
	}
	slot := w.createdNext
	if len(w.createdRing) < createdKept {
		w.createdRing = append(w.createdRing, path)
	} else {
		old := w.createdRing[slot]
		if c, ok := w.created[old]; ok && c.slot == slot {
			delete(w.created, old) // the oldest record goes
		}
		w.createdRing[slot] = path
	}
	w.createdNext = (slot + 1) % createdKept
	w.created[path] = createdNode{zxid: zxid, slot: slot}
}

// createdZxid returns, once, the zxid of the latest successful create of
// path (as asked for) that the wire recorded, or 0.
func (w *wire) createdZxid(path string) int64 {
	w.createdMu.Lock()
	defer w.createdMu.Unlock()
	c, ok := w.created[path]
	if !ok {
		return 0
	}
	delete(w.created, path)
	w.createdRing[c.slot] = "" // keeps no path it has handed out
	return c.zxid
}

// frameCursor follows the packets of one direction of a connection across
// reads or writes of any size.
type frameCursor struct {
	first bool // in the connection's first packet
	pos   int  // bytes of the current packet seen, length prefix included
	size  int  // the packet's size, length prefix included; 0 until known
	head  [replyErrEnd]byte
}

// step moves the cursor over the start of b, as far as the end of the
// current packet, and records the bytes at the packet's first len(head)
// positions in head. It returns how many bytes of b it took (at least one
// if b is not empty), the position in the packet of the first of them, and
// whether the packet is the connection's first. The bytes taken are the
// packet's positions [from, from+n); the packet ends at max(size, 4).
func (f *frameCursor) step(b []byte) (n, from int, first bool) {
	from, first = f.pos, f.first
	if f.pos < framePrefixLength {
		n = copy(f.head[f.pos:framePrefixLength], b)
		f.pos += n
		if f.pos < framePrefixLength {
			return n, from, first
		}
		f.size = framePrefixLength + int(int32(binary.BigEndian.Uint32(f.head[:framePrefixLength])))
	}
	if m := min(len(b)-n, f.size-f.pos); m > 0 {
		if f.pos < len(f.head) {
			copy(f.head[f.pos:], b[n:n+m])
		}
		f.pos += m
		n += m
	}
	if f.pos >= f.size {
		f.pos, f.size, f.first = 0, 0, false
	}
	return n, from, first
}

// covers returns the part of the positions [lo, hi) of a packet that a step
// which took its positions [from, from+n) covered, as offsets in the bytes
// of that step: [i, j), empty if i >= j.
func covers(from, n, lo, hi int) (i, j int) {
	return max(lo, from) - from, min(hi, from+n) - from
}

// crossed reports whether a step which took the positions [from, from+n)
// of a packet took the byte at position at.
func crossed(from, n, at int) bool { return from <= at && at < from+n }

type wireConn struct {
	net.Conn
	w    *wire
	addr string

	// Only the goroutine currently reading touches these; go-zookeeper reads
	// the handshake and then the stream sequentially.
	in      frameCursor
	gotInfo bool

	dialed   time.Time   // when the connection (and its TLS handshake) was up
	answered atomic.Bool // the ConnectResponse has been read

	// Reads are buffered (see Read): go-zookeeper reads each packet in two
	// reads (its length, then the rest) and sets a read deadline around
	// each, which without a buffer costs two system calls and two deadline
	// updates per reply. rbuf holds what was read and not yet returned,
	// rerr the error that came with the last bytes.
	rmem []byte
	rbuf []byte
	rerr error
	// The read deadline go-zookeeper asked for (rdl) is applied to the
	// socket (applied) only when a read goes to the socket; one asked for
	// while a read waits there is applied at once.
	rdlMu    sync.Mutex
	rdl      time.Time
	applied  time.Time
	onSocket bool

	// What the server has certainly heard (see heardDeadline): the requests
	// written and not yet answered, in order, with their send times
	// (sent[sentHead:]; the answered ones before sentHead are cleared), and
	// when the ConnectRequest was written.
	sentMu      sync.Mutex
	sent        []sentRequest
	sentHead    int
	connectSent atomic.Int64
	// heardBy is the send time (monoNow) of the newest request answered on
	// this connection.
	heardBy atomic.Int64

	// The writers (go-zookeeper's connecting goroutine, then its send loop)
	// hold wmu.
	wmu     sync.Mutex
	out     frameCursor
	outZxid int64 // lastZxid when the ConnectRequest was written

	closeOnce  sync.Once
	brokenOnce sync.Once
}

func newWireConn(c net.Conn, w *wire, addr string) *wireConn {
	wc := &wireConn{Conn: c, w: w, addr: addr, dialed: time.Now()}
	wc.in.first = true
	wc.out.first = true
	return wc
}

// maxKeptSent is the most requests in flight whose array a connection keeps
// once none is left in flight.
const maxKeptSent = 64

// sentRequest is a request written on a connection: its xid and when, and
// for a create the path it asks for (createBook).
type sentRequest struct {
	xid    int32
	op     int32
	at     int64 // when it was written (monoNow)
	create string
}

// noteSent records a request written at at (by the writer, under wmu);
// create is the path a create asks for, else "".
func (c *wireConn) noteSent(xid, op int32, at int64, create string) {
	c.sentMu.Lock()
	if h := c.sentHead; h > 0 && len(c.sent) == cap(c.sent) && 2*h >= len(c.sent) {
		// The array is full and at least half of it answered: move the
		// requests in flight down rather than grow it, so that recording
		// requests allocates nothing. Answers come in order, so a move
		// costs no more than the answers since the last one.
		n := copy(c.sent, c.sent[h:])
		clear(c.sent[n:])
		c.sent, c.sentHead = c.sent[:n], 0
	}
	c.sent = append(c.sent, sentRequest{xid, op, at, create})
	c.sentMu.Unlock()
}

// noteAnswered takes the reply to request xid, with the zxid and error code
// of its header: that request, and those written before it whose replies
// never came, are done, and the server heard the request when it was sent
// or later. (A server answers a session's requests in the order it received
// them.) A successful create is recorded with its zxid (createBook).
func (c *wireConn) noteAnswered(xid int32, zxid int64, errCode int32) {
	var done sentRequest
	c.sentMu.Lock()
	for i, r := range c.sent[c.sentHead:] {
		if r.xid == xid {
			done = r
			// The answered requests leave from the front (cleared, so
			// that no create's path is kept); the array stays.
			clear(c.sent[c.sentHead : c.sentHead+i+1])
			c.sentHead += i + 1
			if c.sentHead == len(c.sent) {
				c.sent, c.sentHead = c.sent[:0], 0
				if cap(c.sent) > maxKeptSent {
					// A burst (a thousand waiters setting their watches
					// at once) is over: do not keep its array for good.
					c.sent = nil
				}
			}
			break
		}
	}
	c.sentMu.Unlock()
	if done.at != 0 {
		c.heard(done.at)
	}
	if done.create != "" && errCode == 0 && zxid > 0 {
		c.w.recordCreated(done.create, zxid)
	}
	if f := c.w.onRequest; f != nil && done.at != 0 {
		f(opName(done.op), time.Duration(monoNow()-done.at), replyError(errCode))
	}
}

// noteLost tells the Request hook of the requests of a closed
// connection that were never answered.
func (c *wireConn) noteLost() {
	f := c.w.onRequest
	if f == nil {
		return
	}
	c.sentMu.Lock()
	lost := c.sent[c.sentHead:]
	c.sent, c.sentHead = nil, 0
	c.sentMu.Unlock()
	now := monoNow()
	for _, r := range lost {
		f(opName(r.op), time.Duration(now-r.at), zk.ErrConnectionClosed)
	}
}

// heard records that the server has heard from us at at (monoNow)
// or later. Only the reading goroutine calls it.
func (c *wireConn) heard(at int64) {
	if at > c.heardBy.Load() {
		c.heardBy.Store(at)
	}
	for {
		old := c.w.heardBy.Load()
		if at <= old || c.w.heardBy.CompareAndSwap(old, at) {
			return
		}
	}
}

// readBufferSize is the size of a connection's read buffer: a few replies
// or notifications at once; larger reads go to the socket directly.
const readBufferSize = 16 << 10

// Read returns buffered bytes if there are any, and otherwise reads the
// socket once, into the buffer (or into p when p is at least as large),
// under the read deadline last asked for.
func (c *wireConn) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	var n int
	var err error
	switch {
	case len(c.rbuf) > 0:
		n = copy(p, c.rbuf)
		c.rbuf = c.rbuf[n:]
	case c.rerr != nil:
		err, c.rerr = c.rerr, nil
	case len(p) >= readBufferSize:
		n, err = c.readSocket(p)
	default:
		if c.rmem == nil {
			c.rmem = make([]byte, readBufferSize)
		}
		var m int
		m, c.rerr = c.readSocket(c.rmem)
		c.rbuf = c.rmem[:m]
		n = copy(p, c.rbuf)
		c.rbuf = c.rbuf[n:]
		if n == 0 {
			err, c.rerr = c.rerr, nil
		}
	}
	if n > 0 {
		c.scanReplies(p[:n])
	}
	if err != nil && !c.gotInfo && c.in.first && c.in.pos == 0 {
		_, isTLS := c.Conn.(*tls.Conn)
		c.w.noteUnanswered(c.addr, isTLS, err)
	}
	if err != nil && c.w.onBroken != nil && c.w.current.Load() == c {
		c.brokenOnce.Do(c.w.onBroken)
	}
	return n, err
}

// readSocket reads the socket once into b, under the read deadline asked
// for last, and records when the server was last heard from.
func (c *wireConn) readSocket(b []byte) (int, error) {
	c.rdlMu.Lock()
	c.onSocket = true
	err := c.applyLocked()
	c.rdlMu.Unlock()
	var n int
	if err == nil {
		n, err = c.Conn.Read(b)
	}
	c.rdlMu.Lock()
	c.onSocket = false
	c.rdlMu.Unlock()
	if n > 0 {
		c.w.lastRead.Store(monoNow())
	}
	return n, err
}

// applyLocked sets the socket's read deadline to the one asked for, if it
// differs. c.rdlMu held.
//
// Once the handshake is answered, the deadline is also never later than
// heardDeadline.
func (c *wireConn) applyLocked() error {
	d := c.rdl
	if hd, ok := c.heardDeadline(); ok && (d.IsZero() || hd.Before(d)) {
		d = hd
	}
	if d.Equal(c.applied) {
		return nil
	}
	if err := c.Conn.SetReadDeadline(d); err != nil {
		return err
	}
	c.applied = d
	return nil
}

// heardDeadline is when the connection stops being safe to hold leases on:
// two thirds of the negotiated session timeout after the send time of the
// newest request the server has answered. go-zookeeper gives up on a
// connection two thirds of the timeout after it last read anything; but an
// answer read now may be to a request sent long before (a slow network, a
// server or a proxy that held it up), and the server expires the session one
// timeout after it last heard from us, which may be as early as that send
// time. So a connection whose answers lag their requests by a third of the
// timeout or more (go-zookeeper pings every third of it) is given up as
// well, before the server can expire the session under leases that still
// look held; go-zookeeper then reconnects.
func (c *wireConn) heardDeadline() (time.Time, bool) {
	hb := c.heardBy.Load()
	ci := c.w.info.Load()
	if hb == 0 || ci == nil || ci.timeout <= 0 || !c.answered.Load() {
		return time.Time{}, false
	}
	return monoTime(hb).Add(ci.timeout * 2 / 3), true
}

// SetReadDeadline passes t on, except while the server has not answered the
// ZooKeeper handshake: go-zookeeper then waits up to 10 × ⅔ of the session
// timeout for the ConnectResponse, so a member that accepts connections but
// never answers (frozen, or stalled) would keep the client from every other
// member for that long. The wait is cut to the wire's handshakeLimit, counted
// from the dial; go-zookeeper then fails the handshake and dials the next
// server.
//
// go-zookeeper clears its deadline once it has read the response's length
// and reads the rest without one; until the response is read, a cleared
// deadline is the bound too.
//
// The deadline reaches the socket when a read next goes to it (at once if a
// read is waiting there): reads served from the buffer need none.
func (c *wireConn) SetReadDeadline(t time.Time) error {
	if lim := c.w.handshakeLimit; lim > 0 && !c.answered.Load() {
		if end := c.dialed.Add(lim); t.IsZero() || t.After(end) {
			t = end
		}
	}
	c.rdlMu.Lock()
	defer c.rdlMu.Unlock()
	c.rdl = t
	if c.onSocket {
		return c.applyLocked()
	}
	return nil
}

// SetDeadline is SetReadDeadline for both directions (go-zookeeper does not
// use it; a caller that does gets the same bound on the handshake read).
func (c *wireConn) SetDeadline(t time.Time) error {
	if err := c.Conn.SetWriteDeadline(t); err != nil {
		return err
	}
	return c.SetReadDeadline(t)
}

// handshakeBound returns the wire's handshakeLimit for a session timeout
// over n servers: the timeout divided among the servers, as the Java client
// bounds its connect (ClientCnxn's connectTimeout), but at least a second
// (or the whole timeout, if shorter), so that a server slow to answer a
// handshake under load is not given up on too early.
func handshakeBound(timeout time.Duration, n int) time.Duration {
	if n < 1 {
		n = 1
	}
	return max(timeout/time.Duration(n), min(timeout, time.Second))
}

// scanReplies reads the ConnectResponse (timeout, session id) and takes the
// zxid out of each reply header (zxidBook), in b as go-zookeeper is given
// it: a header may be cut anywhere (go-zookeeper reads each packet's length
// first, then the rest), so the cursor keeps its bytes until it has all.
func (c *wireConn) scanReplies(b []byte) {
	for len(b) > 0 {
		n, from, first := c.in.step(b)
		if first {
			if crossed(from, n, connectResponsePrefix-1) {
				c.connectAnswered(&c.in.head)
			}
		} else {
			if i, j := covers(from, n, replyZxidAt, replyZxidAt+zxidFieldLen); i < j {
				clear(b[i:j])
			}
			if crossed(from, n, replyErrEnd-1) {
				c.replied(&c.in.head)
			}
		}
		b = b[n:]
	}
}

// connectAnswered takes the ConnectResponse's header h (length,
// protocolVersion, timeOut, sessionId).
func (c *wireConn) connectAnswered(h *[replyErrEnd]byte) {
	timeoutMs := int32(binary.BigEndian.Uint32(h[8:12]))
	id := int64(binary.BigEndian.Uint64(h[12:20]))
	c.gotInfo = true
	if id == 0 {
		c.w.lastZxid.Store(0)
	}
	c.w.info.Store(&connectInfo{sessionID: id, timeout: time.Duration(timeoutMs) * time.Millisecond})
	if timeoutMs > 0 {
		// A session accepted (a reconnecting one revalidated on the
		// ensemble's leader): the server heard us when we asked, or
		// later. Not an expired one's answer, which must not move a lease
		// deadline (leaseDeadline).
		c.heard(c.connectSent.Load())
	}
	c.answered.Store(true)
}

// replied takes a reply's header h as the server sent it (length, xid,
// zxid, err).
func (c *wireConn) replied(h *[replyErrEnd]byte) {
	xid := int32(binary.BigEndian.Uint32(h[replyXidAt:replyZxidAt]))
	zxid := int64(binary.BigEndian.Uint64(h[replyZxidAt:replyHeaderEnd]))
	if xid >= 0 && zxid > 0 {
		c.w.lastZxid.Store(zxid)
	}
	if xid != xidNotification {
		c.noteAnswered(xid, zxid, int32(binary.BigEndian.Uint32(h[replyHeaderEnd:replyErrEnd])))
	}
}

// Write sends p, with the wire's zxid written into a ConnectRequest and into
// SetWatches requests (zxidBook). p itself is never modified.
func (c *wireConn) Write(p []byte) (int, error) {
	now := monoNow()
	c.wmu.Lock()
	var create string
	var container bool // p is a container's create, its opcode rewritten
	var out []byte     // a patched copy of p, if any byte changes
	if !c.out.first && c.out.pos == 0 && len(p) >= requestPathAt+4 {
		n := int(int32(binary.BigEndian.Uint32(p[requestPathAt : requestPathAt+4])))
		switch int32(binary.BigEndian.Uint32(p[8:requestOpcodeEnd])) {
		case opCreate:
			if int(binary.BigEndian.Uint32(p[:framePrefixLength])) == len(p)-framePrefixLength &&
				int32(binary.BigEndian.Uint32(p[len(p)-4:])) == zk.FlagContainer {
				// A container's create, whole in p (containerBook).
				out = patch(out, p, requestOpcodeEnd-1, opCreateContainer)
				container = true
				break
			}
			// A create, whole in p as go-zookeeper writes it (createBook,
			// createGateBook).
			if n > 0 && n <= maxCreatedPath && requestPathAt+4+n <= len(p) {
				create = string(p[requestPathAt+4 : requestPathAt+4+n])
				c.w.createWritten(p[requestPathAt+4 : requestPathAt+4+n])
			}
		case opGetData, opGetChildren2, opExists:
			// A getData (getChildren2, exists), whole in p: length, xid,
			// opcode, path, watch flag (serverOnlyBook).
			end := requestPathAt + 4 + n
			if n > 0 && end+1 == len(p) && int(binary.BigEndian.Uint32(p[:framePrefixLength])) == len(p)-framePrefixLength &&
				p[end] == 0 && c.w.isServerOnly(p[requestPathAt+4:end]) {
				out = patch(out, p, end, 1)
			}
		}
	}
	// The packets in p, or the parts of them, one at a time; a header may
	// be cut anywhere, and the cursor keeps its bytes until it has all.
	for off := 0; off < len(p); {
		n, from, first := c.out.step(p[off:])
		h := &c.out.head
		if first {
			if from == 0 {
				c.outZxid = c.w.lastZxid.Load()
				c.connectSent.Store(now)
			}
			out = c.patchZxid(out, p, off, from, n, connectReqZxidAt)
		} else {
			if crossed(from, n, requestOpcodeEnd-1) {
				op := int32(binary.BigEndian.Uint32(h[requestXidEnd:requestOpcodeEnd]))
				if container {
					op, container = opCreateContainer, false // as sent
				}
				if isWriteOp(op) {
					c.w.writes.Add(1) // before the socket sees a byte of it (outcome.go)
				}
				c.noteSent(int32(binary.BigEndian.Uint32(h[framePrefixLength:requestXidEnd])), op, now, create)
				create = "" // a later packet in p is not this create
			}
			// Positions 8 to 11 (the opcode) are in head once the step
			// reached position 12.
			if from < setWatchesZxidAt+zxidFieldLen && from+n > setWatchesZxidAt &&
				int32(binary.BigEndian.Uint32(h[8:requestOpcodeEnd])) == opSetWatches {
				out = c.patchZxid(out, p, off, from, n, setWatchesZxidAt)
			}
		}
		off += n
	}
	c.wmu.Unlock()
	if out == nil {
		return c.Conn.Write(p)
	}
	return c.Conn.Write(out)
}

// patchZxid writes the connection's frozen zxid (outZxid) into the bytes
// of a packet's zxid field at positions [at, at+8) that a step took: the
// step took the packet's positions [from, from+n) from p at offset off. out
// and the result are as for patch.
func (c *wireConn) patchZxid(out, p []byte, off, from, n, at int) []byte {
	i, j := covers(from, n, at, at+zxidFieldLen)
	for k := i; k < j; k++ {
		out = patch(out, p, off+k, zxidByte(c.outZxid, from+k-at))
	}
	return out
}

// patch returns out with byte i set to v, where out is nil or a copy of p
// being patched: a copy of p is made only when a byte differs from p's.
func patch(out, p []byte, i int, v byte) []byte {
	if out == nil {
		if p[i] == v {
			return nil
		}
		out = append([]byte(nil), p...)
	}
	out[i] = v
	return out
}

// zxidByte is byte k (0: most significant) of z in big-endian order.
func zxidByte(z int64, k int) byte {
	return byte(uint64(z) >> (8 * (7 - k)))
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
		c.noteLost()
	})
	return err
}
