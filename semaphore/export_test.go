package semaphore

// What the public API no longer offers and the package's tests still use
// (tests only).

// The directories under the semaphore's path (Curator's
// InterProcessSemaphoreV2), and the largest maximum (a Java int).
const (
	LocksDir  = locksDir
	LeasesDir = leasesDir
	MaxCount  = maxCount
)

// NodePath returns the full server path of l's node (session namespace
// included).
func NodePath(l *Lease) string { return l.l.Path() }

// NodeSessionID returns the ZooKeeper session id that owns l's node.
func NodeSessionID(l *Lease) int64 { return l.l.Epoch().SessionID() }

// NodeID returns the participant id stored in l's node.
func NodeID(l *Lease) string { return l.l.ID() }
