package zksession

import "fmt"

// State is the connection state of a Session as its subscribers see it.
// The values follow Curator's ConnectionState.
type State int32

// The states of a Session (docs/design.md draws their transitions).
const (
	// Connected: the first ZooKeeper session exists and the connection is up.
	Connected State = iota + 1
	// Suspended: the connection is down; the session may still be alive on the
	// server, which may expire it at any moment.
	Suspended
	// Reconnected: the connection is back, either to the same session (after
	// Suspended) or to a new session (after Lost; then with a new Epoch).
	Reconnected
	// Lost: the session is gone (expired, replaced, or down for longer than the
	// negotiated session timeout). Its epoch is over.
	Lost
	// ReadOnly: connected to a read-only server. go-zookeeper v1.0.4 never asks
	// for read-only mode, so this state is reserved and not produced today.
	ReadOnly
	// Closed: Close was called. Final.
	Closed
)

// String returns the state's name, e.g. "Suspended".
func (s State) String() string {
	switch s {
	case Connected:
		return "Connected"
	case Suspended:
		return "Suspended"
	case Reconnected:
		return "Reconnected"
	case Lost:
		return "Lost"
	case ReadOnly:
		return "ReadOnly"
	case Closed:
		return "Closed"
	}
	return fmt.Sprintf("State(%d)", int32(s))
}

// LossPolicy says which state transitions end a lease. It is one setting on
// the Session, read by every recipe through LeaseContext.
type LossPolicy int

const (
	// Standard (the default) ends leases at a deadline, not at a disconnect:
	// two thirds of the negotiated session timeout T after the send time of
	// the newest request a server answered. The server cannot expire the
	// session sooner than T after it received that request, so a lease ends
	// at least T/3 before any expiry. A reconnection to the same session
	// before the deadline keeps every lease; Lost and Closed end them at
	// once. (docs/design.md: behind a follower that dies, or that is cut
	// off from its leader, the margin is weaker.)
	Standard LossPolicy = iota
	// SessionOnly ends leases only at Lost and Closed. A holder rides out
	// disconnects, accepting that it may overlap with the next holder when the
	// session expires while it is disconnected.
	SessionOnly
	// EndAtDisconnect ends leases at the first disconnect (Suspended), at
	// Lost and at Closed, even when the session survives the disconnect: the
	// stricter choice behind followers (docs/design.md).
	EndAtDisconnect
)

// String returns "standard", "session-only" or "end-at-disconnect".
func (p LossPolicy) String() string {
	switch p {
	case Standard:
		return "standard"
	case SessionOnly:
		return "session-only"
	case EndAtDisconnect:
		return "end-at-disconnect"
	}
	return fmt.Sprintf("LossPolicy(%d)", int(p))
}
