package session

import "github.com/zkrecipes/zkrecipes/internal/zksession"

// Errors. Match them with errors.Is: the errors returned by this module wrap
// them with the recipe, path or session id they concern, and go-zookeeper's
// own sentinels (zk.ErrNoAuth, ...) stay reachable through wrapping.
var (
	// ErrClosed is returned by calls after Close, of the Session or of a
	// recipe, and is the cause of every lease or term that Close ended.
	ErrClosed = zksession.ErrClosed
	// ErrLost means the ZooKeeper session is gone: expired, replaced, or down
	// for longer than its timeout. Every lease of it has ended, and its
	// ephemeral nodes are (or will soon be) deleted by the server.
	ErrLost = zksession.ErrLost
	// ErrSuspended is the cause of a lease ended while the connection is
	// down and the session may still be alive: under the Standard loss
	// policy at the lease deadline, under EndAtDisconnect at the disconnect.
	// The server may expire the session soon after.
	ErrSuspended = zksession.ErrSuspended
	// ErrBadArgument is returned, before anything is started, for an invalid
	// argument or option anywhere in this module: a nil context, session or
	// function, a bad path, a malformed server list, a bad id or count. The
	// message names what is wrong.
	ErrBadArgument = zksession.ErrBadArgument
)
