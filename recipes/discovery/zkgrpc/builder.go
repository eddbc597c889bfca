package zkgrpc

import (
	"fmt"
	"strings"

	"go.uber.org/zap"
	"google.golang.org/grpc/resolver"

	"github.com/zkrecipes/zkrecipes/recipes/discovery"
	"github.com/zkrecipes/zkrecipes/session"
)

// Scheme is the scheme of the targets a Builder resolves: "zk:///<service>".
const Scheme = "zk"

// Builder builds the resolvers of "zk:///<service>" targets on one session
// (a gRPC resolver.Builder). Give it to a client with grpc.WithResolvers; a
// Builder serves any number of clients, each resolver following a discovery
// cache of its own. It is safe for concurrent use.
type Builder struct {
	sess *session.Session
	cfg  config
}

var _ resolver.Builder = (*Builder)(nil)

// NewBuilder returns a Builder of resolvers that follow the services
// registered under the base path (WithBase) on sess. It validates its
// arguments and does no I/O. A nil session, a bad base path or a bad option
// gives an error matching session.ErrBadArgument. The session must outlive
// the clients that use the Builder; closing it stops their resolvers (see
// the package documentation).
func NewBuilder(sess *session.Session, opts ...Option) (*Builder, error) {
	if sess == nil {
		return nil, fmt.Errorf("zkgrpc: nil session: %w", session.ErrBadArgument)
	}
	cfg := defaults()
	for i, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("zkgrpc: option %d is nil: %w", i, session.ErrBadArgument)
		}
		if err := o(&cfg); err != nil {
			return nil, err
		}
	}
	if _, err := sess.Path(cfg.base); err != nil {
		return nil, fmt.Errorf("zkgrpc: base: %w", err)
	}
	return &Builder{sess: sess, cfg: cfg}, nil
}

// Scheme returns "zk" (Scheme).
func (b *Builder) Scheme() string { return Scheme }

// Build starts a resolver for target, "zk:///<service>" (or "zk:<service>"),
// which gRPC calls when a client needs one. The service is one node name
// under the base path; the target has no authority (the session names the
// ZooKeeper servers) and no query. Build does no I/O: the resolver's cache
// loads the instances in the background. A bad target gives an error
// matching session.ErrBadArgument, which gRPC's client returns from its
// calls.
func (b *Builder) Build(target resolver.Target, cc resolver.ClientConn, _ resolver.BuildOptions) (resolver.Resolver, error) {
	name := target.Endpoint()
	u := target.URL
	switch {
	case cc == nil:
		return nil, fmt.Errorf("zkgrpc: nil resolver.ClientConn: %w", session.ErrBadArgument)
	case u.Host != "":
		return nil, fmt.Errorf("zkgrpc: target %q: the authority must be empty (zk:///<service>): the session names the ZooKeeper servers: %w", target.String(), session.ErrBadArgument)
	case u.RawQuery != "" || u.Fragment != "":
		return nil, fmt.Errorf("zkgrpc: target %q: no query or fragment is understood: %w", target.String(), session.ErrBadArgument)
	case name == "":
		return nil, fmt.Errorf("zkgrpc: target %q names no service (zk:///<service>): %w", target.String(), session.ErrBadArgument)
	case strings.Contains(name, "/"):
		return nil, fmt.Errorf("zkgrpc: target %q: a service is one node name, without '/': %w", target.String(), session.ErrBadArgument)
	}
	where := b.cfg.base + "/" + name
	if _, err := b.sess.Path(where); err != nil {
		return nil, fmt.Errorf("zkgrpc: target %q: bad service name: %w", target.String(), err)
	}
	lg := zap.NewNop()
	var copts []discovery.Option
	if b.cfg.lg != nil {
		lg = b.cfg.lg.Named("zkgrpc").With(zap.String("path", where))
		copts = append(copts, discovery.WithLogger(b.cfg.lg))
	}
	c, err := discovery.NewCache(b.sess, b.cfg.base, name, copts...)
	if err != nil {
		return nil, fmt.Errorf("zkgrpc: target %q: %w", target.String(), err)
	}
	r := &zkResolver{
		cc:          cc,
		cache:       c,
		where:       where,
		ssl:         b.cfg.ssl,
		lg:          lg,
		loadTimeout: b.sess.SessionTimeout(),
		stop:        make(chan struct{}),
	}
	r.wg.Add(1)
	go r.run()
	return r, nil
}
