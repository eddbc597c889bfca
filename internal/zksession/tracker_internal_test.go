package zksession

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/zkrecipes/zkrecipes/zktest"
)

func TestParseEnsembleConfig(t *testing.T) {
	tests := []struct {
		name string
		data string
		want []string
	}{
		{"client addresses", "server.1=127.0.0.1:2888:3888:participant;127.0.0.11:2181\nserver.2=127.0.0.1:2889:3889:participant;127.0.0.12:2181\nversion=100000000\n",
			[]string{"127.0.0.11:2181", "127.0.0.12:2181"}},
		{"wildcard client host takes the quorum host", "server.1=zk-0.zk-hs:2888:3888:participant;0.0.0.0:2181\nserver.2=zk-1.zk-hs:2888:3888;[::]:2181",
			[]string{"zk-0.zk-hs:2181", "zk-1.zk-hs:2181"}},
		{"port only", "server.3=zk-2.zk-hs:2888:3888:observer;2181", []string{"zk-2.zk-hs:2181"}},
		{"ipv6", "server.1=[fd00::1]:2888:3888:participant;[fd00::1]:2181", []string{"[fd00::1]:2181"}},
		{"no client address: nothing to follow", "server.1=127.0.0.1:2888:3888\nversion=1", nil},
		{"standalone: empty", "", nil},
		{"duplicates once", "server.1=a:1:2;b:3\nserver.2=a:1:2;b:3", []string{"b:3"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := parseEnsembleConfig([]byte(tt.data)); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("parseEnsembleConfig(%q) = %q, want %q", tt.data, got, tt.want)
			}
		})
	}
}

// When the config the tracker reads no longer has the member the session is
// connected to (a reconfig removed it; ZooKeeper 3.8 lets a removed follower
// go on serving), the Session closes that connection and goes to a member
// that stays, on the same session, and marks the removed one so that it
// leaves it again should it land there.
func TestTrackerMovesOffRemovedMember(t *testing.T) {
	e := zktest.StartEnsembleT(t, 3, zktest.WithConfig("reconfigEnabled", "true"))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := Connect(ctx, e.Servers(), WithSessionTimeout(4*time.Second), WithLogger(zaptest.NewLogger(t)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if got := s.hosts.learnedMembers(); len(got) != 3 {
		t.Fatalf("following %v, want the 3 members", got)
	}
	sub := s.Subscribe()
	defer sub.Close()
	id, on := s.conn.SessionID(), s.Server()
	data, _, err := s.conn.Get(configPath)
	if err != nil {
		t.Fatal(err)
	}
	var kept []string
	for _, line := range strings.Split(string(data), "\n") {
		if !strings.HasSuffix(line, ";"+on) {
			kept = append(kept, line)
		}
	}
	if len(kept) == len(strings.Split(string(data), "\n")) {
		t.Fatalf("no member line for %s in %q", on, data)
	}
	st := trackState{members: map[string]bool{}}
	for _, a := range e.Servers() {
		st.members[a] = true
	}
	if !s.applyConfig([]byte(strings.Join(kept, "\n")), &st) {
		t.Fatal("the tracker stopped following")
	}
	if !st.removed[on] {
		t.Errorf("the removed member %s is not remembered as removed", on)
	}
	for {
		select {
		case ev := <-sub.C():
			switch ev.State {
			case Lost:
				t.Fatalf("session lost moving off a removed member")
			case Reconnected:
				if s.conn.SessionID() != id {
					t.Fatalf("a new session 0x%x after the move, was 0x%x", s.conn.SessionID(), id)
				}
				if now := s.Server(); now == on {
					t.Fatalf("reconnected to the removed member %s", on)
				}
				t.Logf("moved from %s to %s, same session", on, s.Server())
				return
			}
		case <-ctx.Done():
			t.Fatal("no reconnection after the move")
		}
	}
}
