package rwlock

import (
	"errors"
	"fmt"
	"testing"

	"github.com/zkrecipes/zkrecipes/internal/engine"
	"github.com/zkrecipes/zkrecipes/recipes"
)

// node names a child in a table: "R5" is a read node with sequence 5, "W7" a
// write node; a suffix after the sequence ("R5b") distinguishes nodes of one
// sequence (a downgrade's read node beside its writer) and orders them by
// name, as SortChildren does.
func child(spec string) engine.Child {
	marker := readMarker
	if spec[0] == 'W' {
		marker = writeMarker
	}
	var seq int64
	var tag string
	fmt.Sscanf(spec[1:], "%d%s", &seq, &tag)
	return engine.Child{Name: fmt.Sprintf("_c_%s-%s%010d", tag, marker, seq), Marker: marker, Seq: seq}
}

func snapshot(specs ...string) []engine.Child {
	out := make([]engine.Child, len(specs))
	for i, s := range specs {
		out[i] = child(s)
	}
	return out
}

func TestDecide(t *testing.T) {
	for _, tc := range []struct {
		name  string
		kids  []string // sorted snapshot
		self  int
		held  bool
		watch int // index of the child to watch when not held
	}{
		{"lone writer", []string{"W1"}, 0, true, -1},
		{"lone reader", []string{"R1"}, 0, true, -1},
		{"readers share", []string{"R1", "R2", "R3"}, 2, true, -1},
		{"writer behind readers", []string{"R1", "R2", "W3"}, 2, false, 1},
		{"writer behind writer", []string{"W1", "W2"}, 1, false, 0},
		{"reader behind writer", []string{"W1", "R2"}, 1, false, 0},
		{"reader watches the nearest writer", []string{"W1", "R2", "W3", "R4", "R5"}, 4, false, 2},
		{"reader before a queued writer holds", []string{"R1", "W2", "R3"}, 0, true, -1},
		{"reader after a queued writer waits (no starvation)", []string{"R1", "W2", "R3"}, 2, false, 1},
		// kazoo #649: W1 holds, R queues, W2 queues: R waits for W1 only,
		// never for W2 behind it; W2 waits for R.
		{"kazoo 649 reader", []string{"W1", "R2", "W3"}, 1, false, 0},
		{"kazoo 649 reader after W1", []string{"R2", "W3"}, 0, true, -1},
		{"kazoo 649 second writer", []string{"R2", "W3"}, 1, false, 0},
		// Downgrade: the read node shares its writer's sequence and may sort
		// on either side of it (by name).
		{"writer with its downgrade node before it", []string{"R5a", "W5b", "W7"}, 1, true, -1},
		{"writer with its downgrade node after it", []string{"W5a", "R5b", "W7"}, 0, true, -1},
		{"downgrade node after its writer", []string{"W5a", "R5b", "W7"}, 1, true, -1},
		{"downgrade node before its writer", []string{"R5a", "W5b", "W7"}, 0, true, -1},
		{"queued writer waits for the downgrade node", []string{"R5a", "W5b", "W7"}, 2, false, 1},
		{"queued writer after the write release", []string{"R5a", "W7"}, 1, false, 0},
		{"reader behind a downgrading writer", []string{"W5a", "R5b", "R9"}, 2, false, 0},
		{"reader after the write release", []string{"R5b", "R9"}, 1, true, -1},
		{"downgrade node behind an older writer", []string{"W3", "W5a", "R5b"}, 2, false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sorted := snapshot(tc.kids...)
			d := readDriver("")
			if sorted[tc.self].Marker == writeMarker {
				d = writeDriver
			}
			held, watch, err := d.Decide(sorted, tc.self)
			if err != nil {
				t.Fatal(err)
			}
			want := ""
			if tc.watch >= 0 {
				want = sorted[tc.watch].Name
			}
			if held != tc.held || watch != want {
				t.Fatalf("Decide(%v, %d) = %v, %q; want %v, %q", tc.kids, tc.self, held, watch, tc.held, want)
			}
		})
	}
}

func TestDecideBadIndex(t *testing.T) {
	for _, d := range []*engine.Driver{writeDriver, readDriver("")} {
		for _, self := range []int{-1, 1} {
			if _, _, err := d.Decide(snapshot("W1"), self); !errors.Is(err, recipes.ErrNodeDeleted) {
				t.Errorf("%s driver: Decide(self %d) = %v, want ErrNodeDeleted", d.Marker, self, err)
			}
		}
	}
}

func TestDriverShape(t *testing.T) {
	if !writeDriver.Monotone {
		t.Error("the write driver should be monotone")
	}
	if readDriver("").Settled != nil || readDriver("x").Settled != nil {
		t.Error("the read driver needs no Settled: placed nodes are readers, which never block it")
	}
	if !readDriver("").Monotone || !readDriver("x").Monotone {
		t.Error("the read driver should be monotone")
	}
	if a := readDriver("x").Anchor; a != "x" {
		t.Errorf("anchor %q", a)
	}
	if a := readDriver("").Anchor; a != "" {
		t.Errorf("a queued reader is placed: anchor %q", a)
	}
	if writeDriver.Anchor != "" {
		t.Error("the write driver is never placed")
	}
}

// TestWriterSettled: a woken writer may decide on the deletion notice alone
// only when no other writer sorted before it: such a writer may have placed
// a downgrade node before ours since we read.
func TestWriterSettled(t *testing.T) {
	for _, tc := range []struct {
		prefix []string // sorted, ours last
		want   bool
	}{
		{[]string{"W7"}, true},
		{[]string{"R1", "R2", "W7"}, true},
		{[]string{"R5a", "W5b"}, true}, // our own downgrade node
		{[]string{"W5", "W7"}, false},
		{[]string{"R1", "W5", "R6", "W7"}, false},
		{[]string{"R5a", "W7"}, true}, // a downgrade node whose writer is gone
		{nil, false},
	} {
		if got := writeDriver.Settled(snapshot(tc.prefix...)); got != tc.want {
			t.Errorf("Settled(%v) = %v, want %v", tc.prefix, got, tc.want)
		}
	}
}
