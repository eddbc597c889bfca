package zksession

import (
	"fmt"
	"time"

	"github.com/go-zookeeper/zk"
)

// Hooks are the Session's observation callbacks, set by the public session
// package's WithHooks from its Hooks. A nil field costs nothing: the code
// that would call it checks the field and goes on.
type Hooks struct {
	// State is called for every state transition, in order, on a goroutine
	// of its own (a Subscription's), with the public session (see
	// OpenHooks). It is never called for a Session that Connect did not
	// return.
	State func(pub any, ev Event)
	// Request is called for every request answered (err from the reply's
	// error code) and for every request whose connection broke before its
	// answer (err zk.ErrConnectionClosed), on go-zookeeper's receiving
	// goroutine (or the one closing the connection).
	Request func(op string, d time.Duration, err error)
	// Retry is called each time Retry runs an operation again after a
	// connection error (err).
	Retry func(err error)
	// User is the public session package's hooks, for the recipe engine.
	User any
}

// WithHooks sets the Session's hooks (nil: none).
func WithHooks(h *Hooks) Option {
	return func(c *config) error { c.hooks = h; return nil }
}

// Hooks returns the Session's hooks, nil when none were set.
func (s *Session) Hooks() *Hooks { return s.cfg.hooks }

// OpenHooks lets the State hook run, with pub as the public session: the
// public package calls it as soon as Connect has returned the Session, so
// that the hook never sees a session the caller does not have. Transitions
// from Connect's first Connected on are delivered then, in order.
func (s *Session) OpenHooks(pub any) {
	s.hookOnce.Do(func() {
		s.hookPub = pub
		close(s.hookGate)
	})
}

// dropHooks ends the State hook's subscription undelivered: Connect failed.
func (s *Session) dropHooks() {
	s.hookOnce.Do(func() {
		s.hookDrop = true
		close(s.hookGate)
	})
}

// startStateHook subscribes the State hook, if any, before the first
// session: its pump waits for OpenHooks (or dropHooks) before it delivers.
func (s *Session) startStateHook() {
	s.hookGate = make(chan struct{})
	h := s.cfg.hooks
	if h == nil || h.State == nil {
		return
	}
	subscribe(s, func(ev Event) Event { return ev }, func(ev Event) {
		if !s.hookDrop {
			h.State(s.hookPub, ev)
		}
	}, s.hookGate)
}

// NoteRetry tells the Retry hook, if any, that an operation is sent again
// after the connection error err (Retry does; so do the recipes' own create
// loops, which must look for a ghost node first).
func (s *Session) NoteRetry(err error) {
	if h := s.cfg.hooks; h != nil && h.Retry != nil {
		h.Retry(err)
	}
}

// PendingDeletes returns how many deletes the guaranteed-delete queue holds
// (queued or in progress, not yet done or given up).
func (s *Session) PendingDeletes() int { return int(s.gdPending.Load()) }

// FaultHeard returns when a server was last heard from before the last
// established connection broke: as near to the start of the fault as the
// client can tell (the reconnect that finds a session expired is heard
// later). Before any break, it returns when a server was last heard from
// (zero if never).
func (s *Session) FaultHeard() time.Time {
	if n := s.heardAtBreak.Load(); n != 0 {
		return monoTime(n)
	}
	return s.wire.lastHeard()
}

// opNames are ZooKeeper's request opcodes, named as the Java server's OpCode
// constants.
var opNames = map[int32]string{
	0: "notification", 1: "create", 2: "delete", 3: "exists", 4: "getData", 5: "setData",
	6: "getACL", 7: "setACL", 8: "getChildren", 9: "sync", 11: "ping", 12: "getChildren2",
	13: "check", 14: "multi", 15: "create2", 16: "reconfig", 17: "checkWatches",
	18: "removeWatches", 19: "createContainer", 20: "deleteContainer", 21: "createTTL",
	22: "multiRead", 100: "auth", 101: "setWatches", 102: "sasl", 103: "getEphemerals",
	104: "getAllChildrenNumber", 105: "setWatches2", 106: "addWatch", 107: "whoAmI",
	-11: "closeSession",
}

// opName returns the name of opcode op.
func opName(op int32) string {
	if n, ok := opNames[op]; ok {
		return n
	}
	return fmt.Sprintf("op%d", op)
}

// replyErrors are go-zookeeper's errors for the reply error codes it knows.
var replyErrors = map[int32]error{
	-4: zk.ErrConnectionClosed, -8: zk.ErrBadArguments, -100: zk.ErrAPIError,
	-101: zk.ErrNoNode, -102: zk.ErrNoAuth, -103: zk.ErrBadVersion,
	-108: zk.ErrNoChildrenForEphemerals, -110: zk.ErrNodeExists, -111: zk.ErrNotEmpty,
	-112: zk.ErrSessionExpired, -114: zk.ErrInvalidACL, -115: zk.ErrAuthFailed,
	-116: zk.ErrClosing, -117: zk.ErrNothing, -118: zk.ErrSessionMoved,
	-123: zk.ErrReconfigDisabled,
}

// replyError returns the error of a reply's error code (nil for 0).
func replyError(code int32) error {
	if code == 0 {
		return nil
	}
	if err, ok := replyErrors[code]; ok {
		return err
	}
	return fmt.Errorf("zookeeper error code %d", code)
}
