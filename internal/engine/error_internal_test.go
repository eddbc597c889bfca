package engine

import (
	"errors"
	"fmt"
	"testing"
)

// TestNewErrorFindsItsOwnError: NewError returns an err that holds an *Error
// of the same recipe and path, wrapped once, twice or within a join, as it
// is, and wraps any other (another recipe's, another path's, none) once.
func TestNewErrorFindsItsOwnError(t *testing.T) {
	cause := errors.New("cause")
	own := &Error{Recipe: "mutex", Path: "/p", Err: cause}
	other := &Error{Recipe: "leader", Path: "/p", Err: cause}
	for _, tc := range []struct {
		name string
		err  error
		same bool
	}{
		{"own", own, true},
		{"wrapped", fmt.Errorf("x: %w", own), true},
		{"wrapped twice", fmt.Errorf("y: %w", fmt.Errorf("x: %w", own)), true},
		{"joined", errors.Join(cause, own), true},
		{"two wrapped", fmt.Errorf("%w: %w", cause, own), true},
		{"other recipe", other, false},
		{"other path", &Error{Recipe: "mutex", Path: "/q", Err: cause}, false},
		{"none", cause, false},
		{"joined none", errors.Join(cause, errors.New("more")), false},
	} {
		got := NewError("mutex", "/p", tc.err)
		if tc.same {
			if got != tc.err {
				t.Errorf("%s: NewError wrapped it again: %v", tc.name, got)
			}
			continue
		}
		e, ok := got.(*Error)
		if !ok || e.Recipe != "mutex" || e.Path != "/p" || e.Err != tc.err {
			t.Errorf("%s: NewError = %#v, want an *Error of mutex \"/p\" around it", tc.name, got)
		}
	}
	if NewError("mutex", "/p", nil) != nil {
		t.Error("NewError of nil is not nil")
	}
	if n := testing.AllocsPerRun(100, func() { _ = NewError("mutex", "/p", own) }); n != 0 {
		t.Errorf("NewError of an err already wrapped allocates %v times", n)
	}
}
