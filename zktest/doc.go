// Package zktest runs real Apache ZooKeeper servers for tests, demos and
// development servers, and breaks them on purpose, as Curator's
// TestingServer/TestingCluster and Kazoo's harness do. It never fakes
// ZooKeeper: every server is a JVM started from the local installation
// (Debian's libzookeeper-java, $ZOOKEEPER_HOME or $ZKTEST_CLASSPATH; see
// FindInstall). When none is found, the error wraps ErrNotInstalled and
// names the command that installs it.
//
// # Servers
//
// StartServer starts a standalone server on a loopback address of its own
// (127.x.y.z), a free port and a temporary directory; StartEnsemble starts 3
// or 5 members, each on an address of its own. Both are tuned for tests (a
// 200 ms tick and 500 ms minimum session timeout, so expiry tests take about
// a second; every four-letter word allowed; extended types such as TTL
// nodes; empty containers reaped every 500 ms), which WithConfig and
// WithJVMFlags override, and WithTLS adds a TLS port. A server is ready when
// `srvr` reports a Mode. Kill, Restart, Move (a restart on a new address,
// like a pod that gets a new IP), Freeze and Thaw act on one server or
// ensemble Member; Stop kills it and removes its directory. An ensemble
// started with WithConfig("reconfigEnabled", "true") announces its members'
// client addresses in /zookeeper/config, and Ensemble.Reconfig adds and
// removes members. A Resolver says what a host name resolves to, so that
// clients can follow a name to a server's new address without /etc/hosts.
//
// # Tests
//
// A test package calls Main from TestMain; Main starts one shared server,
// runs the tests and checks that they leaked no goroutine:
//
//	func TestMain(m *testing.M) { zktest.Main(m) }
//
//	func TestLock(t *testing.T) {
//		ns := zktest.NewNamespace(t) // this test's own root, removed at the end
//		conn := ns.Conn(t)           // a raw client, for inspection
//		// ... recipes under test use ns.Servers() and paths under ns.Root
//		zktest.Eventually(t, 10*time.Second, func() bool { ... }, "what was expected")
//	}
//
// The helpers that take a TB (which *testing.T satisfies) fail the test on
// error and clean up in t.Cleanup, printing the tail of the server's log if
// the test failed; call them from the test's goroutine. Programs (a demo, a
// development server) use the ones that return errors, such as StartServer,
// StartEnsemble and NewProxy, and clean up themselves: zktest does not
// import the testing package, so it links nothing test-only into them.
//
// # Faults
//
//   - Proxy sits between clients and servers: Cut closes connections,
//     Partition silences them (held past the session timeout, the server
//     expires the session), Refuse turns new ones away, SetLatency delays
//     them, and OnRequest hooks each request, to SwallowReply (the ghost-node
//     case: the server acts, the client sees a connection error) or
//     DropRequest.
//   - ExpireSession ends a session on the server at once; HoldSession keeps
//     it alive from another connection. Both take the credentials that
//     Proxy.Sessions or Tap.Sessions recorded.
//   - Tap wraps a client's dialer and records its requests by operation,
//     the watch notifications it receives and the watches it holds.
//   - FourLetterWord, Mntr and WatchNotifications read the server's side.
//
// # Process lifetime
//
// Every JVM runs in its own process group; Stop and Kill kill the group. On
// Linux a JVM also dies with the process that started it, even one killed
// with SIGKILL; elsewhere such a process leaves its JVMs behind. Windows is
// not supported. docs/zktest.md has the details: readiness, ports, TLS, the
// wire parsing of Proxy and Tap, and the goroutine leak check.
//
// # Concurrency
//
// Server, Ensemble, Proxy, Tap and Resolver are safe for concurrent use.
package zktest
