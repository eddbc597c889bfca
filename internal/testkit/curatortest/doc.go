// Package curatortest runs small Apache Curator programs next to Go tests, to
// check that this library and Curator 5.x exclude each other on the same
// znodes (the wire contract in DESIGN.md).
//
// The Java sources in java/ are embedded; the first Start in a test binary
// finds java, javac and the Curator jars (FindInstall: $CURATORTEST_CLASSPATH
// or Debian's /usr/share/java, as installed by InstallCommand) and compiles
// them with javac into a directory under os.TempDir keyed by a hash of the
// sources, javac and the class path, shared by test binaries. When something
// is missing the test fails (it does not skip) with an error naming
// InstallCommand.
//
// Each program is a child process speaking a line protocol: commands on stdin
// ("acquire", "release", "cycles N /counter", "start", "close", "status",
// "participants", "quit"), events and replies on stdout ("READY",
// "ACQUIRED <node> <seq>", "RELEASED", "COUNT n", "LEADER <path>",
// "NOTLEADER", "STATUS ...", "PARTICIPANTS ...", "CLOSED", "ERR ..."). The Go
// side keeps every line with the time it was read; Process.Expect takes the
// earliest line not yet taken that starts with a given word, waiting under a
// context, and fails on an "ERR" line. The Start functions wrap the
// programs:
//
//   - CuratorMutex: an InterProcessMutex on a full server path, with a loop
//     mode that increments a counter znode under the lock without version
//     checks (only the lock keeps increments from being lost);
//   - CuratorLatch: a LeaderLatch with a participant id, printing LEADER and
//     NOTLEADER transitions from its listener;
//   - CuratorRWLock (RWLock): an InterProcessReadWriteLock, with a mixed
//     read/write loop on a counter znode that counts reads seeing a write in
//     progress, and a benchmark mode running the same mix on several Curator
//     clients;
//   - CuratorGroup (Group): a GroupMember with an id and data, answering
//     getCurrentMembers, and on demand a PersistentNode (EPHEMERAL, with or
//     without protection, or EPHEMERAL_SEQUENTIAL with protection) reporting
//     its actual path;
//   - CuratorSemaphore, CuratorCounter, CuratorBarrier: an
//     InterProcessSemaphoreV2 (or its mutex, or a SharedCount), a
//     DistributedAtomicLong or DistributedAtomicInteger, a DistributedBarrier
//     or DistributedDoubleBarrier (StartSemaphore, StartCounter,
//     StartBarrier, StartDoubleBarrier);
//   - CuratorDiscovery (StartDiscovery): a ServiceDiscovery that registers,
//     updates and unregisters instances and answers queries, a ServiceCache
//     and a ServiceProvider, with Spring Cloud Zookeeper's payload class
//     (ZookeeperInstance.java, Spring's package and fields) or raw JSON;
//   - CuratorTreeCache (StartTreeCache): a TreeCache whose load, events and
//     heap are measured beside recipes/cache's.
//
// The programs' Curator clients ask for a session timeout of SessionTimeout
// (10 s), so that a stalled JVM on a loaded machine keeps its session; a test
// that waits for a killed program's session to expire asks for a short one
// with WithSessionTimeout(ShortSessionTimeout).
//
// Paths given to the programs are full server paths: Go sessions in tests use
// a zktest namespace (session.WithNamespace(ns.Root)), so the Java side gets
// ns.Root + path.
//
// # Process lifetime
//
// Every JVM runs in its own process group with a parent-death signal
// (SIGKILL), started from a goroutine locked to its OS thread that lives as
// long as the JVM (Linux sends the signal when the creating thread exits). At
// t.Cleanup its stdin is closed, the program closes its Curator client (so
// its session and ephemeral nodes go at once) and exits; after a few seconds
// the group is killed. When the test failed, the cleanup logs the program's
// last stdout lines and the tail of its stderr (Curator's log).
//
// The package is Linux-only, as zktest is.
package curatortest
