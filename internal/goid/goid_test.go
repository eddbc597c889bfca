package goid

import (
	"sync"
	"testing"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want uint64
	}{
		{"goroutine 1 [running]:\n", 1},
		{"goroutine 18446744073709 [running]:", 18446744073709},
		{"goroutine 18446744073709551615 [running]:", 18446744073709551615},
		// Malformed headers: 0, which callers must refuse.
		{"goroutine x [running]:", 0},
		{"gorout", 0},
		{"", 0},
		{"thread 5 [running]", 0},
		{"goroutine 18446744073709551616 [running]:", 0}, // overflows uint64
		{"goroutine 99999999999999999999999 [running]:", 0},
		{"goroutine 12", 0},                // truncated before the space
		{"goroutine 12x [running]:", 0},    // junk after the digits
		{"goroutine  12 [running]:", 0},    // two spaces
		{"goroutine -12 [running]:", 0},    // sign
		{"goroutine 0 [running]:", 0},      // ids start at 1
		{"Goroutine 12 [running]:", 0},     // case
		{"goroutine 12\t[running]:", 0},    // other separator
		{"goroutine 0012 [running]:", 12},  // leading zeros are still digits
		{"goroutine 7 [chan receive]:", 7}, // any state
	} {
		if got := parse([]byte(tc.in)); got != tc.want {
			t.Errorf("parse(%q) = %d, want %d", tc.in, got, tc.want)
		}
	}
}

func TestIDDistinctAndStable(t *testing.T) {
	me := ID()
	if me == 0 {
		t.Fatal("ID() = 0")
	}
	if again := ID(); again != me {
		t.Fatalf("ID() changed within one goroutine: %d then %d", me, again)
	}
	const n = 50
	ids := make([]uint64, n)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			ids[i] = ID()
		}(i)
	}
	wg.Wait()
	seen := map[uint64]bool{me: true}
	for _, id := range ids {
		if id == 0 || seen[id] {
			t.Fatalf("duplicate or zero id %d", id)
		}
		seen[id] = true
	}
}

func BenchmarkID(b *testing.B) {
	for i := 0; i < b.N; i++ {
		ID()
	}
}

func TestIDDoesNotAllocate(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector makes sync.Pool drop buffers")
	}
	ID() // fill the pool
	if n := testing.AllocsPerRun(100, func() { ID() }); n != 0 {
		t.Fatalf("ID allocates %v times a call, want 0", n)
	}
}
