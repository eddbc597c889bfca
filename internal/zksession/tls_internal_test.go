package zksession

import (
	"crypto/tls"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

// closeAll aborts a TLS handshake in progress at once, whatever time the dial
// was given: Close (and so Connect giving up at its ctx's end) never waits
// for a server that does not answer the handshake.
func TestWireCloseAbortsTLSHandshake(t *testing.T) {
	client, server := net.Pipe()
	defer server.Close()
	w := newWire(func(string, string, time.Duration) (net.Conn, error) { return client, nil })
	w.tls = &tls.Config{MinVersion: tls.VersionTLS12}
	done := make(chan error, 1)
	go func() {
		c, err := w.Dial("tcp", "127.0.0.1:1", time.Hour)
		if c != nil {
			c.Close()
		}
		done <- err
	}()
	// The first byte of the ClientHello: the handshake has begun (net.Pipe
	// is synchronous, so the client now blocks writing the rest).
	var b [1]byte
	if _, err := server.Read(b[:]); err != nil || b[0] != 0x16 {
		t.Fatalf("read %x, %v; want a TLS handshake record", b, err)
	}
	start := time.Now()
	w.closeAll()
	select {
	case err := <-done:
		if !errors.Is(err, errWireClosed) {
			t.Fatalf("Dial = %v, want errWireClosed", err)
		}
		t.Logf("handshake aborted %v after closeAll", time.Since(start).Round(time.Microsecond))
	case <-time.After(10 * time.Second):
		t.Fatal("the handshake was not aborted by closeAll")
	}
	if err := w.dialError(); err != nil {
		t.Fatalf("an aborted handshake was recorded as the last dial error: %v", err)
	}
}

// A failed handshake is recorded (for Connect's error) and names TLS and the
// address; the user's config keeps its empty ServerName.
func TestWireRecordsTLSHandshakeError(t *testing.T) {
	client, server := net.Pipe()
	w := newWire(func(string, string, time.Duration) (net.Conn, error) { return client, nil })
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	w.tls = cfg
	go func() {
		// A plaintext server: it reads the ClientHello (one record) as
		// garbage and hangs up.
		var hdr [5]byte
		if _, err := io.ReadFull(server, hdr[:]); err == nil {
			_, _ = io.ReadFull(server, make([]byte, int(hdr[3])<<8|int(hdr[4])))
		}
		server.Close()
	}()
	if _, err := w.Dial("tcp", "127.0.0.1:2281", time.Hour); err == nil {
		t.Fatal("Dial succeeded")
	}
	err := w.dialError()
	if err == nil {
		t.Fatal("no dial error recorded")
	}
	for _, want := range []string{"TLS handshake with 127.0.0.1:2281", "plaintext port"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("recorded %q, want it to contain %q", err, want)
		}
	}
	if cfg.ServerName != "" {
		t.Errorf("config modified: ServerName %q", cfg.ServerName)
	}
}
