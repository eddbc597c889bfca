package discovery

import (
	"context"

	"github.com/zkrecipes/zkrecipes/session"
)

// Registration keeps one instance registered at <base>/<name>/<id>, as
// Curator's ServiceDiscovery.registerService does, and keeps it there: a
// Dynamic instance's node is created again after a session loss, and any
// instance's node after someone else deleted it. Close unregisters it.
//
// A Registration is safe for concurrent use.
type Registration struct {
	_ struct{}
}

// Register validates inst and starts keeping it registered under base on
// sess; it does no I/O itself (Wait blocks until the node exists). An empty
// ID gets a random UUID and a zero RegistrationTime the current time (see
// Instance). Options: WithLogger. A nil session, a bad base path, name or
// id, or a bad option gives an error matching session.ErrBadArgument.
func Register(sess *session.Session, base string, inst Instance, opts ...Option) (*Registration, error) {
	return nil, nil
}

// Instance returns the instance as registered (its ID and RegistrationTime
// filled in), with the data of the last Update. It does no I/O.
func (r *Registration) Instance() Instance { return Instance{} }

// Path returns the path of the instance's node (relative to the session's
// namespace) as it exists now, or "" while it does not exist. It does no I/O.
func (r *Registration) Path() string { return "" }

// Wait blocks until the instance's node exists, at once if it does. It
// returns an error matching ctx's when ctx ends first, session.ErrClosed
// after Close or once the session is closed, and the error that stopped the
// registration (a ZooKeeper refusal such as zk.ErrNoAuth). Safe to call
// concurrently.
func (r *Registration) Wait(ctx context.Context) error { return nil }

// Update replaces the registered instance's data with inst and blocks until
// the node holds it. inst must have the registration's Name, ID and Type;
// a zero RegistrationTime keeps the registration's. When ctx ends first it
// returns an error matching ctx's; the data is written all the same as soon
// as it can be. It returns session.ErrClosed after Close, and
// session.ErrBadArgument for a nil ctx or another Name, ID or Type. Safe to
// call concurrently: the data of the call that came last wins.
func (r *Registration) Update(ctx context.Context, inst Instance) error { return nil }

// Close unregisters the instance: it stops keeping it, deletes its node
// (whatever its Type, as Curator's unregisterService does; waiting a few
// seconds at most, then in the session's background queue), and returns
// after every goroutine it started has exited. Idempotent; returns nil.
func (r *Registration) Close() error { return nil }
