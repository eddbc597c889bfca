package session

import (
	"context"
	"crypto/tls"
	"log/slog"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/go-zookeeper/zk"
	"go.uber.org/zap"

	"github.com/zkrecipes/zkrecipes/internal/zksession"
)

type config = zksession.Config

// Option configures Connect. An invalid value makes Connect fail with an
// error matching ErrBadArgument; no option logs and ignores a bad value.
type Option func(*config) error

// WithSessionTimeout sets the session timeout asked of the server (default
// DefaultSessionTimeout, at least a millisecond). The server negotiates it
// into [2, 20] × its tickTime, and the Session declares Lost by its own
// timer once the connection has been down that long.
func WithSessionTimeout(d time.Duration) Option { return Option(zksession.WithSessionTimeout(d)) }

// WithConnectTimeout bounds Connect's wait for the first session besides
// its ctx (default DefaultConnectTimeout). 0 leaves ctx as the only bound:
// with a ctx without deadline, Connect then waits for ever for a server. A
// negative d is an error.
func WithConnectTimeout(d time.Duration) Option { return Option(zksession.WithConnectTimeout(d)) }

// WithNamespace sets a chroot under which every recipe path lives: the path
// "/locks/a" is then namespace+"/locks/a" on the server. "" or "/" means
// none. The namespace's own nodes are created on first use.
func WithNamespace(ns string) Option { return Option(zksession.WithNamespace(ns)) }

// WithLogger sets the logger (default zap.NewNop(): silent). Session
// transitions are logged at info (Suspended at warn), failures no caller
// sees at error, per-request details at debug, where go-zookeeper's own lines
// go too.
func WithLogger(l *zap.Logger) Option { return Option(zksession.WithLogger(l)) }

// WithSlog sets a log/slog logger instead of a zap one (the last of
// WithLogger and WithSlog wins): every line of the Session and of the
// recipes on it that have no logger of their own goes to l's handler, at
// the same levels as with WithLogger, with the component's name as the
// attribute "logger" ("mutex", "leader", ...; "zk" for go-zookeeper's own
// lines; none for the Session's).
func WithSlog(l *slog.Logger) Option { return Option(zksession.WithSlog(l)) }

// WithLossPolicy sets the loss policy (default Standard: leases end at a
// deadline two thirds of the session timeout after the newest answered
// request, if the connection is still down then; SessionOnly: at Lost;
// EndAtDisconnect: at the first disconnect). See LossPolicy.
func WithLossPolicy(p LossPolicy) Option {
	return Option(zksession.WithLossPolicy(zksession.LossPolicy(p)))
}

// WithACL sets the ACL of every node the Session and the recipes on it create
// (default zk.WorldACL(zk.PermAll)); it must not be empty. ZooKeeper checks a
// create and a delete against the parent's ACL: see the package
// documentation.
func WithACL(acl []zk.ACL) Option { return Option(zksession.WithACL(acl)) }

// WithDigestAuth adds digest credentials (user must be non-empty, without
// ':'). go-zookeeper sends them again on every connection, also those that
// open a new session. Pair it with WithACL(zk.AuthACL(zk.PermAll)) to admit
// only sessions with the same credentials.
func WithDigestAuth(user, password string) Option {
	return Option(zksession.WithDigestAuth(user, password))
}

// WithAuth adds credentials of any scheme the servers have an authentication
// provider for (see zk.Conn.AddAuth), sent on every connection like
// WithDigestAuth's.
func WithAuth(scheme string, auth []byte) Option { return Option(zksession.WithAuth(scheme, auth)) }

// WithTLS connects over TLS to the servers' secure client ports
// (secureClientPort). cfg is cloned, never modified: set RootCAs to the CA of
// the servers' certificates and Certificates to the client certificate that
// ZooKeeper asks for by default; an empty ServerName is filled in with each
// server's host. The handshake runs on the connections of the dialer
// (WithDialer's or the default), bounded like the answer to ZooKeeper's own
// handshake: the session timeout divided among the servers, at least a
// second. A failed handshake is a failed dial: Connect's error names it.
func WithTLS(cfg *tls.Config) Option { return Option(zksession.WithTLS(cfg)) }

// WithDialer sets the function that opens TCP connections to the servers
// (default net.DialTimeout), e.g. to bind a local address or go through a
// proxy; with WithTLS the handshake runs on its connections.
func WithDialer(d zk.Dialer) Option { return Option(zksession.WithDialer(d)) }

// WithResolver sets what looks up the addresses of the servers' names
// (default net.DefaultResolver): a *net.Resolver of the program's own, or in
// tests a table of names such as zktest.Resolver, so that a test can move a
// server to a new address under the same name. The dialer (WithDialer) is
// handed the addresses it returns. A nil resolver is an error.
func WithResolver(r interface {
	LookupHost(ctx context.Context, host string) (addrs []string, err error)
}) Option {
	return Option(zksession.WithResolver(r))
}

// WithEnsembleTracking turns off (false) or on (true, the default) the
// following of the ensemble's members: the Session reads the member list a
// ZooKeeper 3.5+ ensemble announces in /zookeeper/config and tries those
// members first, the configured servers being the fallback; while it
// follows them it watches the list and reads it again after every
// reconnection, and when a reconfiguration removes the member it is
// connected to, it moves to one that stays, on the same session. It follows
// the list only while it is connected to one of the announced members, so a
// client that reaches the ensemble through a proxy or NAT keeps its servers
// without this option. Turn it off when the announced addresses are
// reachable but must not be used (every connection must go through a
// proxy, or the configured servers must stay the only ones); see
// docs/kubernetes.md.
func WithEnsembleTracking(on bool) Option { return Option(zksession.WithEnsembleTracking(on)) }

// WithRetry sets the backoff of requests that fail at connection level and
// are retried within the same session (default: exponential from 50 ms to
// 2 s, ±50 % jitter, bounded only by the caller's ctx). factory is called at
// an operation's first retryable failure; a backoff that returns
// backoff.Stop ends the retries. A nil factory, or one that returns nil, is
// an error.
func WithRetry(factory func() backoff.BackOff) Option { return Option(zksession.WithRetry(factory)) }
