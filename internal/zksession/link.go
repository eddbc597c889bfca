package zksession

import (
	"fmt"
	"reflect"
)

// fromPublic returns the *Session behind a *session.Session, the public
// type, and nil for anything else. Package session sets it in its init
// function: it is the one link from the public type to its implementation
// (session imports this package, so this package cannot name session's
// type), set once before any code of the module runs and never changed, the
// one exception to the rule of no package-level state.
var fromPublic func(any) *Session

// LinkPublic is called once, by package session's init function.
func LinkPublic(f func(any) *Session) { fromPublic = f }

// Of returns the Session behind s, a *session.Session. A nil s, or a value of
// another type, gives an error matching ErrBadArgument.
func Of(s any) (*Session, error) {
	if fromPublic != nil {
		if zs := fromPublic(s); zs != nil {
			return zs, nil
		}
	}
	if v := reflect.ValueOf(s); s == nil || v.Kind() == reflect.Pointer && v.IsNil() {
		return nil, fmt.Errorf("%w: nil session", ErrBadArgument)
	}
	return nil, fmt.Errorf("%w: a session not made by Connect (%T)", ErrBadArgument, s)
}
