package zktest

import "errors"

// errBadArgument is returned by the helpers for an argument that cannot be
// used, such as a nil context.
var errBadArgument = errors.New("zktest: bad argument")
