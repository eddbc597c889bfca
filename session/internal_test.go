package session

import (
	"encoding/binary"
	"errors"
	"net"
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
// network delay before our last read), or from the disconnect if earlier.
func TestLossDeadlineMargin(t *testing.T) {
	t0 := time.Unix(1000, 0)
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
		s.wire.lastRead.Store(t0.Add(-300 * time.Millisecond).UnixNano())
		if d, ok := s.lossDeadline(); !ok || !d.Equal(t0.Add(-300*time.Millisecond-tc.margin+tc.timeout)) {
			t.Errorf("timeout %v: deadline %v after the disconnect, want %v", tc.timeout, d.Sub(t0), -300*time.Millisecond-tc.margin+tc.timeout)
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
