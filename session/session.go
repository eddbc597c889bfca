package session

import (
	"context"
	"fmt"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/internal/zksession"
)

// DefaultSessionTimeout is the session timeout asked for when
// WithSessionTimeout is not given. The server may negotiate it into its
// [2, 20] × tickTime range; SessionTimeout returns what it granted.
const DefaultSessionTimeout = 10 * time.Second

// DefaultConnectTimeout bounds Connect's wait for the first session when
// WithConnectTimeout is not given.
const DefaultConnectTimeout = 15 * time.Second

// Session is one ZooKeeper session of a process, kept alive across
// disconnects, whose states every recipe on it follows (see the package
// documentation). Open one per process (or per tenant) with Connect, share
// it between every recipe, and Close it last. It is safe for concurrent use;
// a Session not made by Connect (a nil or zero one) is not usable.
type Session struct{ s *zksession.Session }

func init() {
	// The recipe packages reach the implementation through this link; it is
	// not part of the API.
	zksession.LinkPublic(func(v any) *zksession.Session {
		if s, ok := v.(*Session); ok && s != nil {
			return s.s
		}
		return nil
	})
}

// Connect opens a Session to servers, each "host:port" (or "host", for port
// 2181; one comma-separated string is split too), and returns once the first
// ZooKeeper session exists and the credentials of WithDigestAuth and WithAuth
// are added.
//
// Servers are names, not addresses: a name is looked up (WithResolver) at
// every pass over the servers, never only once, so a server that comes back
// on a new address under its name (a Kubernetes pod) is reached again. A
// name that does not resolve is skipped, with a warning in the log, while
// another address can be tried; when a pass finds no server that answers,
// the names are looked up again before the next pass, a second later. The
// members the ensemble announces are followed too (WithEnsembleTracking).
// So the Session is never left cut off while a server answers on one of
// its names: after Lost it makes a new session there, and the recipes on it
// work again.
//
// The wait is bounded by ctx and by the connect timeout (WithConnectTimeout,
// default DefaultConnectTimeout), whichever ends first: when no server
// answers, Connect returns an error that names the servers, each server's
// last failure (a lookup error for a name that does not resolve, a dial
// error, a server that closed the connection) and matches ctx's error, or
// context.DeadlineExceeded for the connect timeout. It returns within that
// bound plus a few milliseconds (at most a second more in a rare race inside
// go-zookeeper's Close). While it waits it logs a warning every few seconds.
// A malformed or empty server list (a missing host, a port that is not a
// number from 1 to 65535, a chroot), a bad option or a nil ctx fail at once
// with an error matching ErrBadArgument, before anything is started.
//
// Connect also refuses, at once, a binary built with a go-zookeeper other
// than v1.0.4: the session reads and rewrites go-zookeeper's wire traffic,
// which was verified against that version only (Go's module selection can
// give a build a newer one). The error names the version found and how to pin
// v1.0.4 in go.mod. The go command records no dependencies in the test
// binary of a library package, so the check shows in programs (and in the
// tests of main packages), not in a library's own tests.
func Connect(ctx context.Context, servers []string, opts ...Option) (*Session, error) {
	zopts := make([]zksession.Option, len(opts))
	for i, o := range opts {
		if o != nil {
			zopts[i] = zksession.Option(o)
		}
	}
	s, err := zksession.Connect(ctx, servers, zopts...)
	if err != nil {
		return nil, err
	}
	pub := &Session{s}
	s.OpenHooks(pub)
	return pub, nil
}

// Close ends the Session: every lease and term taken on it ends (cause
// ErrClosed), subscriptions get Closed, the ZooKeeper session is closed so
// that the server deletes its ephemeral nodes at once, and Close returns
// after every goroutine the Session started has exited. Deletes still queued
// get at most 2 s while the connection is up. Idempotent; returns nil.
func (s *Session) Close() error { return s.s.Close() }

// Done returns a channel that is closed when Close begins.
func (s *Session) Done() <-chan struct{} { return s.s.Done() }

// State returns the current state: the last transition delivered to
// subscribers.
func (s *Session) State() State { return State(s.s.State()) }

// SessionID returns the ZooKeeper session id of the current session, as the
// server logs show it in hex: the owner of the ephemeral nodes this Session
// creates. After Lost it is the lost session's until the next one begins.
func (s *Session) SessionID() int64 { return s.s.Epoch().SessionID() }

// SessionTimeout returns the session timeout negotiated with the server for
// the current session.
func (s *Session) SessionTimeout() time.Duration { return s.s.SessionTimeout() }

// Conn returns go-zookeeper's connection, for requests of your own on nodes
// that no recipe owns. Use full paths (see Path). Do not close it; its
// requests have no ctx and are not retried.
func (s *Session) Conn() *zk.Conn { return s.s.Conn() }

// Path returns the full server path of the recipe path p: the namespace
// (WithNamespace) followed by p. p must be absolute, not "/", without a
// trailing '/', empty, "." or ".." segments, NUL or the characters ZooKeeper
// rejects; otherwise the error matches ErrBadArgument.
func (s *Session) Path(p string) (string, error) {
	full, err := s.s.Path(p)
	if err != nil {
		return "", fmt.Errorf("session: %w", err)
	}
	return full, nil
}

// Subscribe returns a subscription to the Session's state transitions.
func (s *Session) Subscribe() *Subscription {
	return &Subscription{zksession.SubscribeAs(s.s, publicEvent)}
}
