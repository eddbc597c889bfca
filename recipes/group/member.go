package group

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
	"go.uber.org/zap"

	"github.com/zkrecipes/zkrecipes/internal/engine"
	"github.com/zkrecipes/zkrecipes/internal/keeper"
	"github.com/zkrecipes/zkrecipes/internal/zksession"
	"github.com/zkrecipes/zkrecipes/session"
)

// Member is a member of a group (Curator's GroupMember): once started it
// keeps the node <path>/<id> holding its data (a Node in Ephemeral mode), and
// keeps a view of every member of the group, read from the children of
// path and their data, with a channel of its changes.
//
// A Member is safe for concurrent use.
type Member struct {
	node *Node
	zs   *zksession.Session
	path string // the group path as given
	dir  string // its full server path
	id   string
	lg   *zap.Logger

	mu      sync.Mutex
	state   runState
	loaded  bool              // the view has been read once
	view    map[string][]byte // members as last read, by id
	seen    int64             // the czxid of this member's node as last read (0: not there)
	subs    map[*memberSub]struct{}
	stopped error         // why the member stopped reading the group before Close (its session was closed)
	changed chan struct{} // closed and replaced when loaded, the view changes or stopped is set

	kick *kicker // members' nodes changed (data watch events)

	ctx       context.Context
	cancel    context.CancelFunc
	wg        sync.WaitGroup
	closeOnce sync.Once
}

// memberSub is one Changes channel: it holds the latest view, so a slow
// receiver skips views, never the last one. Guarded by Member.mu.
type memberSub struct {
	c      chan map[string][]byte
	closed bool
	unhook func() bool
}

// kicker records the members' nodes whose data watch fired and wakes the
// view's goroutine (zksession.NodeEvents, called on go-zookeeper's
// goroutine: it never blocks).
type kicker struct {
	c     chan struct{} // capacity 1
	mu    sync.Mutex
	dirty map[string]bool // full server paths
}

func (k *kicker) NodeEvent(ev zk.Event) {
	k.mu.Lock()
	k.dirty[ev.Path] = true
	k.mu.Unlock()
	select {
	case k.c <- struct{}{}:
	default:
	}
}

// take returns the paths recorded since the last take.
func (k *kicker) take() map[string]bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	d := k.dirty
	k.dirty = make(map[string]bool)
	return d
}

// NewMember returns a member with the given id and data of the group at
// path (relative to the session's namespace). The id is the name of its
// node: a non-empty path segment (no '/', not "." or "..", no characters
// ZooKeeper rejects); data is nil (empty) or at most 512 KiB. It validates
// its arguments and does no I/O; Start joins the group. Options: WithLogger.
// Bad input gives an error matching session.ErrBadArgument.
func NewMember(sess *session.Session, path, id string, data []byte, opts ...Option) (*Member, error) {
	m, err := newMember(sess, path, id, data, opts)
	if err != nil {
		return nil, engine.NewError("group", path, err)
	}
	return m, nil
}

func newMember(sess *session.Session, path, id string, data []byte, opts []Option) (*Member, error) {
	zs, err := zksession.Of(sess)
	if err != nil {
		return nil, err
	}
	dir, err := zs.Path(path)
	if err != nil {
		return nil, err
	}
	if id == "" || strings.Contains(id, "/") {
		return nil, fmt.Errorf("%w: member id %q: want a non-empty path segment", session.ErrBadArgument, id)
	}
	if err := zksession.ValidatePath(path + "/" + id); err != nil {
		reason := err.Error()
		var pe *zksession.PathError
		if errors.As(err, &pe) {
			reason = pe.Reason
		}
		return nil, fmt.Errorf("%w: member id %q: %s", session.ErrBadArgument, id, reason)
	}
	node, err := newNode(sess, path+"/"+id, Ephemeral, data, opts)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Member{
		node:    node,
		zs:      zs,
		path:    path,
		dir:     dir,
		id:      id,
		lg:      node.lg.With(zap.String("id", id)),
		subs:    make(map[*memberSub]struct{}),
		changed: make(chan struct{}),
		kick:    &kicker{c: make(chan struct{}, 1), dirty: make(map[string]bool)},
		ctx:     ctx,
		cancel:  cancel,
	}, nil
}

func (m *Member) errf(err error) error { return engine.NewError("group", m.path, err) }

// ID returns the member's id.
func (m *Member) ID() string { return m.id }

// Start joins the group: it starts keeping this member's node and reading
// the group. It does not block. It returns ErrStarted when called twice and
// session.ErrClosed after Close.
func (m *Member) Start() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	switch m.state {
	case started:
		return m.errf(ErrStarted)
	case closed:
		return m.errf(engine.Closed())
	}
	if err := m.node.Start(); err != nil {
		return m.errf(err)
	}
	m.state = started
	m.wg.Add(1)
	go m.watch()
	return nil
}

// Wait blocks until this member's node exists and the group has been read
// with that node in it, at once if both hold: the view (Members) then holds
// every member whose node was there when this one was created and still
// was at the read, as ZooKeeper orders a session's reads after its writes.
// Its errors are Node.Wait's (ErrNotStarted before Start,
// session.ErrClosed after Close, ctx's error, the error that stopped the
// member's node), and session.ErrClosed once the member has seen its
// session closed, even while the group has not been read. Safe to call
// concurrently.
func (m *Member) Wait(ctx context.Context) error {
	if ctx == nil {
		return m.errf(fmt.Errorf("%w: nil context", session.ErrBadArgument))
	}
	for {
		if err := m.node.Wait(ctx); err != nil {
			return m.errf(err)
		}
		czxid, nodeChanged := m.node.placed()
		m.mu.Lock()
		st, stopped, seen, ch := m.state, m.stopped, m.seen, m.changed
		m.mu.Unlock()
		switch {
		case st == closed:
			return m.errf(engine.Closed())
		case stopped != nil:
			return stopped
		case czxid != 0 && seen == czxid:
			return nil
		}
		select {
		case <-ch:
		case <-nodeChanged:
		case <-ctx.Done():
			return m.errf(ctx.Err())
		}
	}
}

// Members returns the group as this member last read it: every member's id
// and data. This member is always in it, with its own data (Data), as in
// Curator's getCurrentMembers, even while its node is being created again.
// Before the first read it holds only this member. It does no I/O; the
// result is the caller's.
func (m *Member) Members() map[string][]byte {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.viewLocked()
}

// viewLocked returns a copy of the view with this member in it. m.mu held.
func (m *Member) viewLocked() map[string][]byte {
	out := make(map[string][]byte, len(m.view)+1)
	for id, d := range m.view {
		out[id] = bytes.Clone(d)
	}
	out[m.id] = m.node.Data()
	return out
}

// Data returns this member's data (see Node.Data).
func (m *Member) Data() []byte { return m.node.Data() }

// SetData replaces this member's data and blocks until its node holds it
// (see Node.SetData, whose errors it returns). The other members see it at
// their next read of the group, which the change itself triggers.
func (m *Member) SetData(ctx context.Context, data []byte) error {
	if err := m.node.SetData(ctx, data); err != nil {
		return m.errf(err)
	}
	return nil
}

// Changes returns a channel of the group's views, as Members returns them:
// first the view once the group has been read (at once if it has been),
// then a new view whenever the group read differs from the last one sent (a
// member joined or left, or changed its data). The channel holds one view,
// the latest: a receiver that falls behind skips views but always gets the
// last. It is closed when ctx ends, at Close, or when the member's session
// is closed. A nil ctx gives a closed channel, and so does a call made after
// Close or once the member has seen its session closed.
func (m *Member) Changes(ctx context.Context) <-chan map[string][]byte {
	sub := &memberSub{c: make(chan map[string][]byte, 1)}
	if ctx == nil {
		close(sub.c)
		return sub.c
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.state == closed || m.stopped != nil {
		close(sub.c)
		return sub.c
	}
	if m.loaded {
		sub.c <- m.viewLocked()
	}
	m.subs[sub] = struct{}{}
	sub.unhook = context.AfterFunc(ctx, func() {
		m.mu.Lock()
		defer m.mu.Unlock()
		delete(m.subs, sub)
		if !sub.closed {
			sub.closed = true
			close(sub.c)
		}
	})
	return sub.c
}

// Close leaves the group: it stops reading it, deletes this member's node
// (Node.Close), closes the Changes channels, and returns after every
// goroutine of the member has exited. Idempotent; returns nil.
func (m *Member) Close() error {
	m.closeOnce.Do(func() {
		m.mu.Lock()
		m.state = closed
		m.mu.Unlock()
		m.cancel()
		m.wg.Wait()
		m.node.Close()
		m.mu.Lock()
		for sub := range m.subs {
			sub.unhook()
			if !sub.closed {
				sub.closed = true
				close(sub.c)
			}
		}
		m.subs = nil
		close(m.changed)
		m.changed = make(chan struct{})
		m.mu.Unlock()
	})
	return nil
}

// publish records the view read, and self, the czxid of this member's node
// as read with it (0: not listed), and hands the view to the subscribers
// when it differs from the last one.
func (m *Member) publish(view map[string][]byte, self int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.state == closed {
		return
	}
	same := m.loaded && maps.EqualFunc(view, m.view, bytes.Equal)
	if same && self == m.seen {
		return
	}
	m.view, m.loaded, m.seen = view, true, self
	close(m.changed) // Wait looks at seen
	m.changed = make(chan struct{})
	if same {
		return
	}
	for sub := range m.subs {
		select {
		case <-sub.c: // drop the view not taken: this one replaces it
		default:
		}
		sub.c <- m.viewLocked()
	}
}

// missingPoll is the first interval (backing off to twice as long) at which
// a Member reads a missing group path again while its own node is not
// created: its creation, which creates the path, wakes it at once.
const missingPoll = 500 * time.Millisecond

// watch reads the group whenever it changes, until Close: the children of
// the group path with a child watch, and each child's data with a data watch
// (watches shared with the session's other users of the same nodes). A
// change of the children, and a new session, make it read the whole group
// again; a data change, only the member whose data changed. While the group
// path does not exist, it reads again as soon as this member's node has
// changed (its creation creates the path), else after missingPoll.
func (m *Member) watch() {
	defer m.wg.Done()
	subs := make(map[string]*zksession.NodeSub)
	defer func() {
		for k, s := range subs {
			m.zs.CancelNode(s, m.dir+"/"+k)
		}
	}()
	bo := keeper.NewBackOff(50*time.Millisecond, time.Second) // after a failed read
	missing := keeper.NewBackOff(missingPoll, 2*missingPoll)  // while the group path is missing
	var view map[string][]byte                                // as last read
	var self int64                                            // this member's czxid as last read
	var cw *zksession.Watch                                   // the child watch of that read
	for m.ctx.Err() == nil {
		ep, err := m.zs.WaitConnected(m.ctx)
		if err != nil {
			if m.ctx.Err() == nil {
				m.closeSubs(err) // the session was closed
			}
			return
		}
		// Taken before the read: a create of our node during it wakes the
		// wait for a missing path below.
		_, nodeChanged := m.node.placed()
		if cw == nil {
			m.kick.take() // a full read reads every member
			view, self, cw, err = m.read(ep, subs)
		} else {
			view, self, err = m.reread(ep, subs, view, self, m.kick.take())
		}
		if err == nil {
			bo.Reset()
			missing.Reset()
			m.publish(view, self)
			select {
			case ev, ok := <-cw.Events():
				cw.Event(ev, ok)
				cw = nil
			case <-m.kick.c:
			case <-ep.Lost():
				cw = nil
			case <-m.ctx.Done():
				return
			}
			continue
		}
		cw = nil
		if m.ctx.Err() != nil {
			return
		}
		var wake <-chan struct{} // nil: only the timer
		var d time.Duration
		if errors.Is(err, zk.ErrNoNode) {
			// No group yet (or its container was reaped): nobody is in it,
			// this member included. Its Node is creating its node, and so the
			// path: read again once it has, rather than leave an
			// exists-watch on the server. The poll is for a path that
			// appears while the Node cannot create (a refusal, an error it
			// backs off from).
			m.publish(map[string][]byte{}, 0)
			self = 0
			wake, d = nodeChanged, missing.NextBackOff()
		} else if ep.Err() != nil {
			continue
		} else {
			m.lg.Debug("reading the group failed; trying again", zap.Error(err))
			d = bo.NextBackOff()
		}
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-wake:
			t.Stop()
		case <-m.ctx.Done():
			t.Stop()
			return
		}
	}
}

// reread reads again, with a data watch, the members among dirty (full
// server paths) and returns the view and self (this member's czxid, as
// read) updated (a new map: view is left as it is). A member found gone
// leaves the view: the child watch fires for it too.
func (m *Member) reread(ep *zksession.Epoch, subs map[string]*zksession.NodeSub, view map[string][]byte, self int64, dirty map[string]bool) (map[string][]byte, int64, error) {
	out := maps.Clone(view)
	for p := range dirty {
		k := strings.TrimPrefix(p, m.dir+"/")
		if _, ok := out[k]; !ok || k == p {
			continue // not a member as last listed: the next full read decides
		}
		data, czxid, err := m.readMember(ep, subs, k)
		if errors.Is(err, zk.ErrNoNode) {
			delete(out, k)
			if k == m.id {
				self = 0
			}
			continue
		}
		if err != nil {
			return nil, 0, err
		}
		out[k] = data
		if k == m.id {
			self = czxid
		}
	}
	return out, self, nil
}

// readMember subscribes to the data events of member k's node, then reads
// it with a data watch: its data and czxid. Unsubscribed when the node is
// missing.
func (m *Member) readMember(ep *zksession.Epoch, subs map[string]*zksession.NodeSub, k string) ([]byte, int64, error) {
	p := m.dir + "/" + k
	s := subs[k]
	if s == nil {
		s = new(zksession.NodeSub)
		subs[k] = s
	}
	m.zs.SubscribeNode(s, p, m.kick)
	var data []byte
	var czxid int64
	err := m.zs.Retry(m.ctx, ep, func(*zk.Conn) error {
		d, st, _, err := m.zs.GetW(p)
		if err == nil {
			data, czxid = d, st.Czxid
		}
		return err
	})
	if err != nil {
		// data is not read: a try abandoned when ctx ended may still write it.
		if errors.Is(err, zk.ErrNoNode) {
			m.zs.CancelNode(s, p)
			delete(subs, k)
		}
		return nil, 0, err
	}
	return data, czxid, nil
}

// read lists the group with a child watch and reads every member's data
// with a data watch, subscribing subs to their events first. It returns
// the view, this member's czxid as read (0: not listed) and the child watch.
func (m *Member) read(ep *zksession.Epoch, subs map[string]*zksession.NodeSub) (map[string][]byte, int64, *zksession.Watch, error) {
	var kids []string
	var cw *zksession.Watch
	err := m.zs.Retry(m.ctx, ep, func(*zk.Conn) error {
		k, _, w, err := m.zs.ChildrenW(m.dir)
		if err == nil {
			kids, cw = k, w
		}
		return err
	})
	if err != nil {
		return nil, 0, nil, err
	}
	view := make(map[string][]byte, len(kids))
	var self int64
	for _, k := range kids {
		data, czxid, err := m.readMember(ep, subs, k)
		if errors.Is(err, zk.ErrNoNode) {
			continue // gone since the listing: the child watch fires
		}
		if err != nil {
			return nil, 0, nil, err
		}
		view[k] = data
		if k == m.id {
			self = czxid
		}
	}
	for k, s := range subs {
		if _, ok := view[k]; !ok {
			m.zs.CancelNode(s, m.dir+"/"+k)
			delete(subs, k)
		}
	}
	return view, self, cw, nil
}

// closeSubs records why the member stopped (its session was closed),
// closes the Changes channels and wakes the calls in Wait.
func (m *Member) closeSubs(err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.stopped = m.errf(err)
	close(m.changed)
	m.changed = make(chan struct{})
	for sub := range m.subs {
		sub.unhook()
		if !sub.closed {
			sub.closed = true
			close(sub.c)
		}
	}
	clear(m.subs)
}
