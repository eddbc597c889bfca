package engine

// The arm queue: a light lease held nodeWatchDelay gets its own-node watch.
// Rather than a timer and a goroutine per lease (ten thousand leases taken
// in a burst would be ten thousand timers, then as many goroutines at once),
// the leases of one session wait in a queue in the order they were granted,
// which is the order they are due; one goroutine per session, running only
// while the queue is not empty, sets their watches, at most armParallel at
// a time.

import (
	"sync"
	"time"

	"github.com/zkrecipes/zkrecipes/internal/zksession"
)

// armParallel bounds the watch requests one session's queue has in flight.
const armParallel = 32

// armQueue is one session's queue.
type armQueue struct {
	mu      sync.Mutex
	q       []armEntry // due in order; q[head:] waits
	head    int
	running bool // the queue's goroutine runs
	slots   chan struct{}
}

type armEntry struct {
	l   *Lease
	due time.Time
}

// armQueues holds the queue of every session that has one.
var armQueues sync.Map // *zksession.Session -> *armQueue

// queueArm queues l, granted now, to get its watch once held nodeWatchDelay.
func queueArm(zs *zksession.Session, l *Lease) {
	v, ok := armQueues.Load(zs)
	if !ok {
		v, _ = armQueues.LoadOrStore(zs, &armQueue{slots: make(chan struct{}, armParallel)})
	}
	aq := v.(*armQueue)
	aq.mu.Lock()
	aq.q = append(aq.q, armEntry{l, time.Now().Add(nodeWatchDelay)})
	start := !aq.running
	aq.running = true
	aq.mu.Unlock()
	if start {
		go aq.run(zs)
	}
}

// run sets the watches of the leases that are due, and exits when the queue
// is empty. A lease that has ended meanwhile is skipped.
func (aq *armQueue) run(zs *zksession.Session) {
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		aq.mu.Lock()
		if aq.head == len(aq.q) {
			aq.q, aq.head, aq.running = nil, 0, false
			aq.mu.Unlock()
			// An idle session keeps no queue (nor a closed one). A queueArm
			// that loaded this queue before the delete still gets its lease
			// armed: it starts this queue's goroutine again.
			armQueues.CompareAndDelete(zs, aq)
			return
		}
		en := aq.q[aq.head]
		if wait := time.Until(en.due); wait > 0 {
			aq.mu.Unlock()
			if timer == nil {
				timer = time.NewTimer(wait)
			} else {
				timer.Reset(wait)
			}
			<-timer.C
			continue
		}
		aq.q[aq.head] = armEntry{}
		aq.head++
		if aq.head >= 256 && 2*aq.head >= len(aq.q) {
			// Under a steady stream the queue never empties: move what
			// waits to the front, so that the array stays as long as the
			// leases granted within nodeWatchDelay.
			n := copy(aq.q, aq.q[aq.head:])
			clear(aq.q[n:])
			aq.q, aq.head = aq.q[:n], 0
		}
		aq.mu.Unlock()
		l := en.l
		if l.finished.Load() || l.ended() {
			continue
		}
		// A slot first, then the Engine's count: an Engine whose Close is
		// waiting must not wait for other Engines' watch requests to free a
		// slot (under SessionOnly they may wait for the connection).
		aq.slots <- struct{}{}
		if l.finished.Load() || l.ended() || !l.e.enter() {
			<-aq.slots
			continue
		}
		go func() {
			defer func() {
				<-aq.slots
				l.e.wg.Done()
			}()
			l.armLight()
		}()
	}
}
