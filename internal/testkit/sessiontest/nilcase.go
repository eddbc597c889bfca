package sessiontest

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/go-zookeeper/zk"
	"go.uber.org/goleak"
)

// NilCase is one call of an API with a nil or otherwise bad input, for
// CheckNilCases. Call returns the call's error; it fails t itself when the
// call returns something besides the error (a session, a lease, a channel).
type NilCase struct {
	Name string
	Call func(t *testing.T) error
	Want error  // the sentinel the error must match
	Arg  string // the text naming the bad argument
}

// CheckNilCases runs each case in its own subtest and checks that the call
// does not panic, returns an error matching Want whose text contains Arg,
// leaves no goroutine running (goleak.Find against a snapshot taken just
// before the call), and creates or deletes no znode under root (Subtree
// before and after, read through raw).
func CheckNilCases(t *testing.T, raw *zk.Conn, root string, cases []NilCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			before := Subtree(t, raw, root)
			running := goleak.IgnoreCurrent()
			p, err := CatchPanic(func() error { return c.Call(t) })
			switch {
			case p != nil:
				t.Errorf("panic: %v", p)
			case err == nil:
				t.Errorf("no error, want one matching %v naming %q", c.Want, c.Arg)
			case !errors.Is(err, c.Want) || !strings.Contains(err.Error(), c.Arg):
				t.Errorf("err = %v, want one matching %v naming %q", err, c.Want, c.Arg)
			}
			if err := goleak.Find(running); err != nil {
				t.Errorf("the call left goroutines running: %v", err)
			}
			if after := Subtree(t, raw, root); !slices.Equal(before, after) {
				t.Errorf("znodes under %s changed: before %q, after %q", root, before, after)
			}
		})
	}
}

// CatchPanic calls f and returns what it panicked with (nil if it did not),
// or else its error.
func CatchPanic(f func() error) (p any, err error) {
	defer func() { p = recover() }()
	return nil, f()
}

// Subtree lists every znode below root (root excluded), sorted, read
// through raw. A missing root has no znodes; any other error fails t, so it
// must be called from the test's goroutine.
func Subtree(t testing.TB, raw *zk.Conn, root string) []string {
	t.Helper()
	kids, _, err := raw.Children(root)
	if errors.Is(err, zk.ErrNoNode) {
		return nil
	}
	if err != nil {
		t.Fatalf("children of %s: %v", root, err)
	}
	var out []string
	for _, k := range kids {
		p := root + "/" + k
		out = append(out, p)
		out = append(out, Subtree(t, raw, p)...)
	}
	slices.Sort(out)
	return out
}
