package zksession

import (
	"testing"

	"github.com/go-zookeeper/zk"
)

// TestACLSharedNotGrown: ACL returns the configured ACL without a copy, and
// a caller's append to it copies instead of writing past it into the
// Session's slice.
func TestACLSharedNotGrown(t *testing.T) {
	cfg := &config{}
	WithACL(zk.DigestACL(zk.PermAll, "u", "p"))(cfg)
	s := &Session{cfg: cfg}
	acl := s.ACL()
	if len(acl) != 1 || acl[0] != cfg.acl[0] {
		t.Fatalf("ACL() = %v, want %v", acl, cfg.acl)
	}
	if n := testing.AllocsPerRun(100, func() { _ = s.ACL() }); n != 0 {
		t.Errorf("ACL allocates %v times a call", n)
	}
	grown := append(s.ACL(), zk.WorldACL(zk.PermRead)...)
	if &grown[0] == &cfg.acl[0] || len(s.ACL()) != 1 {
		t.Fatal("an append to ACL() wrote into the Session's slice")
	}
}
