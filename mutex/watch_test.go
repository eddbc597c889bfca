package mutex_test

import (
	"bufio"
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/mutex"
	"github.com/zkrecipes/zkrecipes/session"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// watchCounters reads the server's fired-watcher counters: the sums of the
// node_{created,deleted,changed,children} watch-count summaries (one per
// watcher notified) and the number of events that notified anyone.
func watchCounters(t testing.TB, addr string) (fired, events int64) {
	t.Helper()
	m, err := zktest.Mntr(context.Background(), addr)
	if err != nil {
		t.Fatal(err)
	}
	for _, kind := range []string{"created", "deleted", "changed", "children"} {
		s, _ := strconv.ParseFloat(m["zk_sum_node_"+kind+"_watch_count"], 64)
		c, _ := strconv.ParseFloat(m["zk_cnt_node_"+kind+"_watch_count"], 64)
		fired += int64(s)
		events += int64(c)
	}
	return fired, events
}

// watchesUnder counts the watches registered on the server (one per path and
// connection, data and child watches alike) on paths under prefix, from the
// `wchp` four-letter word: each path on its own line, followed by one
// indented line per session watching it.
func watchesUnder(t testing.TB, addr, prefix string) int {
	t.Helper()
	out, err := zktest.FourLetterWord(context.Background(), addr, "wchp")
	if err != nil {
		t.Fatal(err)
	}
	n, in := 0, false
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "/"):
			in = strings.HasPrefix(line, prefix+"/")
		case in && strings.TrimSpace(line) != "":
			n++
		}
	}
	return n
}

// tappedSession connects a session whose connections go through a fresh
// zktest.Tap, which counts the connections and records the notifications.
func tappedSession(t testing.TB, ns *zktest.Namespace) (*session.Session, *zktest.Tap) {
	t.Helper()
	w := zktest.NewTap()
	return connect(t, ns, session.WithDialer(w.Dialer())), w
}

// TestWatchesPerRelease: 100 waiters queue on one fair lock; each unlocks as
// soon as it holds. The test proves that a release wakes exactly one waiter,
// the next in line (at most two with WithLookAhead: the next and the one
// after it), counting every watch notification on the client side (each
// session's connection is tapped) and attributing it: a NodeDeleted
// notification about a node, sent to the session that owned that node, is
// the releaser's own node watch (WithNodeWatch) fired by its own delete;
// every other notification went to a waiter, and must have gone to the
// session of the node that follows the released one (or, looking ahead, of
// one of the two nodes that follow it). For every release but the last it
// asserts exactly one notification to waiters (one or two looking ahead, at
// most one for the second to last), none at the last, and at most one (node
// watch on: only if the watch was armed before the release) or zero (off)
// to the releaser. The server's own counters must agree with the
// client-side total.
//
// The waiters are spread over 10 sessions so that neighbours in the queue
// never share a connection (the server keeps one watcher per connection and
// path, so a herd within one connection would be invisible); a herd across
// connections (every waiter watching the holder, or the parent) would show
// as more than one notification to waiters for one release. The control
// subtest shows the measurement catching the herd of NonFair, whose waiters
// all watch the one lock node by design.
func TestWatchesPerRelease(t *testing.T) {
	for _, watch := range []bool{false, true} {
		t.Run(fmt.Sprintf("nodewatch=%v", watch), func(t *testing.T) { testWatchesPerRelease(t, watch, false) })
	}
	t.Run("lookahead=true", func(t *testing.T) { testWatchesPerRelease(t, true, true) })
	// Look-ahead needs the node watch: without it, WithLookAhead changes
	// nothing.
	t.Run("nodewatch=false,lookahead=true", func(t *testing.T) { testWatchesPerRelease(t, false, true) })
	t.Run("control=nonfair", testHerdControl)
}

func testWatchesPerRelease(t *testing.T, watch, lookAhead bool) {
	const waiters, sessions = 100, 10
	ns := zktest.NewNamespace(t)
	raw := ns.Conn(t)
	addr := ns.Server.Addr()
	ctx := ctxT(t)
	opts := []mutex.Option{mutex.WithNodeWatch(watch), mutex.WithLookAhead(lookAhead)}
	asked := lookAhead
	lookAhead = lookAhead && watch // what the waiters do

	var taps []*zktest.Tap
	var sids []int64
	tapped := func() *session.Session {
		s, w := tappedSession(t, ns)
		taps, sids = append(taps, w), append(sids, s.SessionID())
		return s
	}
	holder := newMutex(t, tapped(), opts...)
	var ms []*mutex.Reentrant
	for i := 0; i < sessions; i++ {
		ms = append(ms, newMutex(t, tapped(), opts...))
	}
	reqs0, _ := requestsOf(taps)
	hl, err := holder.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}

	var mu sync.Mutex
	owner := map[string]int64{mutex.NodePath(hl): mutex.NodeSessionID(hl)} // lock node → owning session
	errs := make(chan error, waiters)
	var wg sync.WaitGroup
	for i := 0; i < waiters; i++ {
		m := ms[i%sessions]
		wg.Add(1)
		go func() {
			defer wg.Done()
			l, err := m.Lock(ctx)
			if err == nil {
				mu.Lock()
				owner[mutex.NodePath(l)] = mutex.NodeSessionID(l)
				mu.Unlock()
				err = l.Release(ctx)
			}
			errs <- err
		}()
		waitKids(t, raw, ns, i+2) // queue order = start order
	}
	// Before the first release, the first waiter watches the holder, every
	// other waiter its predecessor (with look-ahead, the node two places
	// ahead of its own) and, with the node
	// watch, the holder watches its own node (once it has held 100 ms) and
	// so does the first waiter (next in line, once it has waited 100 ms: its
	// watch lets it hold on the holder's deletion notice after that); deeper
	// waiters read the children when woken and do not watch their own node
	// while they wait.
	wantWatches := waiters
	if watch {
		wantWatches = waiters + 2
	}
	zktest.Eventually(t, wait, func() bool { return watchesUnder(t, addr, ns.Root) == wantWatches },
		"the watches under the namespace never numbered %d", wantWatches)
	for _, w := range taps {
		w.ResetNotifications() // nothing fired yet; count from the first release on
	}
	fired0, events0 := watchCounters(t, addr)

	if err := hl.Release(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	// Every notification is now in: the releaser's own one arrives before
	// the reply to its delete (one connection, in order), and a waiter
	// acquires only after its notification.

	toWaiters := map[string]int{} // lock node → notifications to other sessions
	toOwn := map[string]int{}     // lock node → notifications to its owner
	woke := map[string][]int64{}  // lock node → the other sessions notified
	var other []zktest.Notification
	var total int64
	for i, w := range taps {
		if d := w.Dials(); d != 1 {
			t.Fatalf("session %d opened %d connections: a reconnect would blur the count", i, d)
		}
		for _, n := range notes(t, w) {
			total++
			o, isLock := owner[n.Path]
			switch {
			case n.Type == zk.EventNodeDeleted && isLock && o == sids[i]:
				toOwn[n.Path]++
			case n.Type == zk.EventNodeDeleted && isLock:
				toWaiters[n.Path]++
				woke[n.Path] = append(woke[n.Path], sids[i])
			default:
				other = append(other, n)
			}
		}
	}
	if len(other) != 0 {
		t.Fatalf("unexpected notifications (a herd on another path?): %v", other)
	}
	nodes := make([]string, 0, len(owner))
	for p := range owner {
		nodes = append(nodes, p)
	}
	sort.Slice(nodes, func(i, j int) bool { return seqOf(nodes[i]) < seqOf(nodes[j]) })
	if len(nodes) != waiters+1 {
		t.Fatalf("%d lock nodes, want %d", len(nodes), waiters+1)
	}
	releases := len(nodes)
	wantOwn := 0
	if watch {
		wantOwn = 1
	}
	var handW, handO int // over the releases that handed the lock over
	for i, p := range nodes {
		minW, maxW := 1, 1 // without look-ahead, the next waiter only
		if lookAhead {
			// The waiter two places back has watched this node since it
			// queued (it looks ahead); the next one's watch, set after the
			// node two places ahead of its own went, may find this node
			// gone already.
			minW, maxW = 1, 2
			if i >= releases-2 {
				minW = 0 // nobody two places back
			}
		}
		if i == releases-1 {
			minW, maxW = 0, 0 // the last release: nobody waits
		} else {
			handW += toWaiters[p]
			handO += toOwn[p]
		}
		// The releaser's own watch fires only if it was armed: by the wait
		// (next in line) or by the lease's goroutine before the release,
		// which races with this test's immediate Release. A waiter's watch
		// on its predecessor may find it gone already (no notification).
		if toWaiters[p] < minW || toWaiters[p] > maxW || toOwn[p] > wantOwn {
			t.Fatalf("release %d of %d (%s): %d notifications to waiters (want %d to %d), %d to the releaser's own watch (want at most %d)",
				i+1, releases, p, toWaiters[p], minW, maxW, toOwn[p], wantOwn)
		}
		for _, sid := range woke[p] {
			if !lookAhead && (i+1 >= releases || owner[nodes[i+1]] != sid) {
				t.Fatalf("release %d of %d (%s) notified session 0x%x, which does not own the node behind it", i+1, releases, p, sid)
			}
			if (i+1 >= releases || owner[nodes[i+1]] != sid) && (i+2 >= releases || owner[nodes[i+2]] != sid) {
				t.Fatalf("release %d of %d (%s) notified session 0x%x, which owns neither of the two nodes behind it", i+1, releases, p, sid)
			}
		}
	}
	last := nodes[releases-1]

	// The requests per lock, by kind: a create and a delete; a data watch on
	// the predecessor (looking ahead, one more, on the node two places
	// ahead), plus the node watches armed after 100 ms and the directory's
	// data checked once per session; the children read behind the create and
	// the one on the deletion notice, plus a read again for a waiter whose
	// predecessor was gone before its watch was set.
	reqs, byOp := requestsOf(taps)
	reqs -= reqs0
	per := func(op string) float64 { return float64(byOp[op]) / float64(releases) }
	t.Logf("nodewatch=%v lookahead=%v: %.2f requests per lock (%v, by kind, pings excluded, from the sessions' start)",
		watch, asked, float64(reqs)/float64(releases), byOp)
	minW, maxW := 0.9, 1.5
	if lookAhead {
		minW, maxW = 1.5, 2.5
	}
	switch {
	case byOp["delete"] != int64(releases):
		t.Fatalf("%d deletes for %d locks", byOp["delete"], releases)
	case per("create") > 1.05:
		t.Fatalf("%.2f creates per lock", per("create"))
	case per("getData") < minW || per("getData") > maxW:
		t.Fatalf("%.2f data watches per lock, want %.1f to %.1f", per("getData"), minW, maxW)
	case per("getChildren2") > 2.2:
		t.Fatalf("%.2f children reads per lock, want at most 2.2", per("getChildren2"))
	}

	// The server's count must match what the clients received.
	var fired, events int64
	zktest.Eventually(t, wait, func() bool {
		f, e := watchCounters(t, addr)
		fired, events = f-fired0, e-events0
		return fired >= total
	}, "the server never counted the %d notifications the clients received", total)
	hand := releases - 1
	t.Logf("nodewatch=%v lookahead=%v: %d releases, %d of them hand the lock to a waiter; per handing release: %.2f to waiters, %.2f to the releaser's own watch (%.2f in all); last release: %d to waiters, %d to its own watch",
		watch, asked, releases, hand, float64(handW)/float64(hand), float64(handO)/float64(hand),
		float64(handW+handO)/float64(hand), toWaiters[last], toOwn[last])
	t.Logf("nodewatch=%v: server: %d watchers notified by %d events (%.2f per handing release); clients received %d",
		watch, fired, events, float64(fired-int64(toOwn[last]))/float64(hand), total)
	if fired != total {
		t.Fatalf("server counted %d watchers notified, clients received %d", fired, total)
	}
	if k := lockKids(t, raw, ns); len(k) != 0 {
		t.Fatalf("nodes left: %q", k)
	}
}

// requestsOf returns the requests the taps' clients wrote, pings excluded:
// their number, and by operation.
func requestsOf(taps []*zktest.Tap) (int64, map[string]int64) {
	const opPing = 11
	var n int64
	byOp := map[string]int64{}
	for _, w := range taps {
		for op, k := range w.Requests() {
			if op != opPing {
				n += k
				byOp[zktest.OpName(op)] += k
			}
		}
	}
	return n, byOp
}

// testHerdControl runs the same measurement on NonFair, whose waiters all
// watch the one lock node: its first release must notify every waiting
// session. If this stopped seeing a herd, the fair test above would prove
// nothing.
func testHerdControl(t *testing.T) {
	const waiters = 5
	ns := zktest.NewNamespace(t)
	addr := ns.Server.Addr()
	ctx := ctxT(t)
	opt := mutex.WithNodeWatch(false)
	nonfair := kindNamed(t, "nonfair")
	hs, htap := tappedSession(t, ns)
	holder := nonfair.make(t, hs, opt)
	hl, err := holder.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	taps := []*zktest.Tap{htap}
	held := make(chan *mutex.Lease, waiters)
	errs := make(chan error, waiters)
	var wg sync.WaitGroup
	t.Cleanup(wg.Wait) // runs after the locks' Close (cleanups run last first)
	for i := 0; i < waiters; i++ {
		s, w := tappedSession(t, ns)
		taps = append(taps, w)
		lk := nonfair.make(t, s, opt)
		wg.Add(1)
		go func() {
			defer wg.Done()
			l, err := lk.Lock(ctx)
			if err != nil {
				errs <- err
				return
			}
			held <- l
		}()
	}
	zktest.Eventually(t, wait, func() bool { return watchesUnder(t, addr, ns.Root) == waiters },
		"the %d waiters do not all watch the lock node", waiters)
	fired0, events0 := watchCounters(t, addr)
	if err := hl.Release(ctx); err != nil {
		t.Fatal(err)
	}
	// The winner holds until we unlock it: one delete so far.
	first := recvLease(t, held, errs)
	// A session that reconnected is told again of the watched events it
	// missed (go-zookeeper re-sends its watches, and the server answers a
	// deletion it has already notified with a notification of its own, not
	// counted as a fired watcher): count each session's distinct
	// notifications.
	var fired, events, got int64
	zktest.Eventually(t, wait, func() bool {
		got = 0
		for _, w := range taps {
			got += int64(distinctNotes(notes(t, w)))
		}
		f, e := watchCounters(t, addr)
		fired, events = f-fired0, e-events0
		return got >= waiters && fired >= waiters
	}, "one NonFair release did not notify all %d waiters", waiters)
	dials := 0
	for _, w := range taps {
		dials += w.Dials()
	}
	t.Logf("control: one NonFair release notified %d waiters (server: %d watchers, %d events; %d connections for %d sessions): a herd, as designed",
		got, fired, events, dials, len(taps))
	if events != 1 || fired != waiters || got != waiters {
		var seen [][]zktest.Notification
		for _, w := range taps {
			seen = append(seen, notes(t, w))
		}
		t.Fatalf("NonFair release: %d events, %d watchers, %d received; want 1, %d, %d (notifications per session: %v)",
			events, fired, got, waiters, waiters, seen)
	}
	l := first
	for i := 0; ; i++ {
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if i == waiters-1 {
			break
		}
		l = recvLease(t, held, errs)
	}
}

func recvLease(t testing.TB, held <-chan *mutex.Lease, errs <-chan error) *mutex.Lease {
	t.Helper()
	select {
	case l := <-held:
		return l
	case err := <-errs:
		t.Fatal(err)
		return nil
	case <-time.After(wait):
		t.Fatalf("no Lock returned within %v", wait)
		return nil
	}
}

// distinctNotes counts the distinct notifications (type and path) in ns.
func distinctNotes(ns []zktest.Notification) int {
	seen := map[zktest.Notification]bool{}
	for _, n := range ns {
		seen[zktest.Notification{Type: n.Type, Path: n.Path}] = true
	}
	return len(seen)
}
