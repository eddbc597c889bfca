// Package zkgrpc is a gRPC name resolver over zkrecipes' service discovery
// (recipes/discovery): a client dials "zk:///<service>" and balances over the
// instances registered under that service. It is a module of its own, so
// that the library's core packages never depend on grpc-go.
package zkgrpc
