package engine

import (
	"errors"
	"fmt"
	"math/rand"
	"reflect"
	"regexp"
	"testing"
)

var uuidRE = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

func TestNewUUID(t *testing.T) {
	seen := map[string]bool{}
	for i := 0; i < 1000; i++ {
		u := NewUUID()
		if !uuidRE.MatchString(u) {
			t.Fatalf("NewUUID() = %q, not a lowercase dashed v4 UUID", u)
		}
		if seen[u] {
			t.Fatalf("duplicate UUID %q", u)
		}
		seen[u] = true
		if !isUUID(u) {
			t.Fatalf("isUUID(%q) = false", u)
		}
	}
}

func TestProtectedPrefix(t *testing.T) {
	u := "0f8fad5b-d9cb-469f-a165-70867728950e"
	if got, want := ProtectedPrefix(u), "_c_0f8fad5b-d9cb-469f-a165-70867728950e-"; got != want {
		t.Fatalf("ProtectedPrefix = %q, want %q", got, want)
	}
	for _, tc := range []struct{ name, want string }{
		{"_c_" + u + "-lock-0000000001", u},
		{"_c_" + u + "-", u},
		{"_c_" + u, ""},
		{"_c_0f8fad5bd9cb469fa16570867728950e-lock-0000000001", ""}, // go-zookeeper's 32-hex GUID
		{"lock-0000000001", ""},
		{"_c_0f8fad5b-d9cb-469f-a165-70867728950x-lock-1", ""},
	} {
		if got := ProtectedUUID(tc.name); got != tc.want {
			t.Errorf("ProtectedUUID(%q) = %q, want %q", tc.name, got, tc.want)
		}
	}
}

func names(cs []Child) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.Name
	}
	return out
}

func TestSortChildren(t *testing.T) {
	a := "_c_11111111-1111-4111-8111-111111111111-"
	b := "_c_22222222-2222-4222-8222-222222222222-"
	for _, tc := range []struct {
		desc    string
		in      []string
		markers []string
		want    []string
		seqs    []int64
	}{
		{
			desc:    "by sequence, not by uuid",
			in:      []string{b + "lock-0000000003", a + "lock-0000000010", b + "lock-0000000001"},
			markers: []string{"lock-"},
			want:    []string{b + "lock-0000000001", b + "lock-0000000003", a + "lock-0000000010"},
			seqs:    []int64{1, 3, 10},
		},
		{
			desc:    "foreign children ignored",
			in:      []string{"lock", "leases", "lock-", "lock-abc", a + "lock-0000000002", "x-lock-00000000zz", "readme", a + "latch-0000000001"},
			markers: []string{"lock-"},
			want:    []string{a + "lock-0000000002"},
			seqs:    []int64{2},
		},
		{
			desc:    "unprotected Curator names (no protection) still sort",
			in:      []string{"lock-0000000005", a + "lock-0000000004"},
			markers: []string{"lock-"},
			want:    []string{a + "lock-0000000004", "lock-0000000005"},
			seqs:    []int64{4, 5},
		},
		{
			desc:    "marker occurring twice: last occurrence counts",
			in:      []string{"_c_lock-lock-0000000007", a + "lock-0000000006"},
			markers: []string{"lock-"},
			want:    []string{a + "lock-0000000006", "_c_lock-lock-0000000007"},
			seqs:    []int64{6, 7},
		},
		{
			desc:    "read-write markers share one order",
			in:      []string{a + "__WRIT__0000000002", b + "__READ__0000000001", a + "__READ__0000000003", b + "lock-0000000000"},
			markers: []string{"__READ__", "__WRIT__"},
			want:    []string{b + "__READ__0000000001", a + "__WRIT__0000000002", a + "__READ__0000000003"},
			seqs:    []int64{1, 2, 3},
		},
		{
			desc:    "markers of different lengths",
			in:      []string{a + "ab0000000002", b + "abcd0000000001"},
			markers: []string{"ab", "abcd"},
			want:    []string{b + "abcd0000000001", a + "ab0000000002"},
			seqs:    []int64{1, 2},
		},
		{
			// After 2^31 changes of the parent the server's sequence wraps to
			// negative values: they were created later and must sort after
			// the holder's, else the new node would hold too.
			desc:    "negative sequence after 2^31 sorts after the positive ones",
			in:      []string{b + "lock--000000001", a + "lock-2147483647", b + "lock--2147483648", a + "lock-0000000005"},
			markers: []string{"lock-"},
			want:    []string{a + "lock-0000000005", a + "lock-2147483647", b + "lock--2147483648", b + "lock--000000001"},
			seqs:    []int64{5, 2147483647, -2147483648, -1},
		},
		{
			desc:    "equal sequences by name",
			in:      []string{b + "lock-0000000001", a + "lock-0000000001"},
			markers: []string{"lock-"},
			want:    []string{a + "lock-0000000001", b + "lock-0000000001"},
			seqs:    []int64{1, 1},
		},
		{
			desc:    "empty",
			in:      nil,
			markers: []string{"lock-"},
			want:    []string{},
		},
		{
			desc:    "empty marker ignored",
			in:      []string{"0000000001"},
			markers: []string{""},
			want:    []string{},
		},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			in := append([]string(nil), tc.in...)
			got := SortChildren(tc.in, tc.markers)
			if !reflect.DeepEqual(names(got), tc.want) {
				t.Fatalf("SortChildren(%q) = %q, want %q", tc.in, names(got), tc.want)
			}
			for i, c := range got {
				if c.Seq != tc.seqs[i] {
					t.Errorf("seq of %q = %d, want %d", c.Name, c.Seq, tc.seqs[i])
				}
			}
			if !reflect.DeepEqual(in, tc.in) {
				t.Fatalf("input modified")
			}
		})
	}
}

func TestStandardDecide(t *testing.T) {
	sorted := SortChildren([]string{"lock-0000000000", "lock-0000000001", "lock-0000000002", "lock-0000000003"}, []string{"lock-"})
	for _, tc := range []struct {
		desc  string
		d     *Driver
		self  int
		held  bool
		watch string
		err   error
	}{
		{"first holds", Standard("lock-", 1), 0, true, "", nil},
		{"second watches first", Standard("lock-", 1), 1, false, "lock-0000000000", nil},
		{"last watches predecessor", Standard("lock-", 1), 3, false, "lock-0000000002", nil},
		{"semaphore of 3: third holds", Standard("lock-", 3), 2, true, "", nil},
		{"semaphore of 3: fourth watches first", Standard("lock-", 3), 3, false, "lock-0000000000", nil},
		{"not in snapshot", Standard("lock-", 1), -1, false, "", ErrNodeDeleted},
		{"index out of range", Standard("lock-", 1), 4, false, "", ErrNodeDeleted},
		{"no holders", Standard("lock-", 0), 0, false, "", ErrBadDriver},
	} {
		held, watch, err := tc.d.Decide(sorted, tc.self)
		if held != tc.held || watch != tc.watch || !errors.Is(err, tc.err) || (tc.err == nil) != (err == nil) {
			t.Errorf("%s: Decide(self=%d) = (%v, %q, %v), want (%v, %q, %v)", tc.desc, tc.self, held, watch, err, tc.held, tc.watch, tc.err)
		}
	}
}

// withMarkers returns a driver of marker among markers that always holds.
func withMarkers(marker string, markers ...string) *Driver {
	return &Driver{Marker: marker, Markers: markers, Decide: func([]Child, int) (bool, string, error) { return true, "", nil }}
}

func TestCheckDriver(t *testing.T) {
	for _, tc := range []struct {
		d  *Driver
		ok bool
	}{
		{Standard("lock-", 1), true},
		{nil, false},
		{Standard("", 1), false},
		{Standard("a/b", 1), false},
		{Standard("a\x00", 1), false},
		{withMarkers("__READ__", "__READ__", "__WRIT__"), true},
		{withMarkers("lock-", "__READ__"), false},
		{&Driver{Marker: "lock-", Markers: []string{"lock-"}}, false}, // no Decide
		{Standard("lock-", 3), true},
		{Standard("lock-", 0), false},
		{Standard("lock-", -1), false},
	} {
		err := checkDriver(tc.d)
		if (err == nil) != tc.ok {
			t.Errorf("checkDriver(%#v) = %v, want ok=%v", tc.d, err, tc.ok)
		}
		if err != nil && !errors.Is(err, ErrBadDriver) {
			t.Errorf("checkDriver(%#v) = %v, not ErrBadDriver", tc.d, err)
		}
	}
}

func TestParseFixedData(t *testing.T) {
	u := NewUUID()
	for _, tc := range []struct{ in, uuid, id string }{
		{u + " 10.0.0.1", u, "10.0.0.1"},
		{u + " ", u, ""},
		{u + " a b", u, "a b"},
		{"10.0.0.1", "", "10.0.0.1"},
		{u, "", u},
	} {
		gu, gid := parseFixedData([]byte(tc.in))
		if gu != tc.uuid || gid != tc.id {
			t.Errorf("parseFixedData(%q) = %q, %q; want %q, %q", tc.in, gu, gid, tc.uuid, tc.id)
		}
	}
}

// TestSortPrefixInto: the prefix sort equals the full sort cut after our
// node, on shuffled snapshots with foreign names, two markers, equal
// sequences (a read-write lock's downgrade node beside its writer) and
// sequences past 2^31 (negative, sorted last); with our node missing it
// gives the children that would sort before it, and for a name that is no
// recipe node the whole sort.
func TestSortPrefixInto(t *testing.T) {
	markers := []string{"__READ__", "__WRIT__"}
	rng := rand.New(rand.NewSource(1))
	name := func(i int, marker string, seq int64) string {
		return fmt.Sprintf("_c_%08d-%s%010d", i, marker, seq)
	}
	for round := 0; round < 500; round++ {
		var names []string
		n := 1 + rng.Intn(40)
		for i := 0; i < n; i++ {
			seq := int64(rng.Intn(60))
			if rng.Intn(8) == 0 {
				seq = -int64(1 + rng.Intn(60))
			}
			switch rng.Intn(10) {
			case 0:
				names = append(names, fmt.Sprintf("foreign-%d", i))
			case 1, 2, 3:
				names = append(names, name(i, "__READ__", seq))
			default:
				names = append(names, name(i, "__WRIT__", seq))
			}
		}
		self := names[rng.Intn(len(names))]
		missing := rng.Intn(5) == 0
		if missing {
			self = name(n, "__READ__", int64(rng.Intn(60)))
		}
		var want []Child
		me, ok := parseChild(self, markers)
		for _, c := range SortChildren(names, markers) {
			if !ok || compareChildren(c, me) <= 0 { // a foreign self: the whole sort
				want = append(want, c)
			}
		}
		got := sortPrefixInto(nil, names, markers, self)
		if len(got) == 0 && len(want) == 0 {
			continue
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("round %d, self %s (missing %v):\n got %v\nwant %v", round, self, missing, got, want)
		}
	}
}

// TestNewNodeBase: newNodeBase is the directory, ProtectedPrefix of a new
// version 4 UUID, the marker and the sequence, and an attempt's
// protectedPrefix follows its UUID.
func TestNewNodeBase(t *testing.T) {
	base, at := newNodeBase("/app/lock", "lock-", "0000000007")
	p := base[at : at+len(protectedMarker)+uuidLen+1]
	u := p[len(protectedMarker) : len(p)-1]
	if !uuidRE.MatchString(u) || p != ProtectedPrefix(u) || base != "/app/lock/"+p+"lock-0000000007" {
		t.Fatalf("newNodeBase() = %q, %d", base, at)
	}
	if q, _ := newNodeBase("/app/lock", "lock-", ""); q[at:at+len(p)] == p || q != "/app/lock/"+q[at:at+len(p)]+"lock-" {
		t.Fatalf("newNodeBase() = %q after %q", q, base)
	}
	a := &attempt{prefix: p, uuid: u}
	if got := a.protectedPrefix(); got != p {
		t.Fatalf("protectedPrefix = %q, want %q", got, p)
	}
	a.uuid = NewUUID()
	if got := a.protectedPrefix(); got != ProtectedPrefix(a.uuid) {
		t.Fatalf("protectedPrefix after a new UUID = %q, want %q", got, ProtectedPrefix(a.uuid))
	}
}
