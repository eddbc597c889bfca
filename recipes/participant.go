package recipes

// Participant is one contender of a recipe as read from ZooKeeper: a lock's
// holder or waiter, a semaphore's lease holder, a leader election's
// candidate. Participants lists them in queue order.
type Participant struct {
	// ID is the participant id stored in the node (WithID of the recipe; for
	// Curator processes, their id, by default their IP address).
	ID string
	// Node is the name of the participant's node in the recipe's directory.
	Node string
	// Kind says what the node is: "lock", "read" or "write" (read-write
	// lock), "lease" (semaphore) or "latch" (leader latch).
	Kind string
	// SessionID is the ZooKeeper session that owns the node.
	SessionID int64
	// Token is the node's fencing token, its czxid.
	Token int64
	// Holds is true for the participants that hold the recipe: the lock's
	// holder, the readers that hold a read lock, the semaphore's lease
	// holders, the leader.
	Holds bool
}
