package session

import (
	"time"

	"github.com/zkrecipes/zkrecipes/internal/zksession"
)

// State is the connection state of a Session, as Curator names them.
type State int32

// The states of a Session (see the package documentation).
const (
	// Connected: the first ZooKeeper session exists and the connection is up.
	Connected State = iota + 1
	// Suspended: the connection is down; the session may still be alive on
	// the server. Under the Standard loss policy leases end at their
	// deadline if the connection is still down then; under EndAtDisconnect
	// every lease ends here.
	Suspended
	// Reconnected: the connection is back, to the same session after
	// Suspended, or to a new session after Lost.
	Reconnected
	// Lost: the session is gone (expired, replaced, or down for longer than
	// the negotiated session timeout), and its ephemeral nodes with it. Every
	// lease ends here.
	Lost
	// ReadOnly: connected to a read-only server. go-zookeeper never asks for
	// read-only mode, so no Session enters it today.
	ReadOnly
	// Closed: Close was called. Final.
	Closed
)

// String returns the state's name, e.g. "Suspended".
func (st State) String() string { return zksession.State(st).String() }

// Event is one state transition.
type Event struct {
	// State is the state entered.
	State State
	// SessionID is the ZooKeeper session the state refers to: the new one
	// at Connected and Reconnected, the one at risk at Suspended, the one
	// that ended at Lost.
	SessionID int64
	// At is when the Session observed the transition.
	At time.Time
}

func publicEvent(ev zksession.Event) Event {
	return Event{State: State(ev.State), SessionID: ev.SessionID, At: ev.At}
}

// Subscription delivers every state transition after Subscribe, in order,
// without ever blocking the Session: each subscription has its own
// unbounded queue, so a slow reader loses nothing and stalls no one. It is
// safe for concurrent use.
type Subscription struct {
	sub *zksession.Subscription[Event]
}

// Initial returns the state when Subscribe was called.
func (sub *Subscription) Initial() Event { return sub.sub.Initial() }

// C returns the channel of transitions. After Session.Close it delivers
// Closed and is closed (without Closed, if it is not read within half a
// second).
func (sub *Subscription) C() <-chan Event { return sub.sub.C() }

// Close ends the subscription: undelivered transitions are dropped and C is
// closed. Idempotent.
func (sub *Subscription) Close() { sub.sub.Close() }

// LossPolicy says which transitions end a lease; it is one setting of the
// Session (WithLossPolicy), read by every recipe.
type LossPolicy int

const (
	// Standard (the default) ends leases at a deadline: two thirds of the
	// negotiated session timeout T after the send time of the newest request
	// a server answered, if the connection is down then, and at Lost and
	// Closed. The server cannot expire the session sooner than T after it
	// received that request, so the holder has at least T/3 to stop before
	// anyone else can acquire. A disconnect mended before the deadline (a
	// connection reset, a server restarted in a rolling restart) ends
	// nothing. Behind a ZooKeeper follower the margin is weaker (a follower
	// that dies while no other member answers, or one cut off from its
	// leader, can leave a lease running past the expiry: docs/design.md);
	// EndAtDisconnect is the stricter choice there.
	Standard LossPolicy = iota
	// SessionOnly ends leases only at Lost and Closed: a holder rides out
	// disconnects, and may overlap with the next holder when the session
	// expires while it is cut off.
	SessionOnly
	// EndAtDisconnect ends leases at the first Suspended (any disconnect,
	// even one the session survives), Lost and Closed: for holders that must
	// stop before any other may enter even behind a follower that fails
	// (with T ≥ 1.5 × (syncLimit + ½) × tickTime), at the price of ending
	// every lease at every disconnect, rolling restarts included.
	EndAtDisconnect
)

// String returns "standard", "session-only" or "end-at-disconnect".
func (p LossPolicy) String() string { return zksession.LossPolicy(p).String() }
