// Package zkgrpc resolves gRPC targets through zkrecipes' service discovery
// (recipes/discovery, Curator's layout): a client dials "zk:///<service>"
// and balances over the instances registered under <base>/<service>, by Go
// services with discovery.Register or by Java ones with Curator's
// ServiceDiscovery or Spring Cloud Zookeeper. It is a module of its own, so
// that the library's core packages never depend on grpc-go.
//
//	b, err := zkgrpc.NewBuilder(sess, zkgrpc.WithBase("/services"))
//	...
//	cc, err := grpc.NewClient("zk:///billing",
//		grpc.WithResolvers(b),
//		grpc.WithDefaultServiceConfig(`{"loadBalancingConfig":[{"round_robin":{}}]}`),
//		grpc.WithTransportCredentials(creds))
//
// The target's authority is empty: the session names the ZooKeeper servers.
// A Builder serves any number of clients; grpc.WithResolvers gives it to
// each. There is no global registration: gRPC's resolver.Register may only
// be called at init time, before a session can exist.
//
// # Addresses
//
// Each resolver follows a discovery.Cache of its service and, at every
// change, gives the client the instances' addresses, Address:Port (or
// Address:SSLPort, with WithSSLPort), one endpoint per address in the order
// of the instances' node names. Instances not in service (Disabled, or
// a Spring status other than UP: discovery.Instance.InService) are left out, as are
// instances without an address or the port asked for, and any instance
// whose address an earlier one already gave. A change that leaves the
// addresses and the instances' data as they were gives the client nothing.
// The resolver never sets an address's ServerName: over TLS the client
// verifies the channel's authority (the service's name, or grpc.WithAuthority)
// whatever ZooKeeper says.
//
// # Attributes
//
// Each endpoint's Attributes, and the BalancerAttributes of each address in
// resolver.State.Addresses (which balancers written with grpc's base package
// see in SubConnInfo), carry the instance, read with Instance, and its Spring
// Cloud Zookeeper metadata when its payload is Spring's, read with
// SpringMetadata. Addresses carry no Attributes of their own, so a change of
// an instance's data never makes gRPC reconnect to it.
//
// # Errors
//
// A service with no usable instance (none registered, or its base path
// missing) gives the client an empty state and reports an error matching
// discovery.ErrNoInstances: calls fail fast with Unavailable (with the
// balancer's message: round_robin's "no children to pick from"; pick_first's
// "produced zero addresses", then this package's error), and wait-for-ready
// calls wait until an instance is registered.
// Until the cache's first load the client's calls wait; if it takes longer
// than the session timeout (ZooKeeper out of reach) the resolver reports an
// error, so that calls fail fast until it is done.
//
// # Loss
//
// A ZooKeeper outage does not empty the client: while the session is
// disconnected, and after it is lost, the resolver keeps the last addresses
// it gave, however stale, and calls go on to them. Once the session is back
// (the same one or a new one), the cache reads the service again and the
// resolver gives the instances as they are then. A session that is closed
// stops the resolvers on it: they report an error matching session.ErrClosed
// and the client keeps its last addresses until it is closed too.
//
// # Znodes and costs
//
// A resolver reads <base>/<service> and its children and writes nothing. It
// holds a discovery cache (a child watch on the service and a data watch
// per instance, shared with the session's other users), whose goroutines and
// its own one stop when the client closes it. A change costs the cache's
// reads and one update of the client. ResolveNow does nothing: the watches
// already say when something changes.
package zkgrpc
