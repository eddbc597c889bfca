package session

import (
	"encoding/binary"
	"errors"
	"net"
	"testing"
	"time"
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
