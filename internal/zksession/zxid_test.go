package zksession_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/internal/testkit/sessiontest"
	"github.com/zkrecipes/zkrecipes/session"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// TestWatchesAcrossReconnects: after a reconnect the session re-sets its
// watches relative to the last zxid it saw before the connection (the wire
// keeps that zxid, not go-zookeeper: see wire.go's zxidBook). A watched node
// changed while the client was away fires; one left alone does not. With
// 4,000 more watches (several SetWatches packets) and requests running all
// along, replies arrive on each new connection while go-zookeeper re-sets
// the watches: there go-zookeeper v1.0.4 races on its own last zxid, which
// -race reports in every run of this test without the wire's bookkeeping.
func TestWatchesAcrossReconnects(t *testing.T) {
	ns := zktest.NewNamespace(t)
	p := ns.Proxy(t)
	// Three addresses: go-zookeeper does not pause before reconnecting.
	s := sessiontest.ConnectTo(t, times3(p.Addr()), ns.Root, session.WithSessionTimeout(10*time.Second))
	rec := sessiontest.Record(t, s)
	raw := ns.Conn(t)
	path := func(name string) string {
		t.Helper()
		p, err := s.Path(name)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	changed, quiet, probe := path("/changed"), path("/quiet"), path("/probe")
	for _, n := range []string{changed, quiet, probe} {
		if _, err := raw.Create(n, nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
			t.Fatal(err)
		}
	}

	// Enough watches to fill several SetWatches packets (go-zookeeper
	// splits them at 128 KiB and reads its last zxid for each): the re-set
	// then takes long enough for replies to arrive meanwhile.
	long := strings.Repeat("w", 200)
	var arm sync.WaitGroup
	armErr := make(chan error, 1)
	for g := 0; g < 8; g++ {
		arm.Add(1)
		go func() {
			defer arm.Done()
			for i := g; i < 4000; i += 8 {
				if _, _, _, err := s.Conn().ExistsW(fmt.Sprintf("%s/absent-%s-%d", ns.Root, long, i)); err != nil {
					select {
					case armErr <- err:
					default:
					}
					return
				}
			}
		}()
	}
	arm.Wait()
	select {
	case err := <-armErr:
		t.Fatal(err)
	default:
	}

	stop := make(chan struct{})
	var traffic sync.WaitGroup
	for i := 0; i < 4; i++ {
		traffic.Add(1)
		go func() {
			defer traffic.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				s.Conn().Exists(quiet) // errors while cut are expected
			}
		}()
	}
	defer func() { close(stop); traffic.Wait() }()

	for round := 0; round < 5; round++ {
		_, _, wChanged, err := sessiontest.Core(s).GetW(changed)
		if err != nil {
			t.Fatal(err)
		}
		_, _, wQuiet, err := sessiontest.Core(s).GetW(quiet)
		if err != nil {
			t.Fatal(err)
		}
		_, _, wProbe, err := sessiontest.Core(s).GetW(probe)
		if err != nil {
			t.Fatal(err)
		}

		p.Refuse(true)
		p.Cut()
		rec.Wait(t, wait, session.Suspended)
		if _, err := raw.Set(changed, []byte{byte(round)}, -1); err != nil {
			t.Fatal(err)
		}
		p.Refuse(false)
		rec.Wait(t, wait, session.Reconnected)

		select {
		case ev, ok := <-wChanged.Events():
			if got := wChanged.Event(ev, ok); got.Type != zk.EventNodeDataChanged {
				t.Fatalf("round %d: the node changed while away fired with %v", round, got.Type)
			}
		case <-time.After(wait):
			t.Fatalf("round %d: the watch of a node changed while the client was away did not fire", round)
		}
		// Once the server holds the unchanged node's watch again, it has
		// judged it (a spurious fire is sent at re-set time, before the
		// probe's event).
		sid := sessiontest.Core(s).Epoch().SessionID()
		zktest.Eventually(t, wait, func() bool {
			w := sessiontest.Watches(t, ns.Server.Addr(), sid)
			return w[quiet] && w[probe]
		}, "round %d: the watches were not re-set", round)
		if _, err := raw.Set(probe, []byte{byte(round)}, -1); err != nil {
			t.Fatal(err)
		}
		select {
		case ev, ok := <-wProbe.Events():
			if got := wProbe.Event(ev, ok); got.Type != zk.EventNodeDataChanged {
				t.Fatalf("round %d: probe fired with %v", round, got.Type)
			}
		case <-time.After(wait):
			t.Fatalf("round %d: the probe's watch did not fire after the reconnect", round)
		}
		select {
		case ev, ok := <-wQuiet.Events():
			t.Fatalf("round %d: the watch of an unchanged node fired with %v after the reconnect", round, wQuiet.Event(ev, ok).Type)
		default:
		}
	}
}
