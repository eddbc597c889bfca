package zktest_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// expire ends the session creds on the server (zktest.ExpireSession), within
// 20 s.
func expire(t *testing.T, servers []string, creds zktest.SessionCreds) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := zktest.ExpireSession(ctx, servers, creds); err != nil {
		t.Fatal(err)
	}
}

// lastSession returns the credentials of the latest session tap saw.
func lastSession(t *testing.T, tap *zktest.Tap) zktest.SessionCreds {
	t.Helper()
	s := tap.Sessions()
	if len(s) == 0 {
		t.Fatal("the tap saw no session")
	}
	return s[len(s)-1]
}

// recorder collects a client's session events (from zk.WithEventCallback).
type recorder struct {
	mu     sync.Mutex
	states []zk.State
}

func (r *recorder) cb(ev zk.Event) {
	if ev.Type != zk.EventSession {
		return
	}
	r.mu.Lock()
	r.states = append(r.states, ev.State)
	r.mu.Unlock()
}

// mark returns the number of states seen so far.
func (r *recorder) mark() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.states)
}

// seq reports whether the states after mark contain want in order (not
// necessarily adjacent).
func (r *recorder) seq(mark int, want ...zk.State) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	i := 0
	for _, s := range r.states[mark:] {
		if i < len(want) && s == want[i] {
			i++
		}
	}
	return i == len(want)
}

func (r *recorder) has(mark int, st zk.State) bool { return r.seq(mark, st) }

func (r *recorder) all() []zk.State {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]zk.State(nil), r.states...)
}
