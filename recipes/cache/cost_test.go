package cache_test

import (
	"fmt"
	"testing"

	"github.com/zkrecipes/zkrecipes/internal/testkit/sessiontest"
	"github.com/zkrecipes/zkrecipes/recipes/cache"
	"github.com/zkrecipes/zkrecipes/session"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// reads returns the list and data reads a tap has counted.
func reads(tap *zktest.Tap) [2]int64 {
	r := tap.Requests()
	return [2]int64{r[zktest.OpGetChildren2], r[zktest.OpGetData]}
}

// waitReads waits until the reads since base are want (lists, data reads).
func waitReads(t *testing.T, tap *zktest.Tap, base, want [2]int64, what string) [2]int64 {
	t.Helper()
	zktest.Eventually(t, wait, func() bool {
		r := reads(tap)
		return r[0]-base[0] == want[0] && r[1]-base[1] == want[1]
	}, what)
	return reads(tap)
}

// The costs doc.go states, counted on the wire: the first load of three
// children is one list and three reads; a write, one read; a new child,
// one list and one read; a reconnect, one list and one read per child.
func TestCosts(t *testing.T) {
	ns, raw := zktestNS(t)
	dir := ns.Path("dir")
	mustCreate(t, raw, dir, "")
	for _, k := range []string{"a", "b", "c"} {
		mustCreate(t, raw, dir+"/"+k, k)
	}
	s, proxy, tap := sessiontest.ConnectProxyTap(t, ns, longSession)
	rec := sessiontest.Record(t, s)
	base := reads(tap)
	c := newChildren(t, s, "/dir")
	r := record(c.Events())
	r.waitInit(t)
	base = waitReads(t, tap, base, [2]int64{1, 3}, "the first load: 1 list, 3 reads")
	mustSet(t, raw, dir+"/a", "a1")
	r.WaitFor(t, wait, "a's update", func(evs []cache.Event) bool { return hasData(evs, "/dir/a", "a1") })
	base = waitReads(t, tap, base, [2]int64{0, 1}, "a write: 1 read")
	mustCreate(t, raw, dir+"/d", "d")
	r.WaitFor(t, wait, "d's Added", func(evs []cache.Event) bool { return hasData(evs, "/dir/d", "d") })
	base = waitReads(t, tap, base, [2]int64{1, 1}, "a new child: 1 list, 1 read")
	proxy.Cut()
	rec.Wait(t, wait, session.Reconnected)
	waitReads(t, tap, base, [2]int64{1, 4}, "a reconnect: 1 list, 4 reads")
}

// Events that nobody receives never stall the cache: with the events
// channel unread, Get follows every write.
func TestUnreadEventsDoNotStall(t *testing.T) {
	ns, raw := zktestNS(t)
	full := ns.Path("n")
	mustCreate(t, raw, full, "v0")
	s := sessiontest.Connect(t, ns)
	c := newNode(t, s, "/n")
	sessiontest.Recv(t, c.Initialized(), wait, "Initialized")
	for i := 1; i <= 50; i++ {
		v := fmt.Sprintf("v%d", i)
		mustSet(t, raw, full, v)
		zktest.Eventually(t, wait, func() bool {
			n, ok := c.Get()
			return ok && string(n.Data) == v
		}, "Get follows "+v)
	}
	// The events are all there, in order, for a reader that comes late.
	r := record(c.Events())
	evs := r.WaitFor(t, wait, "the last write's event", func(evs []cache.Event) bool { return hasData(evs, "/n", "v50") })
	if _, err := replay(evs); err != nil {
		t.Fatal(err)
	}
}
