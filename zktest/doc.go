// Package zktest runs real Apache ZooKeeper servers for tests and breaks them on
// purpose.
//
// It is the library's test harness and is meant for users too, as Curator's
// TestingServer/TestingCluster and Kazoo's harness are:
//
//   - FindInstall locates Java and a ZooKeeper installation (an explicit
//     classpath in $ZKTEST_CLASSPATH, then $ZOOKEEPER_HOME, then Debian's
//     /usr/share/java/zookeeper.jar). When nothing is found the error names
//     InstallCommand.
//   - StartServer starts a standalone server on 127.0.0.1, a free port and its
//     own temporary data directory, with a short tickTime (200 ms) and
//     minSessionTimeout (500 ms) so that session expiry tests take about a
//     second, all four-letter words allowed, fast container reaping and
//     extended types (TTL nodes) enabled. StartEnsemble starts 3 or 5 members.
//     A server is ready when `srvr` reports a `Mode:` line (`ruok` answers
//     before the server serves).
//   - Proxy sits between clients and servers and injects faults: Cut,
//     Partition, Heal, Refuse, SetLatency and a per-request hook that can
//     swallow the reply to a chosen request (the ghost-node case).
//   - Tap and ExpireSession expire a client's session at once by attaching a
//     second connection with its id and password and sending closeSession.
//   - Main, Shared, NewNamespace and Eventually give each test package one
//     shared server, each test its own root path, and a goroutine-leak check.
//
// # Process lifetime
//
// Every JVM is started in its own process group with a parent-death signal
// (SIGKILL), and Stop/Kill kill the whole group. On Linux the parent-death
// signal fires when the OS thread that created the child exits, not the
// process; zktest therefore starts each JVM from a goroutine locked to its OS
// thread that lives exactly as long as the JVM (it waits for it), so the
// thread cannot go away early and the JVM dies when the test binary dies,
// even by SIGKILL. Outside Linux there is no parent-death signal: Stop (and
// Main) still kill the process group, but a test binary killed with SIGKILL
// leaves its JVMs behind. Windows is not supported.
//
// # Concurrency
//
// Server, Ensemble, Proxy and Tap are safe for concurrent use. Functions that
// take a testing.TB must be called from the test's goroutine.
package zktest
