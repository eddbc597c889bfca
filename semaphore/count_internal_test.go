package semaphore

import (
	"bytes"
	"errors"
	"testing"

	"github.com/zkrecipes/zkrecipes/session"
)

// Curator's SharedCount encoding: 4 bytes, big-endian two's complement.
func TestCountEncoding(t *testing.T) {
	for _, c := range []struct {
		n    int
		data []byte
	}{
		{0, []byte{0, 0, 0, 0}},
		{1, []byte{0, 0, 0, 1}},
		{258, []byte{0, 0, 1, 2}},
		{maxCount, []byte{0x7f, 0xff, 0xff, 0xff}},
	} {
		if got := encodeCount(c.n); !bytes.Equal(got, c.data) {
			t.Errorf("encodeCount(%d) = %x, want %x", c.n, got, c.data)
		}
		if got, err := decodeCount(c.data); err != nil || got != c.n {
			t.Errorf("decodeCount(%x) = %d, %v; want %d", c.data, got, err, c.n)
		}
	}
	// Curator may write negative values (a Java int): they read as they are.
	if got, err := decodeCount([]byte{0xff, 0xff, 0xff, 0xfb}); err != nil || got != -5 {
		t.Errorf("decodeCount(-5) = %d, %v", got, err)
	}
	for _, data := range [][]byte{nil, {}, {1}, {0, 0, 1}, {0, 0, 0, 0, 1}, []byte("12")} {
		if _, err := decodeCount(data); !errors.Is(err, ErrBadData) {
			t.Errorf("decodeCount(%x) = %v, want ErrBadData", data, err)
		}
	}
	for _, n := range []int{-1, maxCount + 1} {
		if err := checkCount(n); !errors.Is(err, session.ErrBadArgument) {
			t.Errorf("checkCount(%d) = %v, want session.ErrBadArgument", n, err)
		}
	}
}
