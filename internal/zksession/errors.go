package zksession

import "errors"

// Sentinel errors. Their texts carry no package prefix: the public session
// package and the recipes name themselves once, at the outermost layer, so
// that an error reads "mutex "/locks/a": session lost (session_id 0x…)" and
// not a chain of prefixes. go-zookeeper's own sentinels (zk.ErrNoNode,
// zk.ErrNoAuth, ...) stay reachable through wrapping.
var (
	// ErrClosed is returned by every call made after Close, and is the cause
	// of every epoch and lease context canceled by Close.
	ErrClosed = errors.New("session closed")
	// ErrLost means the ZooKeeper session of an epoch is gone (expired, replaced
	// by a new session, or declared lost by the local timer).
	ErrLost = errors.New("session lost")
	// ErrSuspended is the cause of a standard-policy lease context canceled
	// because the connection went down (the session may still be alive).
	ErrSuspended = errors.New("connection suspended")
	// ErrSessionChanged means an operation bound to an epoch ran, or may have
	// run, on a different ZooKeeper session (or after the epoch ended).
	// CreateEphemeral undoes its create; Retry only reports it (the op's
	// effect stays) and also wraps ErrLost or ErrClosed.
	ErrSessionChanged = errors.New("session changed under the operation")
	// ErrBadArgument is returned for an invalid argument or option value: a
	// nil context, a nil function, a bad path, an empty or malformed server
	// list, flags CreateEphemeral does not take; the message names it.
	ErrBadArgument = errors.New("bad argument")
	// ErrUnknownOutcome means a write was sent and its answer was lost (the
	// connection dropped, or ctx ended or Close began while it was in
	// flight): the server may or may not have applied it. A write that was
	// never sent never matches it. Package recipes exports it as
	// recipes.ErrUnknownOutcome.
	ErrUnknownOutcome = errors.New("outcome unknown")
	// ErrStopped is returned by SendOnce when its stop channel closed
	// while it waited to send: nothing was sent.
	ErrStopped = errors.New("stopped before it was sent")
	// ErrBadEpoch is returned when a nil *Epoch, or one from another Session,
	// is passed to a method that binds an operation to an epoch.
	ErrBadEpoch = errors.New("bad epoch")
)
