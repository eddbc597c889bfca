package leader

import (
	"context"
	"fmt"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/zkrecipes/zkrecipes/internal/engine"
	"github.com/zkrecipes/zkrecipes/recipes"
	"github.com/zkrecipes/zkrecipes/session"
)

type runState int

const (
	latent runState = iota
	started
	closed
)

// Latch is a participant in a leader election with Curator's LeaderLatch
// layout: once started it keeps a node under the election path until Close,
// and leads whenever its node is the first one. Each stretch of leadership is
// a *Term with its own Done, Err and Context.
//
// After a term ends because the connection was down at its deadline (standard
// policy), went down (end-at-disconnect) or
// the session was lost, the latch deletes its node when the connection is back
// (if the session survived) and enters the election again at the back, as
// Curator's LeaderLatch does; another participant can lead meanwhile. Resign
// does the same on demand: it ends the current term, deletes the node and
// enters the election again at the back.
//
// A Latch is safe for concurrent use.
type Latch struct {
	e *elector

	mu      sync.Mutex
	state   runState
	term    *Term         // current term, possibly just ended; nil between terms
	err     error         // why the election loop stopped before Close (session closed, permanent error)
	changed chan struct{} // closed and replaced at every change
	subs    map[*latchSub]struct{}
	subWG   sync.WaitGroup
	force   chan struct{} // closed when Close stops waiting for slow subscribers

	ctx       context.Context
	cancel    context.CancelCauseFunc
	wg        sync.WaitGroup
	closeOnce sync.Once
	closeErr  error
}

// changesBuffer is the capacity of a Changes channel. Events beyond it
// wait in an unbounded overflow queue that a goroutine hands over in order.
const changesBuffer = 64

// subscriberGrace is how long Close lets a subscriber with an overflow take
// its remaining events before it closes the channel without them.
const subscriberGrace = 200 * time.Millisecond

// latchSub is one Changes channel. Its fields are guarded by Latch.mu.
type latchSub struct {
	c        chan Event
	overflow []Event // events that did not fit in c, oldest first
	pumping  bool    // a goroutine is handing the overflow over
	final    bool    // no more events: close c once the overflow is delivered
	closed   bool    // c is closed
	stop     chan struct{}
	stopped  bool // stop is closed (the subscriber's ctx ended)
	unhook   func() bool
}

// Event is a change of a Latch's leadership as delivered by Changes.
type Event struct {
	// Leader is true when Term began, false when it ended (or, for the first
	// event of a channel, when the latch was not leading).
	Leader bool
	// Term is the term that began or ended; nil in a first event that reports
	// no leadership.
	Term *Term
	// At is the local time of the change: for the start of a term its
	// Started time, for the end the moment the latch saw the term's Done.
	At time.Time
}

// NewLatch returns a latch for the election at path (a path relative to the
// session's namespace). It validates its arguments and does no I/O; call
// Start to enter the election. Options: WithID, WithLogger. WithRequeue is
// rejected: a latch always stays in the election until Close.
func NewLatch(sess *session.Session, path string, opts ...Option) (*Latch, error) {
	cfg, err := buildConfig(opts)
	if err != nil {
		return nil, engine.NewError("leader", path, err)
	}
	if cfg.requeueSet {
		return nil, engine.NewError("leader", path, fmt.Errorf("%w: WithRequeue does not apply to a Latch", session.ErrBadArgument))
	}
	e, err := newElector(sess, path, latchMarker, cfg)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	return &Latch{
		e:       e,
		changed: make(chan struct{}),
		subs:    make(map[*latchSub]struct{}),
		force:   make(chan struct{}),
		ctx:     ctx,
		cancel:  cancel,
	}, nil
}

// Start enters the election: it starts a goroutine that creates this
// participant's node and keeps campaigning until Close. It does not block.
// It returns ErrStarted when called twice and session.ErrClosed after Close.
func (l *Latch) Start() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch l.state {
	case started:
		return l.e.errf(ErrStarted)
	case closed:
		return l.e.errf(engine.Closed())
	}
	l.state = started
	l.wg.Add(1)
	go l.run()
	return nil
}

func (l *Latch) run() {
	defer l.wg.Done()
	for {
		lease, err := l.e.campaign(l.ctx)
		if err != nil {
			if l.ctx.Err() == nil {
				// The session was closed under us, or ZooKeeper refuses the
				// election for good (zk.ErrNoAuth, ...): no term will follow.
				l.mu.Lock()
				l.err = err
				for sub := range l.subs {
					sub.unhook()
					l.finishLocked(sub)
				}
				clear(l.subs)
				l.broadcastLocked()
				l.mu.Unlock()
				l.e.lg.Info("election stopped", zap.Error(err))
			}
			return
		}
		t := newTerm(lease, l.e.errf(recipes.ErrReleased))
		l.e.lg.Info("leadership gained", zap.String("node", t.Node()), zap.Int64("token", t.Token()))
		l.mu.Lock()
		l.term = t
		l.publishLocked(Event{Leader: true, Term: t, At: t.started})
		l.mu.Unlock()

		select {
		case <-t.Done():
		case <-l.ctx.Done():
			t.end(l.e.errf(engine.Closed()))
		}
		l.mu.Lock()
		l.term = nil
		l.publishLocked(Event{Leader: false, Term: t, At: time.Now()})
		l.mu.Unlock()
		l.e.lg.Info("leadership ended", zap.String("node", t.Node()), zap.Error(t.Err()))
		// Our node goes only now, after Done has closed: nobody else can lead
		// before this participant has been told it no longer does.
		l.e.release(context.Background(), lease)
		t.markReleased()
		if l.ctx.Err() != nil {
			return
		}
	}
}

// broadcastLocked wakes Await callers. l.mu must be held.
func (l *Latch) broadcastLocked() {
	close(l.changed)
	l.changed = make(chan struct{})
}

// publishLocked queues ev for every subscriber (never blocking) and wakes
// Await callers. l.mu must be held.
func (l *Latch) publishLocked(ev Event) {
	for sub := range l.subs {
		l.pushLocked(sub, ev)
	}
	l.broadcastLocked()
}

// pushLocked hands ev to sub: straight into its channel's buffer when there
// is room and no overflow, else to the overflow and its goroutine. l.mu must
// be held.
func (l *Latch) pushLocked(sub *latchSub, ev Event) {
	if sub.final || sub.closed {
		return
	}
	if !sub.pumping {
		select {
		case sub.c <- ev:
			return
		default:
		}
		sub.pumping = true
		l.subWG.Add(1)
		go l.pump(sub)
	}
	sub.overflow = append(sub.overflow, ev)
}

// finishLocked ends sub's stream: its channel is closed now, or by its
// goroutine once the overflow is delivered. l.mu must be held.
func (l *Latch) finishLocked(sub *latchSub) {
	sub.final = true
	if !sub.pumping && !sub.closed {
		sub.closed = true
		close(sub.c) // buffered events stay readable
	}
}

// pump hands sub's overflow over in order, then exits.
func (l *Latch) pump(sub *latchSub) {
	defer l.subWG.Done()
	for {
		l.mu.Lock()
		if len(sub.overflow) == 0 {
			sub.pumping = false
			if sub.final && !sub.closed {
				sub.closed = true
				close(sub.c)
			}
			l.mu.Unlock()
			return
		}
		ev := sub.overflow[0]
		sub.overflow[0] = Event{}
		sub.overflow = sub.overflow[1:]
		l.mu.Unlock()
		select {
		case sub.c <- ev:
			continue
		case <-sub.stop:
		case <-l.force:
		}
		l.mu.Lock()
		sub.overflow, sub.pumping = nil, false
		if !sub.closed {
			sub.closed = true
			close(sub.c)
		}
		l.mu.Unlock()
		return
	}
}

// Await blocks until this latch leads and returns the current term, at once
// if it leads already. It returns an error matching ctx's when ctx ends first,
// ErrNotStarted before Start, session.ErrClosed after Close, and the error that
// stopped the election (see Err): one matching session.ErrClosed if the
// session was closed, or a permanent ZooKeeper error such as zk.ErrNoAuth.
// The term may end at any moment after Await returns: watch its Done. A nil
// ctx gives session.ErrBadArgument. Safe to call concurrently.
func (l *Latch) Await(ctx context.Context) (*Term, error) {
	if ctx == nil {
		return nil, l.e.errf(errNilContext)
	}
	for {
		l.mu.Lock()
		switch {
		case l.state == latent:
			l.mu.Unlock()
			return nil, l.e.errf(ErrNotStarted)
		case l.state == closed:
			l.mu.Unlock()
			return nil, l.e.errf(engine.Closed())
		case l.err != nil:
			err := l.err
			l.mu.Unlock()
			return nil, err
		}
		if t := l.term; t != nil && t.Err() == nil {
			l.mu.Unlock()
			return t, nil
		}
		ch := l.changed
		l.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, l.e.errf(ctx.Err())
		}
	}
}

// Err returns nil while the latch has not been started or is in the
// election, and afterwards why it left: session.ErrClosed after Close, or the error
// that stopped its election before Close. The election stops only for errors
// that entering it again cannot cure: the session was closed (an error
// matching session.ErrClosed), or ZooKeeper refuses this participant for good
// (an error matching zk.ErrNoAuth or zk.ErrAuthFailed when the election
// path's ACL does not admit the session's credentials, zk.ErrInvalidACL,
// zk.ErrBadArguments, zk.ErrNoChildrenForEphemerals, ...). Every other
// failure (a disconnect, a lost session, a transient error) makes the latch
// enter the election again. Once the election has stopped, Await returns
// this error, Changes channels are closed and no term follows; Close is still
// needed to release the latch. It does no I/O.
func (l *Latch) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.err != nil:
		return l.err
	case l.state == closed:
		return l.e.errf(engine.Closed())
	}
	return nil
}

// Term returns the current term, or nil when this latch does not lead. It
// does no I/O.
func (l *Latch) Term() *Term {
	l.mu.Lock()
	t := l.term
	l.mu.Unlock()
	if t == nil || t.Err() != nil {
		return nil
	}
	return t
}

// IsLeader reports whether this latch leads now (Curator's hasLeadership):
// its node is the first of the election, belongs to the current session, and
// the term has not ended. It does no I/O.
func (l *Latch) IsLeader() bool { return l.Term() != nil }

// Resign gives up the current term without closing the latch, as etcd's
// Resign: the term ends with a cause matching recipes.ErrReleased (its Done closes,
// Changes reports it), this participant's node is deleted, so another
// participant can lead, and the latch enters the election again at the back
// at once (alone in the election, it leads again with a new term). Resign
// returns once the node is deleted (or its deletion queued, when the
// connection is down), or with an error matching ctx's when ctx ends first
// (the term has ended all the same, and the node goes soon after). It returns
// nil at once when the latch does not lead, session.ErrClosed after Close and
// session.ErrBadArgument for a nil ctx.
func (l *Latch) Resign(ctx context.Context) error {
	if ctx == nil {
		return l.e.errf(errNilContext)
	}
	l.mu.Lock()
	closed, t := l.state == closed, l.term
	l.mu.Unlock()
	if closed {
		return l.e.errf(engine.Closed())
	}
	if t == nil || t.Err() != nil {
		return nil
	}
	t.Resign()
	select {
	case <-t.released:
		return nil
	case <-ctx.Done():
		return l.e.errf(ctx.Err())
	}
}

// Changes returns a channel of leadership changes: first the state at the
// moment of the call (Leader true with the current term, or false with a nil
// Term), then an Event each time a term begins or ends, every one of them, in
// order. The channel is buffered and backed by an unbounded queue, so a slow
// receiver neither stalls the latch nor loses events. It is closed when ctx
// ends, at Close after the end of the last term, and when the election stops
// on an error (see Err); events still buffered stay readable, but Close waits
// only briefly for a receiver that has fallen more than the buffer behind.
// To stop leading work at once, watch the term's Done rather than this
// channel. Given a nil ctx it logs an error and returns a closed channel
// without events.
func (l *Latch) Changes(ctx context.Context) <-chan Event {
	if ctx == nil {
		l.e.lg.Error("Changes called with a nil context: returning a closed channel")
		c := make(chan Event)
		close(c)
		return c
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	ev := Event{At: time.Now()}
	if t := l.term; t != nil && t.Err() == nil {
		ev.Leader, ev.Term = true, t
	}
	sub := &latchSub{c: make(chan Event, changesBuffer), stop: make(chan struct{})}
	sub.c <- ev
	if l.state == closed || l.err != nil {
		l.finishLocked(sub)
		return sub.c
	}
	l.subs[sub] = struct{}{}
	sub.unhook = context.AfterFunc(ctx, func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		delete(l.subs, sub)
		if !sub.stopped {
			sub.stopped = true
			close(sub.stop)
		}
		l.finishLocked(sub)
	})
	return sub.c
}

// Close leaves the election: a live term ends at once (its Done closes with
// session.ErrClosed), then this participant's node is deleted so another participant
// can lead, and Close returns after every goroutine of the latch has exited.
// Channels from Changes are closed. Close is idempotent; later calls return
// the first call's result.
func (l *Latch) Close() error {
	l.closeOnce.Do(func() {
		l.mu.Lock()
		l.state = closed
		l.mu.Unlock()
		l.cancel(session.ErrClosed)
		l.wg.Wait()
		if err := l.e.in.Close(); err != nil {
			l.closeErr = l.e.errf(err)
		}
		l.mu.Lock()
		for sub := range l.subs {
			sub.unhook()
			l.finishLocked(sub)
		}
		l.subs = nil
		l.broadcastLocked()
		l.mu.Unlock()
		// Give receivers that have fallen behind by more than the buffer a
		// moment to take the rest, then close their channels regardless.
		idle := make(chan struct{})
		go func() { l.subWG.Wait(); close(idle) }()
		grace := time.NewTimer(subscriberGrace)
		select {
		case <-idle:
		case <-grace.C:
			close(l.force)
			<-idle
		}
		grace.Stop()
	})
	return l.closeErr
}
