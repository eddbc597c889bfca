package zktest

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/go-zookeeper/zk"
)

// Operation codes, as found in a request header (Request.Op) and as
// Tap.Requests counts them: those of the requests the recipes send and tests
// hook or count most. OpName names every code, these and the others
// (OpName(r.Op) == "exists").
const (
	// OpCreate creates a node (go-zookeeper's Create and the protected
	// creates built on it).
	OpCreate int32 = 1
	// OpDelete deletes a node.
	OpDelete int32 = 2
	// OpGetData reads a node's data (Get, and GetW, which sets a data watch).
	OpGetData int32 = 4
	// OpPing is the client's heartbeat (xid -2), sent every third of the
	// session timeout; Tap.Requests does not count it.
	OpPing int32 = 11
	// OpGetChildren2 lists a node's children with its Stat (go-zookeeper's
	// Children and ChildrenW).
	OpGetChildren2 int32 = 12
	// OpMulti is a transaction of several operations (Request.Path is the
	// first one's path).
	OpMulti int32 = 14
	// OpCreate2 creates a node and returns its Stat, as the Java client's
	// create with a Stat argument does; go-zookeeper v1.0.4 does not send it.
	OpCreate2 int32 = 15
)

// The other operation codes of ZooKeeper 3.8 (ZooDefs.OpCode).
const (
	opNotify          int32 = 0
	opExists          int32 = 3
	opSetData         int32 = 5
	opGetACL          int32 = 6
	opSetACL          int32 = 7
	opGetChildren     int32 = 8
	opSync            int32 = 9
	opCheck           int32 = 13
	opReconfig        int32 = 16
	opCheckWatches    int32 = 17
	opRemoveWatches   int32 = 18
	opCreateContainer int32 = 19
	opCreateTTL       int32 = 21
	opMultiRead       int32 = 22
	opSetAuth         int32 = 100
	opSetWatches      int32 = 101
	opSetWatches2     int32 = 105
	opAddWatch        int32 = 106
	opCloseSession    int32 = -11
)

// opNames are ZooKeeper's names for the operation codes (ZooDefs.OpCode).
var opNames = map[int32]string{
	opNotify: "notification", OpCreate: "create", OpDelete: "delete", opExists: "exists",
	OpGetData: "getData", opSetData: "setData", opGetACL: "getACL", opSetACL: "setACL",
	opGetChildren: "getChildren", opSync: "sync", OpPing: "ping", OpGetChildren2: "getChildren2",
	opCheck: "check", OpMulti: "multi", OpCreate2: "create2", opReconfig: "reconfig",
	opCheckWatches: "checkWatches", opRemoveWatches: "removeWatches",
	opCreateContainer: "createContainer", opCreateTTL: "createTTL", opMultiRead: "multiRead",
	opSetAuth: "setAuth", opSetWatches: "setWatches", opSetWatches2: "setWatches2",
	opAddWatch: "addWatch", opCloseSession: "closeSession",
}

// OpName returns the name of a ZooKeeper operation code as ZooKeeper spells
// it ("create", "getChildren2", "setWatches"...), or "op<n>" for a code it
// does not know.
func OpName(op int32) string {
	if n, ok := opNames[op]; ok {
		return n
	}
	return fmt.Sprintf("op%d", op)
}

// Special xids.
const (
	xidWatchEvent int32 = -1
	xidPing       int32 = -2
)

// maxFrame bounds a frame's length; a longer "length" means the stream is not
// ZooKeeper's framed protocol (a four-letter word) and is relayed raw.
const maxFrame = 64 << 20

// pathOps are the operations whose request body begins with a path.
var pathOps = map[int32]bool{
	OpCreate: true, OpDelete: true, opExists: true, OpGetData: true, opSetData: true,
	opGetACL: true, opSetACL: true, opGetChildren: true, opSync: true, OpGetChildren2: true,
	opCheck: true, OpCreate2: true, opCheckWatches: true, opRemoveWatches: true,
	opCreateContainer: true, opCreateTTL: true, opAddWatch: true,
}

// parseRequest decodes the header (and path) of a client frame (length prefix
// included). For multi the path of the first operation is returned.
func parseRequest(frame []byte) (Request, bool) {
	b := frame[4:]
	if len(b) < 8 {
		return Request{}, false
	}
	r := Request{xid: int32(binary.BigEndian.Uint32(b)), Op: int32(binary.BigEndian.Uint32(b[4:]))}
	body := b[8:]
	if r.Op == OpMulti {
		// MultiHeader{type int32, done bool, err int32} then the op's body.
		if len(body) < 9 {
			return r, true
		}
		op := int32(binary.BigEndian.Uint32(body))
		if body[4] != 0 || !pathOps[op] {
			return r, true
		}
		body = body[9:]
	} else if !pathOps[r.Op] {
		return r, true
	}
	r.Path, _ = readString(body)
	return r, true
}

func readString(b []byte) (string, bool) {
	if len(b) < 4 {
		return "", false
	}
	n := int32(binary.BigEndian.Uint32(b))
	if n < 0 || int(n) > len(b)-4 {
		return "", false
	}
	return string(b[4 : 4+n]), true
}

// replyXid returns the xid of a server frame (length prefix included).
func replyXid(frame []byte) (int32, bool) {
	if len(frame) < 8 {
		return 0, false
	}
	return int32(binary.BigEndian.Uint32(frame[4:])), true
}

// parseConnectResponse decodes a ConnectResponse body (without the length
// prefix): protocolVersion int32, timeOut int32, sessionId int64, passwd.
func parseConnectResponse(body []byte) (SessionCreds, error) {
	if len(body) < 20 {
		return SessionCreds{}, errors.New("zktest: short connect response")
	}
	timeout := int32(binary.BigEndian.Uint32(body[4:]))
	id := int64(binary.BigEndian.Uint64(body[8:]))
	n := int32(binary.BigEndian.Uint32(body[16:]))
	if n < 0 || int(n) > len(body)-20 {
		return SessionCreds{}, errors.New("zktest: bad password length in connect response")
	}
	pw := append([]byte(nil), body[20:20+n]...)
	return SessionCreds{ID: id, password: pw, timeout: time.Duration(timeout) * time.Millisecond}, nil
}

// connectRequest encodes a framed ConnectRequest.
func connectRequest(c SessionCreds) []byte {
	b := make([]byte, 4, 4+4+8+4+8+4+len(c.password)+1)
	b = binary.BigEndian.AppendUint32(b, 0) // protocolVersion
	b = binary.BigEndian.AppendUint64(b, 0) // lastZxidSeen
	b = binary.BigEndian.AppendUint32(b, uint32(c.timeout.Milliseconds()))
	b = binary.BigEndian.AppendUint64(b, uint64(c.ID))
	b = binary.BigEndian.AppendUint32(b, uint32(len(c.password)))
	b = append(b, c.password...)
	b = append(b, 0) // readOnly
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	return b
}

// newSessionRequest returns a copy of a framed ConnectRequest (protocolVersion
// int32, lastZxidSeen int64, timeOut int32, sessionId int64, passwd) that asks
// for a new session: session id and password zeroed. A frame too short to be
// one is returned unchanged.
func newSessionRequest(frame []byte) []byte {
	const idAt = 4 + 4 + 8 + 4
	if len(frame) < idAt+8+4 {
		return frame
	}
	out := append([]byte(nil), frame...)
	clear(out[idAt : idAt+8])
	n := int(int32(binary.BigEndian.Uint32(out[idAt+8:])))
	if n > 0 && idAt+12+n <= len(out) {
		clear(out[idAt+12 : idAt+12+n])
	}
	return out
}

// frameLen returns the body length announced by a frame's 4-byte prefix.
func frameLen(prefix []byte) (int, error) {
	n := int32(binary.BigEndian.Uint32(prefix))
	if n < 0 || n > maxFrame {
		return 0, fmt.Errorf("zktest: bad frame length %d", n)
	}
	return int(n), nil
}

// readFrame reads one length-prefixed frame and returns it with its prefix.
func readFrame(r io.Reader) ([]byte, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	n, err := frameLen(hdr[:])
	if err != nil {
		return nil, err
	}
	f := make([]byte, 4+n)
	copy(f, hdr[:])
	if _, err := io.ReadFull(r, f[4:]); err != nil {
		return nil, err
	}
	return f, nil
}

// parseWatcherEvent decodes a notification frame (length prefix included): a
// ReplyHeader (xid int32, zxid int64, err int32) then a WatcherEvent (type
// int32, state int32, path string).
func parseWatcherEvent(frame []byte) (Notification, error) {
	const hdr = 4 + 16
	if len(frame) < hdr+8 {
		return Notification{}, errors.New("zktest: short watch notification")
	}
	ev := frame[hdr:]
	path, ok := readString(ev[8:])
	if !ok {
		return Notification{}, errors.New("zktest: bad path in watch notification")
	}
	return Notification{
		Type:  zk.EventType(int32(binary.BigEndian.Uint32(ev))),
		State: zk.State(int32(binary.BigEndian.Uint32(ev[4:]))),
		Path:  path,
	}, nil
}

// frameScanner cuts a ZooKeeper stream, fed in arbitrary pieces as it passes,
// into frames; it never holds up or changes the stream. Of each frame it
// collects the length prefix and the first peek bytes of the body and asks
// head whether it wants the whole frame; frames it does not want are skipped,
// not buffered, so large replies and requests cost no copy. After the first
// error (a bad length, or one returned by head or whole) it ignores the rest
// of the stream. It is not safe for concurrent use.
type frameScanner struct {
	peek int
	// head is given frame n (counted from 0) up to its first peek body bytes,
	// prefix included; it reports whether the whole frame is wanted.
	head func(n int, h []byte) (bool, error)
	// whole is given frame n complete, prefix included, when head wanted it.
	whole func(n int, f []byte) error

	n    int    // frames done
	buf  []byte // the current frame so far (prefix included)
	need int    // length buf must reach before the next step
	size int    // the current frame's length, prefix included; 0 until the prefix is in
	keep bool   // collecting the whole current frame
	skip int    // bytes of the current frame still to pass over
	err  error
}

func newFrameScanner(peek int, head func(int, []byte) (bool, error), whole func(int, []byte) error) *frameScanner {
	return &frameScanner{peek: peek, head: head, whole: whole, need: 4}
}

// feed consumes p and returns the scanner's error, if any.
func (s *frameScanner) feed(p []byte) error {
	for s.err == nil {
		if s.skip > 0 {
			k := min(s.skip, len(p))
			s.skip, p = s.skip-k, p[k:]
			if s.skip > 0 {
				return nil
			}
			s.next()
			continue
		}
		if len(s.buf) < s.need {
			k := min(s.need-len(s.buf), len(p))
			s.buf, p = append(s.buf, p[:k]...), p[k:]
			if len(s.buf) < s.need {
				return nil
			}
		}
		switch {
		case s.size == 0: // the prefix is in
			l, err := frameLen(s.buf)
			if err != nil {
				s.err = err
				break
			}
			s.size, s.need = 4+l, 4+min(l, s.peek)
		case !s.keep: // the head is in
			want, err := s.head(s.n, s.buf)
			switch {
			case err != nil:
				s.err = err
			case want:
				s.keep, s.need = true, s.size
			default:
				s.skip = s.size - len(s.buf)
				if s.skip == 0 {
					s.next()
				}
			}
		default: // the whole frame is in
			s.err = s.whole(s.n, s.buf)
			s.next()
		}
	}
	s.buf = nil
	return s.err
}

// next gets ready for the following frame.
func (s *frameScanner) next() {
	s.n++
	s.buf = s.buf[:0]
	if cap(s.buf) > 4<<10 {
		s.buf = nil // do not hold on to one large frame's buffer
	}
	s.need, s.size, s.keep, s.skip = 4, 0, false, 0
}
