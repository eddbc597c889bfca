package mutex

// Test-only access to what the public API no longer shows. Compiled only
// into this package's tests.

import (
	"fmt"
	"time"

	"github.com/zkrecipes/zkrecipes/internal/engine"
	"github.com/zkrecipes/zkrecipes/session"
)

// NonFairNode is the name of NonFair's node in the lock directory.
const NonFairNode = nonFairNode

// NodePath returns the full server path of l's node.
func NodePath(l *Lease) string { return l.l.Path() }

// NodeSessionID returns the id of the session that owns l's node.
func NodeSessionID(l *Lease) int64 { return l.l.Epoch().SessionID() }

// NodeID returns the participant id stored in l's node.
func NodeID(l *Lease) string { return l.l.ID() }

// HeldByMe reports whether the calling goroutine holds m (a lost hold
// counts until it is released): Curator's isOwnedByCurrentThread.
func HeldByMe(m *Reentrant) bool { return m.re.Count() > 0 }

// SetCleanupTimeout replaces the engine of lk (a *Mutex, *Reentrant or
// *NonFair on sess, not used yet, built without WithLogger) with one whose
// cleanup timeout is d (the engine's WithCleanupTimeout, which the public
// options no longer set), keeping its node watch setting. It returns the
// engine's error, matching session.ErrBadArgument, for d <= 0.
func SetCleanupTimeout(sess *session.Session, lk Locker, d time.Duration) error {
	var ep **engine.Engine
	switch m := lk.(type) {
	case *Mutex:
		ep = &m.e
	case *Reentrant:
		ep = &m.e
	case *NonFair:
		ep = &m.e
	default:
		return fmt.Errorf("SetCleanupTimeout: %T has no engine", lk)
	}
	old := *ep
	e, err := engine.New(sess, lk.Path(), engine.WithName("mutex"),
		engine.WithNodeWatch(old.NodeWatch()), engine.WithCleanupTimeout(d))
	if err != nil {
		return err
	}
	if err := old.Close(); err != nil {
		_ = e.Close()
		return err
	}
	*ep = e
	return nil
}
