package zksession

// NodeData returns data as the library sends it in a create or a setData:
// nil becomes empty data. go-zookeeper encodes a nil slice as a null buffer
// (length -1) and a non-nil empty one as length 0; ZooKeeper stores a null
// as it is, and Java clients read it back as null, which Curator does not
// expect of nodes it reads (GroupMember.getCurrentMembers fails with a
// NullPointerException on a null member, LeaderLatch.getParticipants on a
// null participant id). Curator itself never writes a null: parents get
// empty data, nodes without data the local IP address. Every create and
// setData of the library passes its data through NodeData; data that is
// not nil is returned as it is, not copied.
func NodeData(data []byte) []byte {
	if data == nil {
		return []byte{}
	}
	return data
}
