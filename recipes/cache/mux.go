package cache

import (
	"context"
	"reflect"
	"sync"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/internal/zksession"
)

// groupSize is the number of watches one goroutine of a mux waits on.
// go-zookeeper gives every watch a channel of its own, and a goroutine per
// watch costs a stack (about 2.5 KB): a tree of ten thousand nodes holds
// twenty thousand watches. A group waits on up to groupSize channels with
// reflect.Select, whose cost per wake-up grows with the number of cases, so
// the size trades memory against the work of each notification.
const groupSize = 64

// muxEntry is one watch a mux waits on: the shared watch of a node's data
// or children (w), or an exists watch of a skipped node (w nil). rel and
// kind say what to read again when it fires; tn is the node that holds it,
// nil for an exists watch.
type muxEntry struct {
	rel  string
	kind wkind
	tn   *tnode
	w    *zksession.Watch
	ch   <-chan zk.Event
}

// mux waits on many watch channels with few goroutines and calls fire, on
// one of them, once for each entry whose channel fired (or was closed). A
// group ends when its last entry has fired; the rest end with ctx.
type mux struct {
	ctx  context.Context
	wg   *sync.WaitGroup
	fire func(*muxEntry)

	mu     sync.Mutex
	groups []*group // groups with room, in any order
}

type group struct {
	m       *mux
	n       int         // entries waited on or pending (m.mu)
	listed  bool        // in m.groups (m.mu)
	pending []*muxEntry // added, not yet in the select (m.mu)
	wake    chan struct{}
}

// add waits on e's channel. It never blocks.
func (m *mux) add(e *muxEntry) {
	m.mu.Lock()
	var g *group
	for len(m.groups) > 0 {
		g = m.groups[len(m.groups)-1]
		if g.n < groupSize {
			break
		}
		m.groups = m.groups[:len(m.groups)-1] // full: it comes back when one of its entries fires
		g.listed, g = false, nil
	}
	if g == nil {
		g = &group{m: m, listed: true, wake: make(chan struct{}, 1)}
		m.groups = append(m.groups, g)
		m.wg.Add(1) // the caller holds a count of its own, so this never races with Wait
		go func() {
			defer m.wg.Done()
			g.run()
		}()
	}
	g.n++
	g.pending = append(g.pending, e)
	m.mu.Unlock()
	select {
	case g.wake <- struct{}{}:
	default:
	}
}

// run selects on the group's channels until the last has fired or ctx
// ends.
func (g *group) run() {
	m := g.m
	cases := []reflect.SelectCase{
		{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(m.ctx.Done())},
		{Dir: reflect.SelectRecv, Chan: reflect.ValueOf((<-chan struct{})(g.wake))},
	}
	entries := []*muxEntry{nil, nil}
	for {
		i, v, ok := reflect.Select(cases)
		switch i {
		case 0:
			return
		case 1:
			m.mu.Lock()
			for _, e := range g.pending {
				cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(e.ch)})
				entries = append(entries, e)
			}
			g.pending = nil
			m.mu.Unlock()
			continue
		}
		e := entries[i]
		last := len(cases) - 1
		cases[i], entries[i] = cases[last], entries[last]
		cases[last], entries[last] = reflect.SelectCase{}, nil
		cases, entries = cases[:last], entries[:last]
		if e.w != nil {
			var ev zk.Event
			if ok {
				ev = v.Interface().(zk.Event)
			}
			e.w.Event(ev, ok) // settles the shared registration
		}
		m.fire(e)
		m.mu.Lock()
		g.n--
		if g.n == 0 {
			// Nothing left: end, and leave the list so that no add picks
			// this group (add holds m.mu when it does).
			for j, o := range m.groups {
				if o == g {
					m.groups = append(m.groups[:j], m.groups[j+1:]...)
					break
				}
			}
			g.listed = false
			m.mu.Unlock()
			return
		}
		if !g.listed {
			m.groups, g.listed = append(m.groups, g), true // room again
		}
		m.mu.Unlock()
	}
}
