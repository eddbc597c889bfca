package zksession_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/internal/testkit/sessiontest"
	"github.com/zkrecipes/zkrecipes/internal/zksession"
	"github.com/zkrecipes/zkrecipes/session"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// nodeEvents is a NodeEvents that records the events it is given (it never
// blocks: NodeEvent runs on go-zookeeper's goroutine).
type nodeEvents chan zk.Event

func (c nodeEvents) NodeEvent(ev zk.Event) {
	select {
	case c <- ev:
	default:
	}
}

// next returns the next event, failing the test after wait.
func (c nodeEvents) next(t *testing.T, what string) zk.Event {
	t.Helper()
	select {
	case ev := <-c:
		return ev
	case <-time.After(wait):
		t.Fatalf("no node event %s within %v", what, wait)
		return zk.Event{}
	}
}

// rearmSetup is a session through a proxy that logs its requests, with the
// given loss policy, a raw connection and n ephemeral nodes of the session
// (ns.Path("/n0")...), each watched through WatchNode with its own
// subscription and target.
type rearmSetup struct {
	ns      *zktest.Namespace
	p       *zktest.Proxy
	log     *sessiontest.RequestLog
	s       *session.Session
	core    *zksession.Session
	rec     *sessiontest.Recorder
	raw     *zk.Conn
	ep      *zksession.Epoch
	nodes   []string
	subs    []*zksession.NodeSub
	targets []nodeEvents
}

func newRearmSetup(t *testing.T, policy session.LossPolicy, n int) *rearmSetup {
	t.Helper()
	r := &rearmSetup{ns: zktest.NewNamespace(t)}
	r.p = r.ns.Proxy(t)
	r.log = sessiontest.LogRequests(r.p)
	// A timeout long enough for a cut, a delete and a reconnect on a busy
	// machine: the tests are about one session.
	r.s = sessiontest.ConnectTo(t, times3(r.p.Addr()), r.ns.Root,
		session.WithSessionTimeout(10*time.Second), session.WithLossPolicy(policy))
	r.core = sessiontest.Core(r.s)
	r.rec = sessiontest.Record(t, r.s)
	r.raw = r.ns.Conn(t)
	r.ep = r.core.Epoch()
	ctx := ctxT(t, wait)
	for i := 0; i < n; i++ {
		// An ephemeral of the session under test, as a lease's node is
		// (WatchNode's rule); the raw connection plays the third party.
		node := r.ns.Path(fmt.Sprintf("/n%d", i))
		if _, err := r.s.Conn().Create(node, nil, zk.FlagEphemeral, zk.WorldACL(zk.PermAll)); err != nil {
			t.Fatal(err)
		}
		sub, target := new(zksession.NodeSub), make(nodeEvents, 4)
		if err := r.core.WatchNode(ctx, r.ep, sub, node, target); err != nil {
			t.Fatal(err)
		}
		r.nodes = append(r.nodes, node)
		r.subs = append(r.subs, sub)
		r.targets = append(r.targets, target)
	}
	return r
}

// serverWatches returns the paths the session watches, as the server says.
func (r *rearmSetup) serverWatches(t *testing.T) map[string]bool {
	t.Helper()
	return sessiontest.Watches(t, r.ns.Server.Addr(), r.ep.SessionID())
}

// getData returns the getData requests on the test's nodes relayed since
// mark (a mark of r.log), by path: the session's own requests elsewhere
// (the ensemble's configuration) are not counted.
func (r *rearmSetup) getData(mark int) map[string]int {
	out := map[string]int{}
	for _, q := range r.log.Since(mark) {
		if q.Op == zktest.OpGetData && strings.HasPrefix(q.Path, r.ns.Root+"/") {
			out[q.Path]++
		}
	}
	return out
}

// total sums the counts of m.
func total(m map[string]int) int {
	n := 0
	for _, c := range m {
		n += c
	}
	return n
}

// reconnected waits for Suspended and then Reconnected on the same epoch.
func (r *rearmSetup) reconnected(t *testing.T) {
	t.Helper()
	r.rec.Wait(t, wait, session.Suspended)
	if ev := r.rec.Wait(t, wait, session.Reconnected); ev.Epoch != r.ep {
		t.Fatalf("reconnected on %v, want the same session (%v)", ev.Epoch, r.ep)
	}
}

// wantDeleted checks that target i is told NodeDeleted for its node.
func (r *rearmSetup) wantDeleted(t *testing.T, i int) {
	t.Helper()
	ev := r.targets[i].next(t, "for "+r.nodes[i])
	if ev.Type != zk.EventNodeDeleted || ev.Path != r.nodes[i] {
		t.Fatalf("node event %v on %s, want NodeDeleted on %s", ev.Type, ev.Path, r.nodes[i])
	}
}

// TestRearmDeleteAfterReconnect: under the standard policy WatchNode's watch
// is one go-zookeeper does not set again after a reconnect. The Session does:
// the server holds it again once the same session is back, and a third
// party's delete after the reconnect reaches the subscriber.
func TestRearmDeleteAfterReconnect(t *testing.T) {
	r := newRearmSetup(t, session.Standard, 1)
	node := r.nodes[0]
	if !r.serverWatches(t)[node] {
		t.Fatalf("no watch on %s before the cut", node)
	}
	r.p.Cut()
	r.reconnected(t)
	zktest.Eventually(t, wait, func() bool { return r.serverWatches(t)[node] }, "the watch on %s set again", node)
	if err := r.raw.Delete(node, -1); err != nil {
		t.Fatal(err)
	}
	r.wantDeleted(t, 0)
	if n := r.core.NodeSubs(); n != 0 {
		t.Errorf("%d subscriptions left after the delete", n)
	}
}

// TestRearmDeleteWhileAway: a node deleted while the session was
// disconnected (no watch to tell) is found gone by the re-arm, which tells
// the subscriber NodeDeleted as the server would have.
func TestRearmDeleteWhileAway(t *testing.T) {
	for _, policy := range []session.LossPolicy{session.Standard, session.SessionOnly} {
		t.Run(policy.String(), func(t *testing.T) {
			r := newRearmSetup(t, policy, 2)
			r.p.Refuse(true)
			r.p.Cut()
			r.rec.Wait(t, wait, session.Suspended)
			if err := r.raw.Delete(r.nodes[0], -1); err != nil {
				t.Fatal(err)
			}
			r.p.Refuse(false)
			if ev := r.rec.Wait(t, wait, session.Reconnected); ev.Epoch != r.ep {
				t.Fatalf("reconnected on %v, want the same session (%v)", ev.Epoch, r.ep)
			}
			r.wantDeleted(t, 0)
			// The other node is watched again, and its target has heard
			// nothing.
			zktest.Eventually(t, wait, func() bool { return r.serverWatches(t)[r.nodes[1]] }, "the watch on %s set again", r.nodes[1])
			select {
			case ev := <-r.targets[1]:
				t.Fatalf("event %v for the node that stayed", ev)
			default:
			}
			if err := r.raw.Delete(r.nodes[1], -1); err != nil {
				t.Fatal(err)
			}
			r.wantDeleted(t, 1)
		})
	}
}

// TestRearmNodeReplacedWhileAway: a node deleted and created again by
// another session while the session was away is not the subscriber's node:
// the re-arm finds it owned by another session and tells NodeDeleted.
func TestRearmNodeReplacedWhileAway(t *testing.T) {
	r := newRearmSetup(t, session.Standard, 1)
	r.p.Refuse(true)
	r.p.Cut()
	r.rec.Wait(t, wait, session.Suspended)
	if err := r.raw.Delete(r.nodes[0], -1); err != nil {
		t.Fatal(err)
	}
	if _, err := r.raw.Create(r.nodes[0], nil, zk.FlagEphemeral, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	r.p.Refuse(false)
	if ev := r.rec.Wait(t, wait, session.Reconnected); ev.Epoch != r.ep {
		t.Fatalf("reconnected on %v, want the same session (%v)", ev.Epoch, r.ep)
	}
	r.wantDeleted(t, 0)
}

// TestRearmOneRequestPerPath: the re-arm sends one getData per watched path
// (under SessionOnly none: go-zookeeper sets its own watches again), and no
// more after that, however many reconnects there were before.
func TestRearmOneRequestPerPath(t *testing.T) {
	const n = 40
	for _, c := range []struct {
		policy session.LossPolicy
		want   int // getData requests per path and reconnect
	}{{session.Standard, 1}, {session.SessionOnly, 0}} {
		t.Run(c.policy.String(), func(t *testing.T) {
			r := newRearmSetup(t, c.policy, n)
			for round := 0; round < 2; round++ {
				mark := r.log.Mark()
				r.p.Cut()
				r.reconnected(t)
				zktest.Eventually(t, wait, func() bool {
					w := r.serverWatches(t)
					for _, node := range r.nodes {
						if !w[node] {
							return false
						}
					}
					return true
				}, "every watch set again (round %d)", round)
				got := r.getData(mark)
				if total(got) != c.want*n {
					t.Fatalf("round %d: getData requests after the reconnect %v, want %d for each of the %d nodes", round, got, c.want, n)
				}
				for path, k := range got {
					if k != c.want {
						t.Errorf("round %d: %d getData requests on %s, want %d", round, k, path, c.want)
					}
				}
			}
			// Every subscriber hears of its delete, and nothing was sent
			// meanwhile (a late duplicate would show here).
			mark := r.log.Mark()
			for _, node := range r.nodes {
				if err := r.raw.Delete(node, -1); err != nil {
					t.Fatal(err)
				}
			}
			for i := range r.nodes {
				r.wantDeleted(t, i)
			}
			if got := r.getData(mark); len(got) != 0 {
				t.Errorf("getData requests after the re-arm was done: %v", got)
			}
		})
	}
}

// TestRearmSkipsReleasedAndPlain: a subscription cancelled while the session
// is away is not armed again, and neither is one made with SubscribeNode
// (its caller set its own watch).
func TestRearmSkipsReleasedAndPlain(t *testing.T) {
	r := newRearmSetup(t, session.Standard, 2)
	r.core.CancelNode(r.subs[1], r.nodes[1])
	plain := r.ns.Path("/plain")
	if _, err := r.raw.Create(plain, nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	var sub zksession.NodeSub
	target := make(nodeEvents, 4)
	r.core.SubscribeNode(&sub, plain, target)
	t.Cleanup(func() { r.core.CancelNode(&sub, plain) })
	mark := r.log.Mark()
	r.p.Cut()
	r.reconnected(t)
	zktest.Eventually(t, wait, func() bool { return r.serverWatches(t)[r.nodes[0]] }, "the watch on %s set again", r.nodes[0])
	if got := r.getData(mark); len(got) != 1 || got[r.nodes[0]] != 1 {
		t.Errorf("getData requests after the reconnect %v, want one on %s (the one held subscription)", got, r.nodes[0])
	}
	if w := r.serverWatches(t); w[r.nodes[1]] || w[plain] {
		t.Errorf("watches set again for a released or plain subscription: %v", w)
	}
}
