package discovery

import "errors"

// Errors of this package; match them with errors.Is. The errors of the
// layers below (session.ErrClosed, session.ErrBadArgument, zk.ErrNoAuth,
// context.Canceled, ...) stay reachable through wrapping.
var (
	// ErrNoInstances is returned by Provider.Pick when the cache holds no
	// instance that may be picked: none at all, or every one disabled or
	// reported down.
	ErrNoInstances = errors.New("discovery: no instances")
	// ErrBadData is returned when data does not parse as what it should be:
	// an instance's JSON (Instance.UnmarshalJSON) or a Spring payload
	// (ParseSpring).
	ErrBadData = errors.New("discovery: bad data")
)
