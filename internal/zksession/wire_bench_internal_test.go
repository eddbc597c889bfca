package zksession

import (
	"encoding/binary"
	"fmt"
	"io"
	"testing"
)

// BenchmarkWire measures the wire's own work per request, over a connection
// in memory (memConn), with go-zookeeper's pattern of use: one Write per
// request, and each reply read as its length and then the rest, from the
// wire's read buffer.
//
//   - cycle: a lock's cycle (a create, a getChildren2, a delete, and their
//     three replies), requests written and answered one at a time;
//   - write/requests=N: N requests written (creates, getChildren2s and
//     deletes in turn), then one reply (to the last, which answers them all);
//   - read/requests=N: N requests in flight answered by N replies that
//     arrive in one socket read.
//
// ns/op is per cycle or per N requests.
func BenchmarkWire(b *testing.B) {
	b.Run("cycle", func(b *testing.B) { benchWire(b, 3, true, true) })
	for _, n := range []int{64} {
		b.Run(fmt.Sprintf("write/requests=%d", n), func(b *testing.B) { benchWire(b, n, true, false) })
		b.Run(fmt.Sprintf("read/requests=%d", n), func(b *testing.B) { benchWire(b, n, false, true) })
	}
}

// benchWire runs n requests per op: written (else only recorded as sent)
// and each answered (else only the last).
func benchWire(b *testing.B, n int, write, answerEach bool) {
	m := &memConn{}
	c := memWire(b, m)
	if _, err := c.Write(frame(i32(0), i64(0), i32(4000), i64(0), zkString("0123456789abcdef"))); err != nil {
		b.Fatal(err)
	}
	m.in = frame(i32(0), i32(4000), i64(0x1234abcd), zkString("0123456789abcdef"))
	buf := make([]byte, 512)
	if _, err := io.ReadFull(c, buf[:4]); err != nil {
		b.Fatal(err)
	}
	if _, err := io.ReadFull(c, buf[4:4+int(binary.BigEndian.Uint32(buf))]); err != nil {
		b.Fatal(err)
	}

	const lockPath = "/locks/key-0042/_c_0f8b6a52-3c4e-4f7e-9d2b-7a1c5e9f0d13-lock-"
	reqs := make([][]byte, n)
	replies := make([][]byte, n)
	ops := make([]int32, n)
	for i := range reqs {
		switch i % 3 {
		case 0:
			reqs[i] = createRequest(0, lockPath)
			replies[i] = reply(0, 0x100, 0, zkString(lockPath+"0000000001"))
			ops[i] = opCreate
		case 1:
			reqs[i] = request(0, opGetChildren2, zkString("/locks/key-0042"), []byte{0})
			replies[i] = reply(0, 0x100, 0, i32(1), zkString(lockPath[len("/locks/key-0042/"):]+"0000000001"), make([]byte, 68))
			ops[i] = opGetChildren2
		case 2:
			reqs[i] = request(0, 2, zkString(lockPath+"0000000001"), i32(-1))
			replies[i] = reply(0, 0x101, 0)
			ops[i] = 2
		}
	}
	var stream []byte // every reply, for read
	if !answerEach || !write {
		for _, r := range replies {
			stream = append(stream, r...)
		}
	}
	readReply := func() {
		if _, err := io.ReadFull(c, buf[:4]); err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadFull(c, buf[4:4+int(binary.BigEndian.Uint32(buf))]); err != nil {
			b.Fatal(err)
		}
	}
	xid := int32(0)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		switch {
		case write && answerEach: // cycle
			for i := range reqs {
				xid++
				binary.BigEndian.PutUint32(reqs[i][4:], uint32(xid))
				binary.BigEndian.PutUint32(replies[i][4:], uint32(xid))
				if _, err := c.Write(reqs[i]); err != nil {
					b.Fatal(err)
				}
				m.in = replies[i]
				readReply()
				if ops[i] == opCreate {
					c.w.createdZxid(lockPath)
				}
			}
		case write: // write
			for i := range reqs {
				xid++
				binary.BigEndian.PutUint32(reqs[i][4:], uint32(xid))
				if _, err := c.Write(reqs[i]); err != nil {
					b.Fatal(err)
				}
			}
			last := replies[len(replies)-1]
			binary.BigEndian.PutUint32(last[4:], uint32(xid))
			m.in = last
			readReply()
		default: // read
			at := 0
			for i := range replies {
				xid++
				c.noteSent(xid, ops[i], 1, "")
				binary.BigEndian.PutUint32(stream[at+4:], uint32(xid))
				at += len(replies[i])
			}
			m.in = stream
			for range replies {
				readReply()
			}
		}
	}
}
