package zksession

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
)

func TestStateAndPolicyStrings(t *testing.T) {
	want := map[State]string{Connected: "Connected", Suspended: "Suspended", Reconnected: "Reconnected",
		Lost: "Lost", ReadOnly: "ReadOnly", Closed: "Closed", 0: "State(0)", 42: "State(42)"}
	for st, s := range want {
		if st.String() != s {
			t.Errorf("%d.String() = %q, want %q", int32(st), st.String(), s)
		}
	}
	if Standard.String() != "standard" || SessionOnly.String() != "session-only" || LossPolicy(9).String() != "LossPolicy(9)" {
		t.Error("LossPolicy strings")
	}
}

// The wire reads the negotiated timeout and session id from the first frame
// the server sends, even when it arrives in small pieces, and records when
// it last read anything.
func TestWireSniffsConnectResponse(t *testing.T) {
	client, server := net.Pipe()
	defer server.Close()
	w := newWire(func(string, string, time.Duration) (net.Conn, error) { return client, nil })
	c, err := w.Dial("tcp", "x:1", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	frame := make([]byte, 4+4+4+8+4+16)
	binary.BigEndian.PutUint32(frame[0:], uint32(len(frame)-4))
	binary.BigEndian.PutUint32(frame[8:], 1500)                // timeOut ms
	binary.BigEndian.PutUint64(frame[12:], 0x100000abcdef0042) // sessionId
	binary.BigEndian.PutUint32(frame[20:], 16)                 // passwd length
	go func() {
		for i := 0; i < len(frame); i += 3 { // in pieces
			end := min(i+3, len(frame))
			if _, err := server.Write(frame[i:end]); err != nil {
				return
			}
		}
		server.Write([]byte{1, 2, 3})
	}()
	if !w.lastHeard().IsZero() || w.info.Load() != nil {
		t.Fatal("heard before reading")
	}
	got := make([]byte, len(frame)+3)
	for n := 0; n < len(got); {
		m, err := c.Read(got[n:min(n+5, len(got))])
		if err != nil {
			t.Fatal(err)
		}
		n += m
	}
	ci := w.info.Load()
	if ci == nil || ci.sessionID != 0x100000abcdef0042 || ci.timeout != 1500*time.Millisecond {
		t.Fatalf("sniffed %+v", ci)
	}
	if time.Since(w.lastHeard()) > time.Minute {
		t.Fatal("lastHeard not recorded")
	}
	w.closeAll()
	if _, err := c.Read(got); err == nil {
		t.Fatalf("read after closeAll: %v", err)
	}
	if _, err := w.Dial("tcp", "x:1", time.Second); !errors.Is(err, errWireClosed) {
		t.Fatalf("dial after closeAll: %v", err)
	}
}

// TestLossDeadlineMargin: the local timer counts one session timeout from the
// last read minus a margin (the server may have last heard from us one
// network delay before our last read), from the send time of the newest
// request answered, or from the disconnect, whichever is earliest.
//
// The deadline carries the monotonic clock's reading, so that a step of the
// wall clock cannot move it.
func TestLossDeadlineMargin(t *testing.T) {
	t0 := time.Now()
	mono := func(t time.Time) int64 { return int64(t.Sub(monoBase)) }
	for _, tc := range []struct {
		timeout, margin time.Duration
	}{
		{time.Second, 50 * time.Millisecond},
		{2 * time.Second, 100 * time.Millisecond},
		{30 * time.Second, 100 * time.Millisecond},
		{500 * time.Millisecond, 25 * time.Millisecond},
	} {
		if m := lossMargin(tc.timeout); m != tc.margin {
			t.Errorf("lossMargin(%v) = %v, want %v", tc.timeout, m, tc.margin)
		}
		s := &Session{wire: newWire(nil), timeout: tc.timeout}
		s.epoch = newEpoch(s, 1, 1)
		s.downSince = t0
		if d, ok := s.lossDeadline(); !ok || !d.Equal(t0.Add(tc.timeout)) {
			t.Errorf("timeout %v, never heard: deadline %v %v, want disconnect + timeout", tc.timeout, d.Sub(t0), ok)
		}
		s.wire.lastRead.Store(mono(t0.Add(-300 * time.Millisecond)))
		if d, ok := s.lossDeadline(); !ok || !d.Equal(t0.Add(-300*time.Millisecond-tc.margin+tc.timeout)) {
			t.Errorf("timeout %v: deadline %v after the disconnect, want %v", tc.timeout, d.Sub(t0), -300*time.Millisecond-tc.margin+tc.timeout)
		}
		// A request answered in that read but sent 700 ms before the
		// disconnect (a slow network): the server heard from us then or
		// later, and the timer counts from there.
		s.wire.heardBy.Store(mono(t0.Add(-700 * time.Millisecond)))
		d, ok := s.lossDeadline()
		if !ok || !d.Equal(t0.Add(-700*time.Millisecond+tc.timeout)) {
			t.Errorf("timeout %v, answer to a request sent 700ms before: deadline %v after the disconnect, want %v", tc.timeout, d.Sub(t0), -700*time.Millisecond+tc.timeout)
		}
		// time.Time's String shows the monotonic reading as "m=±...".
		if !strings.Contains(d.String(), " m=") {
			t.Errorf("timeout %v: deadline %v has no monotonic clock reading: a step of the wall clock would move it", tc.timeout, d)
		}
		s.connUp = true
		if _, ok := s.lossDeadline(); ok {
			t.Errorf("timeout %v: armed while connected", tc.timeout)
		}
	}
}

// TestDrainBounded: drain runs on the caller's goroutine (Close joins
// everything it starts) and gives up after its limit when go-zookeeper's
// channel is never closed.
func TestDrainBounded(t *testing.T) {
	never := make(chan zk.Event, 1)
	never <- zk.Event{}
	if drain(never, 20*time.Millisecond) {
		t.Fatal("drain of an open channel reported it closed")
	}
	if len(never) != 0 {
		t.Fatal("drain left a value")
	}
	closed := make(chan zk.Event, 2)
	closed <- zk.Event{}
	closed <- zk.Event{}
	close(closed)
	if !drain(closed, time.Minute) {
		t.Fatal("drain of a closed channel timed out")
	}
}

// The wire keeps the session's last zxid instead of go-zookeeper (zxidBook):
// it takes the zxid out of reply headers (any piece sizes), writes it into
// the ConnectRequest, freezes it for the connection's SetWatches requests,
// leaves every other byte and the caller's buffers alone, and forgets it when
// the server answers with session id 0.
func TestWireKeepsZxid(t *testing.T) {
	conns := make(chan net.Conn, 2)
	w := newWire(func(string, string, time.Duration) (net.Conn, error) {
		client, server := net.Pipe()
		conns <- server
		return client, nil
	})
	defer w.closeAll()
	w.lastZxid.Store(0x55)

	c, err := w.Dial("tcp", "x:1", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	server := <-conns
	defer server.Close()

	// ConnectRequest: length, protocolVersion, lastZxidSeen, timeOut,
	// sessionId, passwd.
	connReq := make([]byte, 4+4+8+4+8+4+16)
	binary.BigEndian.PutUint32(connReq[0:], uint32(len(connReq)-4))
	binary.BigEndian.PutUint64(connReq[8:], 0x77) // go-zookeeper's value
	sent := writeAll(t, c, server, connReq)
	if got := binary.BigEndian.Uint64(sent[8:16]); got != 0x55 {
		t.Fatalf("ConnectRequest's lastZxidSeen %#x, want the wire's 0x55", got)
	}
	if binary.BigEndian.Uint64(connReq[8:]) != 0x77 {
		t.Fatal("Write modified the caller's buffer")
	}
	zeroed := append([]byte(nil), connReq...)
	copy(zeroed[8:16], sent[8:16])
	if !bytes.Equal(zeroed, sent) {
		t.Fatal("Write changed other bytes of the ConnectRequest")
	}

	// ConnectResponse, a reply (xid 5, zxid 0x1234), a watch event (xid -1)
	// and a ping (xid -2), whose zxids are not the session's.
	connResp := make([]byte, 4+4+4+8+4+16)
	binary.BigEndian.PutUint32(connResp[0:], uint32(len(connResp)-4))
	binary.BigEndian.PutUint32(connResp[8:], 2000)
	binary.BigEndian.PutUint64(connResp[12:], 0x42)
	binary.BigEndian.PutUint32(connResp[20:], 16)
	reply := func(xid int32, zxid int64, body int) []byte {
		f := make([]byte, 4+16+body)
		binary.BigEndian.PutUint32(f[0:], uint32(len(f)-4))
		binary.BigEndian.PutUint32(f[4:], uint32(xid))
		binary.BigEndian.PutUint64(f[8:], uint64(zxid))
		for i := 20; i < len(f); i++ {
			f[i] = byte(i)
		}
		return f
	}
	stream := append(append(append(append([]byte(nil), connResp...),
		reply(5, 0x1234, 9)...), reply(-1, 0x9999, 30)...), reply(-2, 0x8888, 0)...)
	got := readAll(t, c, server, stream)
	want := append([]byte(nil), stream...)
	for _, at := range []int{len(connResp), len(connResp) + 29, len(connResp) + 29 + 50} {
		for k := 0; k < 8; k++ {
			want[at+8+k] = 0
		}
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("read\n%x\nwant (zxids zeroed, nothing else changed)\n%x", got, want)
	}
	if z := w.lastZxid.Load(); z != 0x1234 {
		t.Fatalf("lastZxid %#x, want the reply's 0x1234", z)
	}

	// SetWatches carries the zxid frozen at connect (0x55), not the newer
	// 0x1234, nor go-zookeeper's; a getData request passes untouched.
	setWatches := make([]byte, 4+4+4+8+12)
	binary.BigEndian.PutUint32(setWatches[0:], uint32(len(setWatches)-4))
	binary.BigEndian.PutUint32(setWatches[4:], 9)
	binary.BigEndian.PutUint32(setWatches[8:], opSetWatches)
	binary.BigEndian.PutUint64(setWatches[12:], 0x77)
	getData := make([]byte, 4+4+4+8+12)
	copy(getData, setWatches)
	binary.BigEndian.PutUint32(getData[8:], 4) // opGetData
	sent = writeAll(t, c, server, append(append([]byte(nil), getData...), setWatches...))
	if !bytes.Equal(sent[:len(getData)], getData) {
		t.Fatal("Write changed a getData request")
	}
	if got := binary.BigEndian.Uint64(sent[len(getData)+12:]); got != 0x55 {
		t.Fatalf("SetWatches' relativeZxid %#x, want 0x55 (the last zxid before the connection)", got)
	}

	// An expired session: the server answers the next ConnectRequest with
	// session id 0, and the wire forgets the zxid.
	c.Close()
	c2, err := w.Dial("tcp", "x:1", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	server2 := <-conns
	defer server2.Close()
	sent = writeAll(t, c2, server2, connReq)
	if got := binary.BigEndian.Uint64(sent[8:16]); got != 0x1234 {
		t.Fatalf("second ConnectRequest's lastZxidSeen %#x, want 0x1234", got)
	}
	expired := append([]byte(nil), connResp...)
	binary.BigEndian.PutUint64(expired[12:], 0)
	readAll(t, c2, server2, expired)
	if z := w.lastZxid.Load(); z != 0 {
		t.Fatalf("lastZxid %#x after an expired session's answer, want 0", z)
	}
}

// writeAll writes b to c in pieces of 7 bytes and returns what server read.
func writeAll(t *testing.T, c, server net.Conn, b []byte) []byte {
	t.Helper()
	errc := make(chan error, 1)
	go func() {
		for i := 0; i < len(b); i += 7 {
			if _, err := c.Write(b[i:min(i+7, len(b))]); err != nil {
				errc <- err
				return
			}
		}
		errc <- nil
	}()
	got := make([]byte, len(b))
	if _, err := io.ReadFull(server, got); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	return got
}

// readAll has server send b in pieces of 3 bytes and reads it from c in
// pieces of at most 5.
func readAll(t *testing.T, c, server net.Conn, b []byte) []byte {
	t.Helper()
	errc := make(chan error, 1)
	go func() {
		for i := 0; i < len(b); i += 3 {
			if _, err := server.Write(b[i:min(i+3, len(b))]); err != nil {
				errc <- err
				return
			}
		}
		errc <- nil
	}()
	got := make([]byte, len(b))
	for n := 0; n < len(got); {
		m, err := c.Read(got[n:min(n+5, len(got))])
		if err != nil {
			t.Fatal(err)
		}
		n += m
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	return got
}

// TestWireBufferedReads: the wire reads the socket once for several
// packets and returns them in the pieces the reader asks for; a read
// deadline asked for while a read waits on the socket reaches it at once,
// and one asked for between reads applies to the next read that goes to
// the socket; an error that came with the last bytes is returned after
// them; the handshake's deadline is cut to the wire's bound.
func TestWireBufferedReads(t *testing.T) {
	// The handshake: go-zookeeper asks for 10 × ⅔ of the session timeout;
	// the wire cuts it to its bound, counted from the dial.
	c, _ := pipeWire(t, 200*time.Millisecond)
	start := time.Now()
	if err := c.SetReadDeadline(time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	_, err := c.Read(make([]byte, 4))
	if took := time.Since(start); !errors.Is(err, os.ErrDeadlineExceeded) || took > 5*time.Second {
		t.Fatalf("handshake read: %v after %v, want a deadline error after about 200ms", err, took)
	}

	// A deadline asked for while a read waits on the socket stops it.
	c2, _ := pipeWire(t, 0)
	got := make(chan error, 1)
	go func() {
		_, err := c2.Read(make([]byte, 4))
		got <- err
	}()
	// Wait until the read is on the socket (a bounded poll on its state).
	deadline := time.Now().Add(10 * time.Second)
	for {
		wc := c2.(*wireConn)
		wc.rdlMu.Lock()
		on := wc.onSocket
		wc.rdlMu.Unlock()
		if on {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the read never reached the socket")
		}
		runtime.Gosched()
	}
	if err := c2.SetReadDeadline(time.Now().Add(20 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-got:
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("waiting read after a deadline: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a deadline set during a read did not stop it")
	}

	// Three packets written at once come back in the reader's pieces, from
	// one socket read; then the error that followed them.
	c3, server3 := pipeWire(t, 0)
	var stream []byte
	for i := byte(1); i <= 3; i++ {
		stream = append(stream, 0, 0, 0, 3, i, i, i)
	}
	go func() {
		server3.Write(stream)
		server3.Close()
	}()
	var read []byte
	buf := make([]byte, 4)
	for {
		n, err := c3.Read(buf[:1+len(read)%4])
		read = append(read, buf[:n]...)
		if err != nil {
			if err != io.EOF {
				t.Fatalf("read error %v, want EOF after the data", err)
			}
			break
		}
	}
	// The first packet is the ConnectResponse position for the wire's
	// parser; what matters here is that every byte arrives, in order.
	if !bytes.Equal(read, stream) {
		t.Fatalf("read %v, want %v", read, stream)
	}
}

// pipeWire dials a wire (with the given handshake bound; 0: none) over an
// in-memory pipe and returns the wire's connection and the server's end.
func pipeWire(t *testing.T, handshake time.Duration) (client, server net.Conn) {
	t.Helper()
	conns := make(chan net.Conn, 1)
	w := newWire(func(string, string, time.Duration) (net.Conn, error) {
		c, s := net.Pipe()
		conns <- s
		return c, nil
	})
	w.handshakeLimit = handshake
	t.Cleanup(w.closeAll)
	c, err := w.Dial("tcp", "x:1", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	server = <-conns
	t.Cleanup(func() { server.Close() })
	return c, server
}
