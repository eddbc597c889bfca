package zkgrpc

import (
	"fmt"

	"go.uber.org/zap"

	"github.com/zkrecipes/zkrecipes/recipes/discovery"
	"github.com/zkrecipes/zkrecipes/session"
)

// Option configures NewBuilder. An invalid option is returned by NewBuilder
// as an error matching session.ErrBadArgument.
type Option func(*config) error

type config struct {
	base string
	ssl  bool
	lg   *zap.Logger
}

func defaults() config {
	return config{base: discovery.SpringBasePath}
}

// WithBase sets the base path under which the services are registered
// (Curator's ServiceDiscoveryBuilder.basePath), relative to the session's
// namespace. The default is "/services", Spring Cloud Zookeeper's default
// (discovery.SpringBasePath). NewBuilder checks it as session.Session.Path
// does.
func WithBase(path string) Option {
	return func(c *config) error {
		c.base = path
		return nil
	}
}

// WithSSLPort says whether the resolver gives the instances' TLS ports
// (Curator's sslPort) instead of their plain ports (the default). An
// instance without the port asked for is left out. The transport security
// itself is the client's: grpc.WithTransportCredentials.
func WithSSLPort(on bool) Option {
	return func(c *config) error {
		c.ssl = on
		return nil
	}
}

// WithLogger sets the logger of the resolvers and of their discovery caches.
// By default the resolvers log nothing and the caches log to the session's
// logger. Resolvers log at debug level only: each state given to gRPC, and
// the instances left out.
func WithLogger(lg *zap.Logger) Option {
	return func(c *config) error {
		if lg == nil {
			return fmt.Errorf("zkgrpc: nil logger: %w", session.ErrBadArgument)
		}
		c.lg = lg
		return nil
	}
}
