package zksession

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"syscall"
	"testing"

	"github.com/go-zookeeper/zk"
)

// The wire counts the write requests it hands to the socket, and only
// those: reads, pings and the handshake do not move the count.
func TestWireCountsWrites(t *testing.T) {
	c, server := pipeWire(t, 0)
	go io.Copy(io.Discard, server)
	w := c.(*wireConn).w
	packet := func(xid, op int32) []byte {
		b := make([]byte, 4+8+4+2)
		binary.BigEndian.PutUint32(b[0:], uint32(len(b)-4))
		binary.BigEndian.PutUint32(b[4:], uint32(xid))
		binary.BigEndian.PutUint32(b[8:], uint32(op))
		binary.BigEndian.PutUint32(b[12:], 2) // a path of two bytes
		copy(b[16:], "/a")
		return b
	}
	connect := make([]byte, 4+44)
	binary.BigEndian.PutUint32(connect, 44)
	if _, err := c.Write(connect); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		xid, op int32
		want    uint64
	}{
		{1, 4, 0},   // getData
		{2, 3, 0},   // exists
		{-2, 11, 0}, // ping
		{3, 5, 1},   // setData
		{4, 14, 2},  // multi
		{5, 1, 3},   // create
		{6, 2, 4},   // delete
		{7, 19, 5},  // createContainer
		{-8, 101, 5},
	} {
		if _, err := c.Write(packet(tc.xid, tc.op)); err != nil {
			t.Fatal(err)
		}
		if got := w.writes.Load(); got != tc.want {
			t.Fatalf("after opcode %d: %d writes counted, want %d", tc.op, got, tc.want)
		}
	}
}

// answerLost: a write failed by go-zookeeper's queue, or refused by the
// server, was not applied; one failed with ErrConnectionClosed was written
// exactly when a write went out since it was handed on (or the Session is
// closing); a failed socket write may have gone out.
func TestAnswerLost(t *testing.T) {
	s := &Session{wire: newWire(nil), done: make(chan struct{})}
	sent := s.wire.writes.Load()
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{zk.ErrNoServer, false},
		{fmt.Errorf("wrapped: %w", zk.ErrNoServer), false},
		{zk.ErrSessionMoved, false},
		{zk.ErrBadVersion, false},
		{zk.ErrNoNode, false},
		{zk.ErrSessionExpired, false},
		{zk.ErrConnectionClosed, false}, // nothing went out since
		{zk.ErrClosing, true},
		{syscall.EPIPE, true},
		{io.EOF, true},
	} {
		if got := s.answerLost(tc.err, sent); got != tc.want {
			t.Errorf("answerLost(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
	s.wire.writes.Add(1)
	if !s.answerLost(zk.ErrConnectionClosed, sent) {
		t.Error("ErrConnectionClosed after a write went out: not counted as maybe written")
	}
	if s.answerLost(zk.ErrConnectionClosed, s.wire.writes.Load()) != false {
		t.Error("ErrConnectionClosed with no write since: counted as maybe written")
	}
	close(s.done)
	if !s.answerLost(zk.ErrConnectionClosed, s.wire.writes.Load()) {
		t.Error("ErrConnectionClosed while closing: go-zookeeper may still write it")
	}
}

// A Write says unknown once an attempt's answer was lost, and its Result
// then matches ErrUnknownOutcome, the error given and the lost attempt's.
func TestWriteResult(t *testing.T) {
	var w Write
	if w.Unknown() || w.Result(nil) != nil || w.Result(zk.ErrBadVersion) != zk.ErrBadVersion || w.Lost() != nil {
		t.Fatal("a fresh Write is not unknown")
	}
	w.abandoned(zk.ErrConnectionClosed)
	w.abandoned(errors.New("later")) // the first one stays
	err := w.Result(zk.ErrBadVersion)
	if !w.Unknown() || !errors.Is(err, ErrUnknownOutcome) || !errors.Is(err, zk.ErrBadVersion) || w.Lost() != zk.ErrConnectionClosed {
		t.Fatalf("Result = %v, Lost = %v", err, w.Lost())
	}
	if err := w.Result(fmt.Errorf("%w: x", ErrUnknownOutcome)); err.Error() != "outcome unknown: x" {
		t.Fatalf("wrapped twice: %v", err)
	}
	var nilw *Write
	if nilw.Unknown() || nilw.Result(zk.ErrNoNode) != zk.ErrNoNode {
		t.Fatal("a nil Write")
	}
}
