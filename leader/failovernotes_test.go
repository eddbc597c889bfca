package leader_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/internal/testkit/sessiontest"
	"github.com/zkrecipes/zkrecipes/leader"
	"github.com/zkrecipes/zkrecipes/session"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// TestFailoverOneNotification: in a chain of quick failovers (each latch
// waits behind the leader less than 100 ms, then leads less than 100 ms),
// a failover costs one watch notification in all: the waiter's, on the
// leader's node. Neither the waiter nor the leader watches its own node yet
// (WithNodeWatch sets that watch after 100 ms of waiting next in line or of
// leading), so the leader's own delete notifies nobody else, and the waiter
// takes over on the notice without reading the children. Only failovers
// whose leader waited and led well within the 100 ms are judged (a stalled
// machine may stretch one; then another is tried).
func TestFailoverOneNotification(t *testing.T) {
	ns := zktest.NewNamespace(t)
	s0, tap0 := sessiontest.ConnectTap(t, ns)
	s1, tap1 := sessiontest.ConnectTap(t, ns)
	taps := []*zktest.Tap{tap0, tap1}
	dir := ns.Path(electionPath) + "/"
	// queue starts a latch on session i and waits until it watches the
	// leader's node.
	queue := func(i, n int) (*leader.Latch, time.Time) {
		l := startLatch(t, []*session.Session{s0, s1}[i], fmt.Sprint("l", n))
		zktest.Eventually(t, wait, func() bool {
			for p := range taps[i].Watches() {
				if strings.HasPrefix(p, dir) {
					return true
				}
			}
			return false
		}, "latch %d waits on the leader's node", n)
		return l, time.Now()
	}
	cur := startLatch(t, s0, "l0")
	await(t, cur)
	next, queued := queue(1, 1)
	judged := 0
	for n := 2; n < 20 && judged < 3; n++ {
		// cur leads; next (on session (n-1)%2) waits behind it since queued.
		cur.Close()
		await(t, next)
		waited := time.Since(queued)
		cur = next
		led := time.Now()
		next, queued = queue(n%2, n)
		resetTapNotifications(taps)
		kids := taps[n%2].Requests()[zktest.OpGetChildren2]
		cur.Close()
		term := time.Since(led)
		await(t, next)
		all := tapNotifications(t, taps)
		notes := len(all)
		reads := taps[n%2].Requests()[zktest.OpGetChildren2] - kids
		if waited > 50*time.Millisecond || term > 50*time.Millisecond {
			t.Logf("failover %d: the leader waited %v and led %v: not judged", n, waited, term)
			continue
		}
		judged++
		if notes != 1 {
			t.Errorf("failover %d: %d notifications (%v), want 1", n, notes, all)
		}
		if reads != 0 {
			t.Errorf("failover %d: the new leader read the children %d times to take over, want 0", n, reads)
		}
	}
	cur.Close()
	next.Close()
	if judged == 0 {
		t.Fatal("no failover in 18 had a leader that waited and led under 50 ms")
	}
}
