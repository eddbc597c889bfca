package zksession

import (
	"crypto/tls"
	"fmt"
	"net"
	"runtime/debug"
	"strings"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/go-zookeeper/zk"
	"go.uber.org/zap"
)

// DefaultSessionTimeout is the session timeout asked for when WithSessionTimeout
// is not given. The server may negotiate it into its [2, 20] × tickTime range.
const DefaultSessionTimeout = 10 * time.Second

// DefaultConnectTimeout bounds Connect's wait for the first session when
// WithConnectTimeout is not given (Curator's default connection timeout).
const DefaultConnectTimeout = 15 * time.Second

// Option configures Connect. An invalid value makes Connect fail with an error
// wrapping ErrBadArgument; options never log and ignore a bad value.
type Option func(*Config) error

// Config is what the options set; the public session package's options set
// it too.
type Config = config

type authCred struct {
	scheme string
	auth   []byte
}

type config struct {
	sessionTimeout time.Duration
	connectTimeout time.Duration // 0: ctx is the only bound
	logger         *zap.Logger
	dialer         zk.Dialer
	tls            *tls.Config // nil: plaintext
	auth           []authCred
	acl            []zk.ACL
	namespace      string // "" or a valid path other than "/"
	policy         LossPolicy
	retry          func() backoff.BackOff
	hooks          *Hooks // nil: none
	resolver       Resolver
	trackEnsemble  bool // follow /zookeeper/config (tracker.go)
	// buildInfo reads the running binary's build information (its
	// go-zookeeper version, see zkversion.go); tests give a fake one.
	buildInfo func() (*debug.BuildInfo, bool)
}

func defaultConfig() *config {
	return &config{
		sessionTimeout: DefaultSessionTimeout,
		connectTimeout: DefaultConnectTimeout,
		logger:         zap.NewNop(),
		dialer:         net.DialTimeout,
		acl:            zk.WorldACL(zk.PermAll),
		policy:         Standard,
		retry:          DefaultBackOff,
		resolver:       net.DefaultResolver,
		trackEnsemble:  true,
		buildInfo:      debug.ReadBuildInfo,
	}
}

// DefaultBackOff is the retry policy used when WithRetry is not given:
// exponential from 50 ms, factor 2, ±50 % jitter, capped at 2 s between
// attempts, no elapsed-time limit (the caller's context bounds the retries).
func DefaultBackOff() backoff.BackOff {
	b := backoff.NewExponentialBackOff()
	b.InitialInterval = 50 * time.Millisecond
	b.Multiplier = 2
	b.RandomizationFactor = 0.5
	b.MaxInterval = 2 * time.Second
	b.MaxElapsedTime = 0
	b.Reset()
	return b
}

func badOption(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrBadArgument}, args...)...)
}

// WithSessionTimeout sets the session timeout asked of the server (default
// DefaultSessionTimeout). The server negotiates it into [2, 20] × its tickTime;
// the Session uses the negotiated value for its local loss timer. It must be
// at least one millisecond.
func WithSessionTimeout(d time.Duration) Option {
	return func(c *config) error {
		if d < time.Millisecond {
			return badOption("session timeout %v: must be at least 1ms", d)
		}
		if d > time.Duration(1<<31-1)*time.Millisecond {
			return badOption("session timeout %v: too large", d)
		}
		c.sessionTimeout = d
		return nil
	}
}

// WithConnectTimeout bounds how long Connect waits for the first session
// (default DefaultConnectTimeout), besides its ctx: against an address where
// no ZooKeeper answers, Connect fails when the bound or ctx ends, whichever
// comes first. 0 leaves ctx as the only bound, so that Connect with a ctx
// without deadline waits for ever; a negative d is an error.
func WithConnectTimeout(d time.Duration) Option {
	return func(c *config) error {
		if d < 0 {
			return badOption("connect timeout %v: must not be negative", d)
		}
		c.connectTimeout = d
		return nil
	}
}

// WithLogger sets the logger (default zap.NewNop()). go-zookeeper's own log
// lines are routed into it at debug level. A nil logger is an error.
func WithLogger(l *zap.Logger) Option {
	return func(c *config) error {
		if l == nil {
			return badOption("nil logger (use zap.NewNop() for none)")
		}
		c.logger = l
		return nil
	}
}

// WithDialer sets the function that opens TCP connections to the servers
// (default net.DialTimeout), e.g. to go through a proxy or to bind a local
// address. With WithTLS, the TLS handshake runs on the connections it opens.
func WithDialer(d zk.Dialer) Option {
	return func(c *config) error {
		if d == nil {
			return badOption("nil dialer")
		}
		c.dialer = d
		return nil
	}
}

// WithTLS makes every connection to the servers TLS: each connection is
// dialed with the dialer (WithDialer's, or net.DialTimeout), then a TLS
// client handshake with cfg runs on it, bounded as the answer to the
// ZooKeeper handshake is (handshakeBound: the session timeout divided among
// the servers, at least a second; go-zookeeper's own dial timeout is a fixed
// second) and aborted at once by Close. The
// servers' addresses must be their secure client ports (ZooKeeper's
// secureClientPort, served by NettyServerCnxnFactory).
//
// cfg is cloned, never modified, and used as is otherwise: set RootCAs to
// the CA that signed the servers' certificates (nil means the system's
// roots) and, since ZooKeeper requires a client certificate by default
// (ssl.clientAuth=need), Certificates to the client's. When cfg.ServerName
// is empty, the host of each server's address is the name verified, so a
// certificate must name the host or IP address used in the server list (set
// ServerName when all servers share a certificate for one name).
//
// A handshake that fails (a certificate signed by another CA, a plaintext
// port, a server that wants a client certificate) makes go-zookeeper try
// again, like any failed dial, until Connect's bound ends; Connect's error then
// names the last failure. A nil cfg is an error. Order with WithDialer does
// not matter.
func WithTLS(cfg *tls.Config) Option {
	return func(c *config) error {
		if cfg == nil {
			return badOption("nil TLS config")
		}
		c.tls = cfg.Clone()
		return nil
	}
}

// WithDigestAuth adds digest credentials ("user:password"). They are added
// when the first session is established, and go-zookeeper sends them again on
// every connection, including the ones that open a new session. Pair it with
// WithACL(zk.DigestACL(perms, user, password)) to protect the recipes' nodes.
func WithDigestAuth(user, password string) Option {
	return func(c *config) error {
		if user == "" || strings.Contains(user, ":") {
			return badOption("digest user %q: must be non-empty and contain no ':'", user)
		}
		c.auth = append(c.auth, authCred{scheme: "digest", auth: []byte(user + ":" + password)})
		return nil
	}
}

// WithAuth adds credentials of any scheme (see zk.Conn.AddAuth); like
// WithDigestAuth they are applied on every connection.
func WithAuth(scheme string, auth []byte) Option {
	return func(c *config) error {
		if scheme == "" {
			return badOption("empty auth scheme")
		}
		c.auth = append(c.auth, authCred{scheme: scheme, auth: append([]byte(nil), auth...)})
		return nil
	}
}

// WithACL sets the ACL of every node the Session and the recipes create
// (default zk.WorldACL(zk.PermAll)). It must not be empty.
func WithACL(acl []zk.ACL) Option {
	return func(c *config) error {
		if len(acl) == 0 {
			return badOption("empty ACL")
		}
		c.acl = append([]zk.ACL(nil), acl...)
		return nil
	}
}

// WithNamespace sets a chroot under which every recipe path lives: Path("/x")
// returns namespace + "/x". The namespace is a valid absolute path; "" or "/"
// means none. Its nodes are created on demand (as persistent nodes) by
// EnsureContainers.
func WithNamespace(ns string) Option {
	return func(c *config) error {
		if ns == "" || ns == "/" {
			c.namespace = ""
			return nil
		}
		if err := ValidatePath(ns); err != nil {
			return fmt.Errorf("%w: namespace: %w", ErrBadArgument, err)
		}
		c.namespace = ns
		return nil
	}
}

// WithLossPolicy sets the loss policy (default Standard).
func WithLossPolicy(p LossPolicy) Option {
	return func(c *config) error {
		if p != Standard && p != SessionOnly && p != EndAtDisconnect {
			return badOption("unknown loss policy %d", int(p))
		}
		c.policy = p
		return nil
	}
}

// WithRetry sets the factory of the backoff used by Retry, EnsureContainers
// and the guaranteed-delete queue (default DefaultBackOff). Retry calls it
// once per operation, at the operation's first retryable failure (an
// operation that succeeds at once needs no backoff); returning backoff.Stop
// from NextBackOff ends the retries.
// A nil factory, or one that returns nil when Connect calls it once to check
// it, is an error; should it return nil later, DefaultBackOff is used for
// that operation.
func WithRetry(factory func() backoff.BackOff) Option {
	return func(c *config) error {
		if factory == nil {
			return badOption("nil retry factory")
		}
		if factory() == nil {
			return badOption("retry factory returned a nil backoff")
		}
		c.retry = func() backoff.BackOff {
			if b := factory(); b != nil {
				return b
			}
			return DefaultBackOff()
		}
		return nil
	}
}

// WithResolver sets what looks up the servers' names (default
// net.DefaultResolver; a *net.Resolver with its own Dial, or a test's table
// of names). Names are looked up at every pass over the servers, never
// only once: see Connect. A nil resolver is an error.
func WithResolver(r Resolver) Option {
	return func(c *config) error {
		if r == nil {
			return badOption("nil resolver")
		}
		if rv, ok := r.(*net.Resolver); ok && rv == nil {
			return badOption("nil resolver")
		}
		c.resolver = r
		return nil
	}
}

// WithEnsembleTracking turns the following of the ensemble's announced
// members (/zookeeper/config) on (the default) or off; see tracker.go.
func WithEnsembleTracking(on bool) Option {
	return func(c *config) error {
		c.trackEnsemble = on
		return nil
	}
}
