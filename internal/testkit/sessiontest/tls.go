package sessiontest

import (
	"testing"

	"github.com/zkrecipes/zkrecipes/session"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// NamespaceTLS creates a namespace on the package's shared TLS server
// (zktest.SharedTLS, started by the first caller and stopped by zktest.Main).
// Raw connections from ns.Conn use the server's plaintext port; sessions
// under test connect to the secure port with ConnectTLS.
func NamespaceTLS(t testing.TB) *zktest.Namespace {
	t.Helper()
	return zktest.NewNamespaceOn(t, zktest.SharedTLS(t))
}

// ConnectTLS connects a Session over TLS to the secure port of ns's server
// (started with zktest.WithTLS, e.g. by NamespaceTLS), trusting the server's
// test CA and presenting its client certificate; otherwise as Connect.
func ConnectTLS(t testing.TB, ns *zktest.Namespace, opts ...session.Option) *session.Session {
	t.Helper()
	return ConnectTo(t, secureServers(t, ns), ns.Root, tlsOptions(ns, opts)...)
}

// ConnectTLSProxy starts a proxy in front of the secure port of ns's server
// (closed in t.Cleanup, after the Session) and connects a Session over TLS
// through it, as ConnectTLS does. The proxy relays the encrypted bytes: Cut,
// Partition and Heal work as over plaintext, while its OnRequest hooks and
// Sessions see nothing.
func ConnectTLSProxy(t testing.TB, ns *zktest.Namespace, opts ...session.Option) (*session.Session, *zktest.Proxy) {
	t.Helper()
	p := zktest.NewProxyT(t, secureServers(t, ns)...)
	return ConnectTo(t, p.Servers(), ns.Root, tlsOptions(ns, opts)...), p
}

func secureServers(t testing.TB, ns *zktest.Namespace) []string {
	t.Helper()
	srv := ns.Server.SecureServers()
	if len(srv) == 0 {
		t.Fatalf("sessiontest: %s was started without zktest.WithTLS", ns.Server)
	}
	return srv
}

func tlsOptions(ns *zktest.Namespace, opts []session.Option) []session.Option {
	return append([]session.Option{session.WithTLS(ns.Server.TLS().ClientConfig())}, opts...)
}
