package zktest

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"time"
)

// ZooKeeper operation codes, as found in a request header (Request.Op).
const (
	OpNotify          int32 = 0
	OpCreate          int32 = 1
	OpDelete          int32 = 2
	OpExists          int32 = 3
	OpGetData         int32 = 4
	OpSetData         int32 = 5
	OpGetACL          int32 = 6
	OpSetACL          int32 = 7
	OpGetChildren     int32 = 8
	OpSync            int32 = 9
	OpPing            int32 = 11
	OpGetChildren2    int32 = 12
	OpCheck           int32 = 13
	OpMulti           int32 = 14
	OpCreate2         int32 = 15
	OpReconfig        int32 = 16
	OpCheckWatches    int32 = 17
	OpRemoveWatches   int32 = 18
	OpCreateContainer int32 = 19
	OpCreateTTL       int32 = 21
	OpMultiRead       int32 = 22
	OpSetAuth         int32 = 100
	OpSetWatches      int32 = 101
	OpSetWatches2     int32 = 105
	OpAddWatch        int32 = 106
	OpCloseSession    int32 = -11
)

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
	OpCreate: true, OpDelete: true, OpExists: true, OpGetData: true, OpSetData: true,
	OpGetACL: true, OpSetACL: true, OpGetChildren: true, OpSync: true, OpGetChildren2: true,
	OpCheck: true, OpCreate2: true, OpCheckWatches: true, OpRemoveWatches: true,
	OpCreateContainer: true, OpCreateTTL: true, OpAddWatch: true,
}

// parseRequest decodes the header (and path) of a client frame (length prefix
// included). For multi the path of the first operation is returned.
func parseRequest(frame []byte) (Request, bool) {
	b := frame[4:]
	if len(b) < 8 {
		return Request{}, false
	}
	r := Request{Xid: int32(binary.BigEndian.Uint32(b)), Op: int32(binary.BigEndian.Uint32(b[4:]))}
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
	return SessionCreds{ID: id, Password: pw, Timeout: time.Duration(timeout) * time.Millisecond}, nil
}

// connectRequest encodes a framed ConnectRequest.
func connectRequest(c SessionCreds) []byte {
	b := make([]byte, 4, 4+4+8+4+8+4+len(c.Password)+1)
	b = binary.BigEndian.AppendUint32(b, 0) // protocolVersion
	b = binary.BigEndian.AppendUint64(b, 0) // lastZxidSeen
	b = binary.BigEndian.AppendUint32(b, uint32(c.Timeout.Milliseconds()))
	b = binary.BigEndian.AppendUint64(b, uint64(c.ID))
	b = binary.BigEndian.AppendUint32(b, uint32(len(c.Password)))
	b = append(b, c.Password...)
	b = append(b, 0) // readOnly
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	return b
}

// readFrame reads one length-prefixed frame and returns it with its prefix.
func readFrame(r io.Reader) ([]byte, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	n := int32(binary.BigEndian.Uint32(hdr[:]))
	if n < 0 || n > maxFrame {
		return nil, fmt.Errorf("zktest: bad frame length %d", n)
	}
	f := make([]byte, 4+int(n))
	copy(f, hdr[:])
	if _, err := io.ReadFull(r, f[4:]); err != nil {
		return nil, err
	}
	return f, nil
}
