package engine

import (
	"cmp"
	"crypto/rand"
	"encoding/hex"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// protectedMarker starts every protected node name (Curator's
// CreateBuilderImpl.PROTECTED_PREFIX).
const protectedMarker = "_c_"

// uuidLen is the length of a UUID in its 36-character dashed form.
const uuidLen = 36

// ProtectedPrefix returns the protected-name prefix Curator puts before a node's
// base name: "_c_" + uuid + "-". A node created as
// ProtectedPrefix(u)+"lock-" with the sequence flag is found again after a
// connection loss by listing its parent and looking for this prefix.
func ProtectedPrefix(uuid string) string {
	return protectedMarker + uuid + "-"
}

// NewUUID returns a random (version 4) UUID in the 36-character lowercase
// dashed form Curator uses in protected names, e.g.
// "0f8fad5b-d9cb-469f-a165-70867728950e". It reads crypto/rand.
func NewUUID() string {
	var out [uuidLen]byte
	putUUID(out[:])
	return string(out[:])
}

// newNodeBase returns the path of a new attempt's create, with a new UUID:
// dir + "/" + ProtectedPrefix(NewUUID()) + marker + seq, built in one string
// (one allocation), and the offset of the protected prefix in it. The server
// appends the sequence to it, except for a placed node (seq is its anchor's),
// whose name is complete.
func newNodeBase(dir, marker, seq string) (base string, at int) {
	var pre [len(protectedMarker) + uuidLen + 1]byte
	copy(pre[:], protectedMarker)
	putUUID(pre[len(protectedMarker):])
	pre[len(pre)-1] = '-'
	var b strings.Builder
	b.Grow(len(dir) + 1 + len(pre) + len(marker) + len(seq))
	b.WriteString(dir)
	b.WriteByte('/')
	b.Write(pre[:])
	b.WriteString(marker)
	b.WriteString(seq)
	return b.String(), len(dir) + 1
}

// putUUID writes a random UUID (see NewUUID) to out[:uuidLen].
func putUUID(out []byte) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		// crypto/rand.Read does not fail on supported platforms (Go 1.24
		// made that a guarantee); keep a defined behaviour anyway.
		panic("engine: crypto/rand failed: " + err.Error())
	}
	b[6] = (b[6] & 0x0f) | 0x40 // version 4
	b[8] = (b[8] & 0x3f) | 0x80 // RFC 4122 variant
	hex.Encode(out[0:8], b[0:4])
	out[8] = '-'
	hex.Encode(out[9:13], b[4:6])
	out[13] = '-'
	hex.Encode(out[14:18], b[6:8])
	out[18] = '-'
	hex.Encode(out[19:23], b[8:10])
	out[23] = '-'
	hex.Encode(out[24:36], b[10:16])
}

// isUUID reports whether s has the 36-character dashed hexadecimal form.
func isUUID(s string) bool {
	if len(s) != uuidLen {
		return false
	}
	for i := 0; i < uuidLen; i++ {
		c := s[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
				return false
			}
		}
	}
	return true
}

// ProtectedUUID returns the UUID of a protected node name
// ("_c_<uuid>-..."), or "" if name is not protected.
func ProtectedUUID(name string) string {
	if !strings.HasPrefix(name, protectedMarker) || len(name) < len(protectedMarker)+uuidLen+1 {
		return ""
	}
	u := name[len(protectedMarker) : len(protectedMarker)+uuidLen]
	if name[len(protectedMarker)+uuidLen] != '-' || !isUUID(u) {
		return ""
	}
	return u
}

// Child is one contender node of an ordered recipe, as SortChildren parsed it.
type Child struct {
	// Name is the node name (not the full path), e.g.
	// "_c_0f8fad5b-d9cb-469f-a165-70867728950e-lock-0000000007".
	Name string
	// Marker is the marker that matched (the one occurring last in Name),
	// e.g. "lock-".
	Marker string
	// Seq is the sequence number after the marker (negative after 2^31
	// changes of the parent; SortChildren orders those last).
	Seq int64
}

// SortChildren parses and sorts the children of a recipe directory the way
// Curator's LockInternals does: a name takes part when it contains one of the
// markers followed, at its last occurrence, by a decimal sequence number (the
// server's %010d, possibly negative after 2^31 changes of the parent); the
// sequence is what follows the marker occurring last in the name. Names that
// match no marker (foreign nodes, such as the directory of another recipe or a
// non-fair lock's node) are ignored, not fatal. The result is ordered by
// sequence in creation order (the sequence read as an unsigned 32-bit
// number, so that the negative ones, created after 2^31 changes of the
// parent, come last), then by name; names is not modified.
//
// Curator compares the text after the marker, which for the server's
// zero-padded non-negative sequences is the same order; for negative ones it
// is not (see the package documentation).
func SortChildren(names []string, markers []string) []Child {
	return sortChildrenInto(make([]Child, 0, len(names)), names, markers)
}

// sortChildrenInto is SortChildren writing into buf's array when it is large
// enough (the engine takes one from childBufs for each decision).
func sortChildrenInto(buf []Child, names []string, markers []string) []Child {
	return sortUpTo(buf, names, markers, nil)
}

// compareChildren is SortChildren's order.
func compareChildren(a, b Child) int {
	if c := cmp.Compare(serialOrder(a.Seq), serialOrder(b.Seq)); c != 0 {
		return c
	}
	return strings.Compare(a.Name, b.Name)
}

// sortPrefixInto is sortChildrenInto cut after the child named self: the
// children that sort before it, and it, in order (if self is not among
// names, those that would sort before it). Only they are sorted, so a
// waiter near the front of a long queue sorts a few children, not the
// queue. A self that matches no marker cuts nothing.
func sortPrefixInto(buf []Child, names []string, markers []string, self string) []Child {
	if me, ok := parseChild(self, markers); ok {
		return sortUpTo(buf, names, markers, &me)
	}
	return sortUpTo(buf, names, markers, nil)
}

// sortUpTo parses names into buf's array, keeping those that sort at or
// before last (all of them if last is nil), and sorts them.
func sortUpTo(buf []Child, names []string, markers []string, last *Child) []Child {
	out := buf[:0]
	for _, n := range names {
		if c, ok := parseChild(n, markers); ok && (last == nil || compareChildren(c, *last) <= 0) {
			out = append(out, c)
		}
	}
	slices.SortFunc(out, compareChildren)
	return out
}

// childBufs holds the arrays an acquire sorts its snapshots into: a fresh
// one per snapshot (a Child holds pointers, so the allocator must set up
// each) cost about 8 % of the client's CPU in a herd of 50 sessions (CPU
// profile of lockload -vs-zk).
var childBufs = sync.Pool{New: func() any { return new([]Child) }}

// serialOrder returns the key by which sequence seq sorts: the sequence read
// as an unsigned 32-bit number. The server formats the parent's cversion, a
// signed 32-bit counter, with %010d; after 2^31 child changes it wraps to
// negative values, which were created after every non-negative one. Sorting
// them as signed numbers would put a new node before the holder's, and two
// contenders would hold at once. Read as uint32 (serial-number order), the
// order is the creation order until the counter wraps to 0 again, 2^32
// changes after the directory was created. A sequence outside the 32-bit
// range (never written by the server) keeps its value.
func serialOrder(seq int64) int64 {
	if seq < 0 && seq >= -1<<31 {
		return seq + 1<<32
	}
	return seq
}

// parseChild finds the marker occurring last in name and parses the sequence
// after it.
func parseChild(name string, markers []string) (Child, bool) {
	best, bestAt := "", -1
	for _, m := range markers {
		if m == "" {
			continue
		}
		if at := strings.LastIndex(name, m); at > bestAt || (at == bestAt && at >= 0 && len(m) > len(best)) {
			best, bestAt = m, at
		}
	}
	if bestAt < 0 {
		return Child{}, false
	}
	seq, ok := parseSeq(name[bestAt+len(best):])
	if !ok {
		return Child{}, false
	}
	return Child{Name: name, Marker: best, Seq: seq}, true
}

// parseSeq parses a sequence suffix: decimal digits, optionally after a '-'.
func parseSeq(s string) (int64, bool) {
	if s == "" || len(s) > 20 {
		return 0, false
	}
	digits := s
	if digits[0] == '-' {
		digits = digits[1:]
	}
	if digits == "" {
		return 0, false
	}
	for i := 0; i < len(digits); i++ {
		if digits[i] < '0' || digits[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, false
	}
	return n, true
}

// indexOf returns the index of the child named name in sorted, or -1.
func indexOf(sorted []Child, name string) int {
	for i := range sorted {
		if sorted[i].Name == name {
			return i
		}
	}
	return -1
}
