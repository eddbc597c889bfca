package recipes

import (
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"testing"

	"github.com/go-zookeeper/zk"
)

func TestConnErr(t *testing.T) {
	pipe := &net.OpError{Op: "write", Net: "tcp", Err: fmt.Errorf("write: %w", syscall.EPIPE)}
	for _, tc := range []struct {
		in     error
		conn   bool
		remain error
	}{
		{nil, false, nil},
		{pipe, true, syscall.EPIPE},
		{io.EOF, true, io.EOF},
		{syscall.ECONNRESET, true, syscall.ECONNRESET},
		{zk.ErrConnectionClosed, true, zk.ErrConnectionClosed},
		{zk.ErrNoNode, false, zk.ErrNoNode},
		{zk.ErrNoAuth, false, zk.ErrNoAuth},
		{errors.New("other"), false, nil},
	} {
		got := connErr(tc.in)
		if errors.Is(got, zk.ErrConnectionClosed) != tc.conn {
			t.Errorf("connErr(%v) = %v, connection-level = %v, want %v", tc.in, got, !tc.conn, tc.conn)
		}
		if tc.remain != nil && !errors.Is(got, tc.remain) {
			t.Errorf("connErr(%v) = %v lost %v", tc.in, got, tc.remain)
		}
	}
}
