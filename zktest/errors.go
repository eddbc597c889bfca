package zktest

import "errors"

// ErrBadArgument is returned by the helpers for an argument that cannot be
// used, such as a nil context; match it with errors.Is.
var ErrBadArgument = errors.New("zktest: bad argument")
