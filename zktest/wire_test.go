package zktest

import (
	"encoding/binary"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
)

func frame(body ...[]byte) []byte {
	b := make([]byte, 4)
	for _, p := range body {
		b = append(b, p...)
	}
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	return b
}

func i32(v int32) []byte  { return binary.BigEndian.AppendUint32(nil, uint32(v)) }
func i64(v int64) []byte  { return binary.BigEndian.AppendUint64(nil, uint64(v)) }
func str(s string) []byte { return append(i32(int32(len(s))), s...) }

// pipeConn is a net.Conn whose reads come from in and whose writes are
// dropped, n bytes at most per Read.
type pipeConn struct {
	net.Conn
	in []byte
	n  int
}

func (c *pipeConn) Read(b []byte) (int, error) {
	k := min(len(b), c.n, len(c.in))
	copy(b, c.in[:k])
	c.in = c.in[k:]
	return k, nil
}

func (c *pipeConn) Write(b []byte) (int, error) { return len(b), nil }

// TestTapConnSplitFrames feeds both directions in pieces of every size: the
// frames are found whatever the split, big ones are skipped.
func TestTapConnSplitFrames(t *testing.T) {
	server := append(append(append(
		frame(i32(0), i32(4000), i64(0x1234), str("secret")),   // ConnectResponse
		frame(i32(1), i64(7), i32(0), make([]byte, 10000))...), // a large reply
		frame(i32(xidWatchEvent), i64(-1), i32(0), i32(int32(zk.EventNodeDeleted)), i32(3), str("/a/b"))...),
		frame(i32(xidPing), i64(7), i32(0))...)
	client := append(append(append(append(
		frame(make([]byte, 40)), // ConnectRequest
		frame(i32(1), i32(OpCreate), str("/a/b"), make([]byte, 5000))...),
		frame(i32(xidPing), i32(OpPing))...),
		frame(i32(2), i32(OpGetData), str("/a/b"), []byte{1})...),
		frame(i32(3), i32(OpCreate), str("/a/c"), []byte{0})...)
	for _, n := range []int{1, 2, 3, 5, 7, 13, 1 << 20} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			tap := NewTap()
			c := newTapConn(&pipeConn{in: server, n: n}, tap, 1)
			b := make([]byte, 64<<10)
			for got := 0; got < len(server); {
				k, _ := c.Read(b)
				got += k
			}
			for p := client; len(p) > 0; p = p[min(n, len(p)):] {
				if _, err := c.Write(p[:min(n, len(p))]); err != nil {
					t.Fatal(err)
				}
			}
			notes, err := tap.Notifications()
			if err != nil {
				t.Fatal(err)
			}
			if s := tap.Sessions(); len(s) != 1 || s[0].ID != 0x1234 || string(s[0].password) != "secret" || s[0].timeout != 4*time.Second {
				t.Fatalf("Sessions = %+v", s)
			}
			want := []Notification{{Type: zk.EventNodeDeleted, State: zk.StateSyncConnected, Path: "/a/b"}}
			if fmt.Sprint(notes) != fmt.Sprint(want) {
				t.Fatalf("Notifications = %+v, want %+v", notes, want)
			}
			if got, want := fmt.Sprint(tap.Requests()), fmt.Sprint(map[int32]int64{OpCreate: 2, OpGetData: 1}); got != want {
				t.Fatalf("Requests = %s, want %s", got, want)
			}
		})
	}
}

// TestTapConnBadStream: a stream that is not framed is reported, and passes.
func TestTapConnBadStream(t *testing.T) {
	tap := NewTap()
	c := newTapConn(&pipeConn{in: []byte("imok\n"), n: 100}, tap, 1)
	b := make([]byte, 100)
	if k, _ := c.Read(b); string(b[:k]) != "imok\n" {
		t.Fatalf("read %q", b[:k])
	}
	if _, err := tap.Notifications(); err == nil || !strings.Contains(err.Error(), "bad frame length") {
		t.Fatalf("Notifications gave %v, want a bad frame length", err)
	}
}
