package session

import "errors"

// Sentinel errors. Callers match them with errors.Is; the errors returned by this
// package wrap them with the path or session id, and go-zookeeper's own sentinels
// (zk.ErrNoNode, zk.ErrNoAuth, ...) stay reachable through wrapping.
var (
	// ErrClosed is returned by every call made after Close, and is the cause
	// of every epoch and lease context canceled by Close.
	ErrClosed = errors.New("session: closed")
	// ErrLost means the ZooKeeper session of an epoch is gone (expired, replaced
	// by a new session, or declared lost by the local timer).
	ErrLost = errors.New("session: lost")
	// ErrSuspended is the cause of a standard-policy lease context canceled
	// because the connection went down (the session may still be alive).
	ErrSuspended = errors.New("session: connection suspended")
	// ErrSessionChanged means an operation bound to an epoch ran, or may have
	// run, on a different ZooKeeper session (or after the epoch ended).
	// CreateEphemeral undoes its create; Retry only reports it (the op's
	// effect stays) and also wraps ErrLost or ErrClosed.
	ErrSessionChanged = errors.New("session: session changed under the operation")
	// ErrBadPath is returned for paths that are not valid ZooKeeper paths.
	ErrBadPath = errors.New("session: bad path")
	// ErrNoServers is returned by Connect for an empty server list.
	ErrNoServers = errors.New("session: no servers")
	// ErrBadOption is returned by Connect for an invalid option value, and by
	// every call for an invalid argument (a nil context, a nil function,
	// flags CreateEphemeral does not take); the message names the argument.
	ErrBadOption = errors.New("session: bad option")
	// ErrBadEpoch is returned when a nil *Epoch, or one from another Session,
	// is passed to a method that binds an operation to an epoch.
	ErrBadEpoch = errors.New("session: bad epoch")
)
