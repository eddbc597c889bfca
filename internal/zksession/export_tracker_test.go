package zksession

// LearnedMembers returns the members the Session follows (tracker.go).
func LearnedMembers(s *Session) []string { return s.hosts.learnedMembers() }
