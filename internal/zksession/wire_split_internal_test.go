package zksession

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"reflect"
	"slices"
	"testing"
	"time"
)

// The wire follows packets across reads and writes cut anywhere: these tests
// feed the same streams in one piece, in the pieces go-zookeeper uses, cut
// at every byte boundary, byte by byte and in chunks of every size up to past
// a header, and require the same bytes and the same bookkeeping (zxids,
// answered requests and their send times, creates, error codes, write
// counts, the cursor) every time.

// memConn is a net.Conn in memory: Read returns what is in in (io.EOF once
// it is empty), Write keeps what it is given in out when keep is set.
type memConn struct {
	in   []byte
	out  []byte
	keep bool
}

func (m *memConn) Read(p []byte) (int, error) {
	if len(m.in) == 0 {
		return 0, io.EOF
	}
	n := copy(p, m.in)
	m.in = m.in[n:]
	return n, nil
}

func (m *memConn) Write(p []byte) (int, error) {
	if m.keep {
		m.out = append(m.out, p...)
	}
	return len(p), nil
}

func (m *memConn) Close() error                     { return nil }
func (m *memConn) LocalAddr() net.Addr              { return &net.TCPAddr{} }
func (m *memConn) RemoteAddr() net.Addr             { return &net.TCPAddr{} }
func (m *memConn) SetDeadline(time.Time) error      { return nil }
func (m *memConn) SetReadDeadline(time.Time) error  { return nil }
func (m *memConn) SetWriteDeadline(time.Time) error { return nil }

// memWire dials a wire over m and returns the wire's connection.
func memWire(tb testing.TB, m *memConn) *wireConn {
	tb.Helper()
	w := newWire(func(string, string, time.Duration) (net.Conn, error) { return m, nil })
	c, err := w.Dial("tcp", "x:1", time.Second)
	if err != nil {
		tb.Fatal(err)
	}
	return c.(*wireConn)
}

// frame prefixes b with its length.
func frame(b ...[]byte) []byte {
	body := bytes.Join(b, nil)
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...)
}

func i32(v int32) []byte { return binary.BigEndian.AppendUint32(nil, uint32(v)) }
func i64(v int64) []byte { return binary.BigEndian.AppendUint64(nil, uint64(v)) }

// zkString is a path or data as go-zookeeper encodes it: length, bytes.
func zkString(s string) []byte { return append(i32(int32(len(s))), s...) }

// request is a request packet: xid, opcode, body.
func request(xid, op int32, body ...[]byte) []byte {
	return frame(append([][]byte{i32(xid), i32(op)}, body...)...)
}

// reply is a reply packet: xid, zxid, err, body.
func reply(xid int32, zxid int64, errCode int32, body ...[]byte) []byte {
	return frame(append([][]byte{i32(xid), i64(zxid), i32(errCode)}, body...)...)
}

// createRequest is a create of path as go-zookeeper writes it: path, data,
// an empty ACL list, flags.
func createRequest(xid int32, path string) []byte {
	return request(xid, opCreate, zkString(path), zkString("data"), i32(0), i32(3))
}

// wireBook is what the wire has recorded, for comparing runs.
type wireBook struct {
	LastZxid, HeardBy, WireHeardBy int64
	Info                           connectInfo
	GotInfo, Answered              bool
	Writes                         uint64
	Pending                        []sentRequest // at kept only when fixed by the test
	Created                        map[string]int64
	Hook                           []string
	Cursor                         [2]frameCursor // in, out: pos, size, first (head omitted)
	Bytes                          []byte
}

func bookOf(c *wireConn, hook []string, b []byte, keepAt bool) wireBook {
	bk := wireBook{
		LastZxid: c.w.lastZxid.Load(), HeardBy: c.heardBy.Load(), WireHeardBy: c.w.heardBy.Load(),
		GotInfo: c.gotInfo, Answered: c.answered.Load(), Writes: c.w.writes.Load(),
		Created: map[string]int64{}, Hook: hook, Bytes: b,
	}
	if ci := c.w.info.Load(); ci != nil {
		bk.Info = *ci
	}
	for _, r := range pendingSent(c) {
		if !keepAt {
			r.at = 0
		}
		bk.Pending = append(bk.Pending, r)
	}
	c.w.createdMu.Lock()
	for p, n := range c.w.created {
		bk.Created[p] = n.zxid
	}
	c.w.createdMu.Unlock()
	for i, f := range []frameCursor{c.in, c.out} {
		bk.Cursor[i] = frameCursor{first: f.first, pos: f.pos, size: f.size}
	}
	return bk
}

// pendingSent returns a copy of the requests c has written and not yet seen
// answered, oldest first.
func pendingSent(c *wireConn) []sentRequest {
	c.sentMu.Lock()
	defer c.sentMu.Unlock()
	return append([]sentRequest(nil), c.sent[c.sentHead:]...)
}

// cuts returns the ways to cut a stream of n bytes that the tests use, each
// as the lengths of its pieces: whole, at every byte boundary into two, byte
// by byte, and in chunks of 2 to replyErrEnd+2 bytes.
func cuts(n int) (names []string, pieces [][]int) {
	names, pieces = append(names, "whole"), append(pieces, []int{n})
	for k := 1; k < n; k++ {
		names, pieces = append(names, fmt.Sprintf("cut at %d", k)), append(pieces, []int{k, n - k})
	}
	for size := 1; size <= replyErrEnd+2; size++ {
		var p []int
		for left := n; left > 0; left -= size {
			p = append(p, min(size, left))
		}
		names, pieces = append(names, fmt.Sprintf("chunks of %d", size)), append(pieces, p)
	}
	return names, pieces
}

// replyStream is what a server sends on a connection, with the requests it
// answers: the ConnectResponse; a create's answer (recorded); a
// notification (its zxid is not the session's); a failed create's answer
// (not recorded); a ping's; a reply that skips an unanswered request; two
// packets shorter than a reply header (the wire only zeroes what of bytes 8
// to 15 they have); a reply with zxid 0 (not the session's last); an auth
// reply (a positive xid not in flight), and a reply whose header's last
// bytes end the stream.
func replyStream() (stream []byte, sent []sentRequest) {
	sent = []sentRequest{
		{xid: 1, op: opCreate, at: 1000, create: "/a/lock-"},
		{xid: 2, op: opCreate, at: 2000, create: "/b"},
		{xid: -2, op: 11, at: 3000},
		{xid: 3, op: opGetData, at: 4000},
		{xid: 4, op: 2, at: 5000},
		{xid: 5, op: opGetChildren2, at: 6000},
		{xid: 6, op: opCreate, at: 7000, create: "/c"},
		{xid: 7, op: opGetData, at: 8000},
	}
	connResp := frame(i32(0), i32(4000), i64(0x1234abcd), zkString("0123456789abcdef"))
	stream = bytes.Join([][]byte{
		connResp,
		reply(1, 0x100, 0, zkString("/a/lock-0000000001")),
		reply(-1, 0x999, 0, i32(1), i32(3), zkString("/a")),
		reply(2, 0x101, -101),
		reply(-2, 0x77, 0),
		reply(4, 0x102, 0), // xid 3's answer never came
		frame(i32(5), []byte{9, 9}),
		frame(),
		reply(5, 0, 0, zkString("child"), bytes.Repeat([]byte{7}, 68)),
		reply(6, 0x103, 0, zkString("/c")),
		reply(100, 0x104, 0),
		reply(7, 0x105, 0),
	}, nil)
	return stream, sent
}

// scanRun feeds stream to a new connection's reader in pieces of the given
// lengths, after recording sent as its requests in flight.
func scanRun(t *testing.T, stream []byte, sent []sentRequest, pieces []int) wireBook {
	c := memWire(t, &memConn{})
	var hook []string
	c.w.onRequest = func(op string, _ time.Duration, err error) { hook = append(hook, fmt.Sprintf("%s %v", op, err)) }
	c.connectSent.Store(500)
	for _, r := range sent {
		c.noteSent(r.xid, r.op, r.at, r.create)
	}
	b := append([]byte(nil), stream...)
	for at, i := 0, 0; i < len(pieces); at, i = at+pieces[i], i+1 {
		c.scanReplies(b[at : at+pieces[i]])
	}
	return bookOf(c, hook, b, true)
}

func TestWireRepliesCutAnywhere(t *testing.T) {
	stream, sent := replyStream()
	want := scanRun(t, stream, sent, []int{len(stream)})

	// What the whole stream must give.
	if want.Info != (connectInfo{sessionID: 0x1234abcd, timeout: 4 * time.Second}) || !want.GotInfo || !want.Answered {
		t.Fatalf("ConnectResponse read as %+v (got %v, answered %v)", want.Info, want.GotInfo, want.Answered)
	}
	if want.LastZxid != 0x105 {
		t.Errorf("lastZxid %#x, want 0x105 (the last reply's)", want.LastZxid)
	}
	if want.HeardBy != 8000 || want.WireHeardBy != 8000 {
		t.Errorf("heardBy %d (wire %d), want 8000: the send time of the last request answered", want.HeardBy, want.WireHeardBy)
	}
	if len(want.Pending) != 0 {
		t.Errorf("requests still in flight: %+v", want.Pending)
	}
	if !reflect.DeepEqual(want.Created, map[string]int64{"/a/lock-": 0x100, "/c": 0x103}) {
		t.Errorf("creates recorded %v, want /a/lock- at 0x100 and /c at 0x103 (not the failed /b)", want.Created)
	}
	wantHook := []string{"create <nil>", "create zk: node does not exist", "ping <nil>", "delete <nil>",
		"getChildren2 <nil>", "create <nil>", "getData <nil>"}
	if !reflect.DeepEqual(want.Hook, wantHook) {
		t.Errorf("Request hook saw\n%q\nwant\n%q", want.Hook, wantHook)
	}
	// Every header's zxid is zeroed, nothing else changes: the short
	// packets lose what they have of bytes 8 to 15, the ConnectResponse
	// nothing.
	zeroed := append([]byte(nil), stream...)
	for at, first := 0, true; at < len(zeroed); first = false {
		size := 4 + int(int32(binary.BigEndian.Uint32(zeroed[at:])))
		if !first && size > replyZxidAt {
			clear(zeroed[at+replyZxidAt : at+min(size, replyHeaderEnd)])
		}
		at += size
	}
	if !bytes.Equal(want.Bytes, zeroed) {
		t.Fatalf("read\n%x\nwant\n%x", want.Bytes, zeroed)
	}
	if want.Cursor[0] != (frameCursor{}) {
		t.Errorf("cursor %+v after whole packets", want.Cursor[0])
	}

	names, pieces := cuts(len(stream))
	for i := range pieces {
		if got := scanRun(t, stream, sent, pieces[i]); !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: recorded\n%+v\nwant, as from the whole stream,\n%+v", names[i], got, want)
		}
	}

	// The stream cut off in a header: the cursor is in that packet.
	for k := 1; k < len(stream); k++ {
		got := scanRun(t, stream[:k], sent, []int{k})
		if cut := scanRun(t, stream[:k], sent, []int{k / 2, k - k/2}); !reflect.DeepEqual(got, cut) {
			t.Fatalf("stream cut off at %d, read in two pieces: recorded\n%+v\nwant\n%+v", k, cut, got)
		}
	}
}

// Through Read, as go-zookeeper reads (a packet's length, then the rest),
// from the wire's buffer: the same bytes and bookkeeping.
func TestWireRepliesThroughRead(t *testing.T) {
	stream, sent := replyStream()
	want := scanRun(t, stream, sent, []int{len(stream)})

	m := &memConn{in: append([]byte(nil), stream...)}
	c := memWire(t, m)
	var hook []string
	c.w.onRequest = func(op string, _ time.Duration, err error) { hook = append(hook, fmt.Sprintf("%s %v", op, err)) }
	c.connectSent.Store(500)
	for _, r := range sent {
		c.noteSent(r.xid, r.op, r.at, r.create)
	}
	var got []byte
	buf := make([]byte, 256)
	for {
		if _, err := io.ReadFull(c, buf[:4]); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		n := int(int32(binary.BigEndian.Uint32(buf[:4])))
		if _, err := io.ReadFull(c, buf[4:4+n]); err != nil {
			t.Fatal(err)
		}
		got = append(got, buf[:4+n]...)
	}
	if bk := bookOf(c, hook, got, true); !reflect.DeepEqual(bk, want) {
		t.Fatalf("read as go-zookeeper reads: recorded\n%+v\nwant\n%+v", bk, want)
	}
}

// requestStream is what go-zookeeper writes on a connection, one request
// per Write: the ConnectRequest (its lastZxidSeen is go-zookeeper's, every
// byte differing from the wire's);
// a create; a getData of a path whose watch only the server holds; a
// SetWatches (relativeZxid go-zookeeper's); a setData (a write); a ping; a delete; a
// packet shorter than a request header; a create whose path is longer than
// the wire records; an exists of the server-only path with a watch already
// set; a close.
// The zxids of requestStream: go-zookeeper's, and the wire's last.
const (
	gozkZxid = 0x0102030405060708
	wireZxid = 0x5566778899aabbcc
)

func requestStream() [][]byte {
	return [][]byte{
		frame(i32(0), i64(gozkZxid), i32(4000), i64(0), zkString("0123456789abcdef")),
		createRequest(1, "/a/lock-"),
		request(2, opGetData, zkString("/so"), []byte{0}),
		request(3, opSetWatches, i64(gozkZxid), i32(0), i32(0), i32(0)),
		request(4, 5, zkString("/a"), zkString("x"), i32(-1)),
		request(-2, 11),
		request(5, 2, zkString("/a/lock-0000000001"), i32(-1)),
		frame(i32(6), []byte{0, 0}),
		createRequest(7, "/"+string(bytes.Repeat([]byte{'x'}, maxCreatedPath))),
		request(8, opExists, zkString("/so"), []byte{1}),
		request(9, -11),
	}
}

// writeRun writes the requests to a new connection in the given pieces of
// their concatenation, and returns what the wire recorded and wrote.
func writeRun(t *testing.T, reqs [][]byte, pieces []int) wireBook {
	m := &memConn{keep: true}
	c := memWire(t, m)
	c.w.lastZxid.Store(wireZxid)
	c.w.addServerOnly("/so")
	stream := bytes.Join(reqs, nil)
	orig := append([]byte(nil), stream...)
	for at, i := 0, 0; i < len(pieces); at, i = at+pieces[i], i+1 {
		if _, err := c.Write(stream[at : at+pieces[i]]); err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(stream, orig) {
		t.Fatal("Write modified the caller's buffer")
	}
	if c.outZxid != wireZxid {
		t.Fatalf("zxid frozen for the connection %#x, want %#x", c.outZxid, wireZxid)
	}
	return bookOf(c, nil, m.out, false)
}

func TestWireRequestsCutAnywhere(t *testing.T) {
	reqs := requestStream()
	var perPacket []int
	for _, r := range reqs {
		perPacket = append(perPacket, len(r))
	}
	want := writeRun(t, reqs, perPacket)

	// What go-zookeeper's one request per Write must give.
	wantPending := []sentRequest{
		{xid: 1, op: opCreate, create: "/a/lock-"}, {xid: 2, op: opGetData}, {xid: 3, op: opSetWatches},
		{xid: 4, op: 5}, {xid: -2, op: 11}, {xid: 5, op: 2}, {xid: 7, op: opCreate}, {xid: 8, op: opExists},
		{xid: 9, op: -11},
	}
	if !reflect.DeepEqual(want.Pending, wantPending) {
		t.Errorf("requests recorded\n%+v\nwant\n%+v", want.Pending, wantPending)
	}
	if want.Writes != 4 {
		t.Errorf("%d writes counted, want 4 (two creates, a setData, a delete)", want.Writes)
	}
	sent := bytes.Join(reqs, nil)
	at := len(reqs[0])
	binary.BigEndian.PutUint64(sent[connectReqZxidAt:], wireZxid)
	at += len(reqs[1])
	flagAt := at + len(reqs[2]) - 1
	sent[flagAt] = 1 // the server-only watch
	at += len(reqs[2])
	binary.BigEndian.PutUint64(sent[at+setWatchesZxidAt:], wireZxid)
	if !bytes.Equal(want.Bytes, sent) {
		t.Fatalf("wrote\n%x\nwant\n%x", want.Bytes, sent)
	}
	if want.Cursor[1] != (frameCursor{}) {
		t.Errorf("cursor %+v after whole packets", want.Cursor[1])
	}

	// Cut anywhere else, the same bytes go out and the same requests are
	// recorded and counted; but a create's path is taken only from a Write
	// that starts with the create and holds its path, and the watch flag is
	// set only in a getData written alone (createBook, serverOnlyBook).
	createAt, getDataAt := len(reqs[0]), len(reqs[0])+len(reqs[1])
	names, pieces := cuts(len(sent))
	for i := range pieces {
		w := want
		w.Bytes = append([]byte(nil), want.Bytes...)
		w.Pending = append([]sentRequest(nil), want.Pending...)
		starts := map[int]int{} // where each Write starts: its length
		for at, k := 0, 0; k < len(pieces[i]); at, k = at+pieces[i][k], k+1 {
			starts[at] = pieces[i][k]
		}
		if n, ok := starts[createAt]; !ok || n < requestPathAt+4+len("/a/lock-") {
			w.Pending[0].create = ""
		}
		if starts[getDataAt] != len(reqs[2]) {
			w.Bytes[flagAt] = 0
		}
		if got := writeRun(t, reqs, pieces[i]); !reflect.DeepEqual(got, w) {
			t.Fatalf("%s: recorded\n%+v\nwant\n%+v", names[i], got, w)
		}
	}

	// Each request alone cut at every byte boundary, the others written
	// whole: the same, but for the create and the getData so cut.
	for p := 1; p < len(reqs); p++ {
		for k := 1; k < len(reqs[p]); k++ {
			var split []int
			for q, r := range reqs {
				if q == p {
					split = append(split, k, len(r)-k)
				} else {
					split = append(split, len(r))
				}
			}
			w := want
			w.Bytes = append([]byte(nil), want.Bytes...)
			w.Pending = append([]sentRequest(nil), want.Pending...)
			if p == 1 && k < requestPathAt+4+len("/a/lock-") {
				w.Pending[0].create = ""
			}
			if p == 2 {
				w.Bytes[flagAt] = 0
			}
			if got := writeRun(t, reqs, split); !reflect.DeepEqual(got, w) {
				t.Fatalf("request %d cut at %d: recorded\n%+v\nwant\n%+v", p, k, got, w)
			}
		}
	}
}

// The requests in flight stay in the order written as they are answered
// (an answer also ends every request written before it), whatever the
// array holding them does, and recording and answering them in a steady
// flow allocates nothing.
func TestWireSentQueue(t *testing.T) {
	c := memWire(t, &memConn{})
	var model []int32
	xid := int32(0)
	check := func(when string) {
		t.Helper()
		var got []int32
		for _, r := range pendingSent(c) {
			got = append(got, r.xid)
		}
		if !slices.Equal(got, model) {
			t.Fatalf("%s: in flight %v, want %v", when, got, model)
		}
	}
	answer := func(x int32) {
		c.noteAnswered(x, 0, 0)
		for i, m := range model {
			if m == x {
				model = model[i+1:]
				break
			}
		}
	}
	// Bursts of up to 150 in flight, answered one, two or three at a time,
	// or not at all (an xid no longer in flight).
	for round := 0; round < 40; round++ {
		for k := 0; k < round*37%150+1; k++ {
			xid++
			c.noteSent(xid, 4, 1, "")
			model = append(model, xid)
		}
		check(fmt.Sprintf("round %d written", round))
		for len(model) > round%7 {
			answer(model[min(round%3, len(model)-1)])
			if len(model) > 0 {
				answer(model[0] - 1)
			}
			check(fmt.Sprintf("round %d answered", round))
		}
	}
	for len(model) > 0 {
		answer(model[0])
	}
	check("all answered")
	if c.sent != nil && cap(c.sent) > maxKeptSent {
		t.Errorf("an array of %d kept after a burst", cap(c.sent))
	}

	// Ten in flight, one written as one is answered.
	for range 10 {
		xid++
		c.noteSent(xid, 4, 1, "")
	}
	if n := testing.AllocsPerRun(1000, func() {
		xid++
		c.noteSent(xid, 4, 1, "")
		c.noteAnswered(xid-10, 0, 0)
	}); n != 0 {
		t.Errorf("%v allocations per request in a steady flow, want 0", n)
	}
}

// A getData written whole gets the watch flag while its path has more
// addServerOnly than removeServerOnly calls, and only then.
func TestWireServerOnlyCounts(t *testing.T) {
	m := &memConn{keep: true}
	c := memWire(t, m)
	if _, err := c.Write(frame(i32(0), i64(0), i32(4000), i64(0), zkString("0123456789abcdef"))); err != nil {
		t.Fatal(err)
	}
	flag := func(path string) byte {
		t.Helper()
		m.out = m.out[:0]
		req := request(1, opGetData, zkString(path), []byte{0})
		if _, err := c.Write(req); err != nil {
			t.Fatal(err)
		}
		return m.out[len(req)-1]
	}
	w := c.w
	for _, tc := range []struct {
		do       func()
		a, other byte
	}{
		{func() {}, 0, 0},
		{func() { w.addServerOnly("/a") }, 1, 0},
		{func() { w.addServerOnly("/a") }, 1, 0},
		{func() { w.removeServerOnly("/a") }, 1, 0},
		{func() { w.removeServerOnly("/a") }, 0, 0},
		{func() { w.removeServerOnly("/a") }, 0, 0}, // one too many
		{func() { w.addServerOnly("/b") }, 0, 0},
		{func() { w.addServerOnly("/a") }, 1, 0},
		{func() { w.removeServerOnly("/b"); w.removeServerOnly("/a") }, 0, 0},
	} {
		tc.do()
		if a, other := flag("/a"), flag("/other"); a != tc.a || other != tc.other {
			t.Fatalf("watch flags /a %d, /other %d, want %d and %d (%d paths held)", a, other, tc.a, tc.other, w.serverOnlyLen.Load())
		}
	}
	if n := w.serverOnlyLen.Load(); n != 0 {
		t.Errorf("%d paths held after as many removes as adds", n)
	}
}
