// Package leasetest checks what every lease type promises, for the tests of
// the recipes that return leases (mutex, rwlock, semaphore, leader).
package leasetest

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/zkrecipes/zkrecipes/session"
)

// Lease is what every lease type has: a term of leadership too.
type Lease interface {
	Done() <-chan struct{}
	Err() error
	Context() context.Context
}

// Call is a method of a nil lease beyond those of Lease, for CheckNil. Call
// returns the method's error and fails t itself when the method returns
// something besides the error. NoError marks a method that returns no error
// (Resign, an accessor): Call must then return nil.
type Call struct {
	Name    string
	Call    func(t *testing.T) error
	NoError bool
}

// CheckNil checks that l, a nil lease, behaves as a lease that has ended
// with an error matching session.ErrBadArgument whose text starts with
// recipe and contains what (e.g. "nil lease"): Done is closed; Err and the
// cause of Context are such an error and the Context is canceled; Token and
// Node, where l has them, return 0 and ""; each call returns such an error,
// or nil if it is marked NoError. Each method runs in its own subtest, and
// none may panic.
func CheckNil(t *testing.T, l Lease, recipe, what string, calls ...Call) {
	t.Helper()
	bad := func(t *testing.T, method string, err error) {
		t.Helper()
		if !errors.Is(err, session.ErrBadArgument) || !strings.HasPrefix(err.Error(), recipe+": ") ||
			!strings.Contains(err.Error(), what) {
			t.Errorf("%s of a nil lease = %v; want an error matching session.ErrBadArgument, starting with %q and naming %q",
				method, err, recipe+": ", what)
		}
	}
	all := []Call{
		{Name: "Done", NoError: true, Call: func(t *testing.T) error {
			select {
			case <-l.Done():
			default:
				t.Error("Done of a nil lease is not closed")
			}
			return nil
		}},
		{Name: "Err", Call: func(*testing.T) error { return l.Err() }},
		{Name: "Context", Call: func(t *testing.T) error {
			ctx := l.Context()
			if !errors.Is(ctx.Err(), context.Canceled) {
				t.Errorf("Context of a nil lease: Err() = %v, want context.Canceled", ctx.Err())
			}
			return context.Cause(ctx)
		}},
	}
	if tl, ok := l.(interface{ Token() int64 }); ok {
		all = append(all, Call{Name: "Token", NoError: true, Call: func(t *testing.T) error {
			if tok := tl.Token(); tok != 0 {
				t.Errorf("Token of a nil lease = %d, want 0", tok)
			}
			return nil
		}})
	}
	if nl, ok := l.(interface{ Node() string }); ok {
		all = append(all, Call{Name: "Node", NoError: true, Call: func(t *testing.T) error {
			if n := nl.Node(); n != "" {
				t.Errorf("Node of a nil lease = %q, want \"\"", n)
			}
			return nil
		}})
	}
	for _, c := range append(all, calls...) {
		t.Run(c.Name, func(t *testing.T) {
			var err error
			func() {
				defer func() {
					if p := recover(); p != nil {
						t.Fatalf("%s of a nil lease panicked: %v", c.Name, p)
					}
				}()
				err = c.Call(t)
			}()
			if c.NoError {
				if err != nil {
					t.Errorf("%s of a nil lease = %v, want nil", c.Name, err)
				}
				return
			}
			bad(t, c.Name, err)
		})
	}
}
