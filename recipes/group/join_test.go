package group_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/internal/testkit/sessiontest"
	"github.com/zkrecipes/zkrecipes/recipes/group"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// seesBoth waits on each channel of views until its view holds both "a"
// and "b", and returns how long after start the later of the two came.
func seesBoth(t *testing.T, start time.Time, chs ...<-chan map[string][]byte) time.Duration {
	t.Helper()
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	var last time.Duration
	for i, ch := range chs {
		for done := false; !done; {
			select {
			case v, ok := <-ch:
				if !ok {
					t.Fatalf("member %d: Changes closed", i)
				}
				if _, a := v["a"]; a {
					_, done = v["b"]
				}
			case <-deadline.C:
				t.Fatalf("member %d: no view with a and b within %v", i, wait)
			}
		}
		last = max(last, time.Since(start))
	}
	return last
}

// TestMemberSeesGroupSoonOnFreshPath: two members started together on a
// group path that does not exist yet see each other about as soon as both
// nodes exist: the first read finds no path, and each member reads again
// when its own node has been created (which creates the path), not at a
// poll. Both then see each other well within the 250 ms that such a poll
// takes at the least (missingPoll, 500 ms less its jitter; the poll of the
// earlier code started at that too). The best of a few tries is compared, so
// that a stall of the loaded machine in one try does not fail the test.
func TestMemberSeesGroupSoonOnFreshPath(t *testing.T) {
	const bound = 200 * time.Millisecond
	var took []time.Duration
	for try := 0; try < 5; try++ {
		ns := zktest.NewNamespace(t)
		sa, sb := sessiontest.Connect(t, ns), sessiontest.Connect(t, ns)
		p := fmt.Sprintf("/fresh%d/group", try)
		ctx, cancel := context.WithCancel(ctxT(t))
		start := time.Now()
		a := startMember(t, sa, p, "a", "da")
		b := startMember(t, sb, p, "b", "db")
		d := seesBoth(t, start, a.Changes(ctx), b.Changes(ctx))
		cancel()
		a.Close()
		b.Close()
		took = append(took, d)
		if d < bound {
			t.Logf("both members saw each other %v after Start (tries: %v)", d, took)
			return
		}
	}
	t.Fatalf("members saw each other %v after Start, want one try under %v", took, bound)
}

// TestMemberWaitSeesEarlierMembers: Wait returns once the group has been
// read with the member's own node in it, so the view holds every member
// whose node was there first. The member's first read finds no group path;
// another member joins (creating the path) before the member's own node is
// created (its Node's create of the path is held in the proxy meanwhile);
// when Wait returns, the view already holds the other member.
func TestMemberWaitSeesEarlierMembers(t *testing.T) {
	for try := 1; ; try++ {
		if waitTrial(t) {
			return
		}
		if try == 5 {
			t.Fatalf("in %d tries the member never read the group before its Node created the path", try)
		}
	}
}

// waitTrial runs one try of TestMemberWaitSeesEarlierMembers and reports
// whether it was conclusive: the member's first listing of the group reached
// the server before its Node's create of the group path.
func waitTrial(t *testing.T) bool {
	ns := zktest.NewNamespace(t)
	raw := ns.Conn(t)
	s, p := sessiontest.ConnectProxy(t, ns)
	dir := ns.Path(groupPath)
	var listed, holding atomic.Bool
	held := make(chan bool, 1) // whether a listing passed before the hold
	release := make(chan struct{})
	p.OnRequest(func(r zktest.Request) zktest.Action {
		switch {
		case r.Path != dir:
		case r.Op == zktest.OpGetChildren2:
			listed.Store(true)
		case zktest.OpName(r.Op) == "createContainer" && holding.CompareAndSwap(false, true):
			held <- listed.Load()
			// Hold the create (and what follows it on the connection) while
			// the test adds a member; bounded, so that a failed test cannot
			// hang the proxy.
			select {
			case <-release:
			case <-time.After(wait):
			}
		}
		return zktest.Forward
	})
	m, err := group.NewMember(s, groupPath, "a", []byte("da"))
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	var conclusive bool
	select {
	case conclusive = <-held:
	case <-time.After(wait):
		close(release)
		t.Fatalf("the member's Node did not create the group path within %v", wait)
	}
	if conclusive {
		acl := zk.WorldACL(zk.PermAll)
		_, err := raw.Create(ns.Path("/groups"), nil, 0, acl)
		if err == nil {
			_, err = raw.CreateContainer(dir, nil, zk.FlagContainer, acl)
		}
		if err == nil {
			_, err = raw.Create(dir+"/b", []byte("db"), zk.FlagEphemeral, acl)
		}
		if err != nil {
			close(release)
			t.Fatal(err)
		}
	}
	close(release)
	waitFor(t, "Wait", m.Wait)
	if !conclusive {
		return false
	}
	if v := text(m.Members()); !sameView(v, map[string]string{"a": "da", "b": "db"}) {
		t.Fatalf("view when Wait returned: %v, want a and b (b joined before a's node was created)", v)
	}
	return true
}
