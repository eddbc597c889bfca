package zksession

import (
	"context"
	"sync"

	"github.com/go-zookeeper/zk"
)

// Node subscriptions: callbacks on the data-watch events of a node, without a
// goroutine per watched node. go-zookeeper delivers every watch on a channel
// of its own, so waiting on ten thousand watches (a service holding ten
// thousand per-key locks) would take ten thousand goroutines. But it also
// passes every node event to the session's event callback (onEvent) before it
// fills those channels, on its receiving goroutine and in the order the
// server sent them. A NodeSub registered before its GetW is sent therefore
// sees every event on the node from then on, whatever watch on this session
// caused it: the event of its own watch included, possibly others' too (a
// waiter's watch on the same node). A subscriber treats an event as news
// about the node, never as proof of which watch fired.

// NodeEvents is what a NodeSub calls. NodeEvent runs on go-zookeeper's
// receiving goroutine: it must not block or send requests; it may cancel
// contexts and start goroutines.
type NodeEvents interface {
	NodeEvent(ev zk.Event)
}

// NodeSub is a one-shot subscription to the events of one node: the first
// data event (NodeDataChanged, NodeDeleted) or NotWatching on its path
// unsubscribes it and calls its target. The zero value is ready for
// SubscribeNode; embed it to spare an allocation (it does not keep its path:
// CancelNode takes it again).
type NodeSub struct {
	target     NodeEvents // nil when not subscribed
	prev, next *NodeSub
	// serverOnly: subscribed by WatchNode for a server-only watch, which the
	// Session sets again after a reconnect (see rearmBook).
	serverOnly bool
}

// nodeSubs is the Session's table of subscriptions: per path, a list.
type nodeSubs struct {
	mu sync.Mutex
	m  map[string]*NodeSub
	n  int // subscriptions in the table
}

// SubscribeNode subscribes n to the next data event on path p for target
// (if n is subscribed already, to p, it is subscribed anew). Subscribe
// before sending the request that sets the watch. CancelNode unsubscribes.
func (s *Session) SubscribeNode(n *NodeSub, p string, target NodeEvents) {
	s.subscribeNodeLive(nil, n, p, target, false)
}

// subscribeNodeLive is SubscribeNode unless ctx (if not nil) has ended: it
// reports whether it subscribed. The check is made under the table's lock,
// so a caller that ends ctx and then calls CancelNode leaves nothing
// subscribed, whatever a request left behind does meanwhile. serverOnly
// marks a subscription whose watch is server-only (WatchNode).
func (s *Session) subscribeNodeLive(ctx context.Context, n *NodeSub, p string, target NodeEvents, serverOnly bool) bool {
	t := &s.nodeSubs
	t.mu.Lock()
	defer t.mu.Unlock()
	if ctx != nil && ctx.Err() != nil {
		return false
	}
	if t.m == nil {
		t.m = make(map[string]*NodeSub)
	}
	t.unlinkLocked(n, p)
	n.target, n.serverOnly = target, serverOnly
	n.next = t.m[p]
	if n.next != nil {
		n.next.prev = n
	}
	t.m[p] = n
	t.n++
	return true
}

// CancelNode unsubscribes n from path p, if it is still subscribed; it
// reports whether it was (false: its event was dispatched, or it never was
// subscribed).
func (s *Session) CancelNode(n *NodeSub, p string) bool {
	t := &s.nodeSubs
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.unlinkLocked(n, p)
}

// unlinkLocked removes n, subscribed to p, from the table, if it is in it.
// t.mu held.
func (t *nodeSubs) unlinkLocked(n *NodeSub, p string) bool {
	if n.target == nil {
		return false
	}
	if n.prev != nil {
		n.prev.next = n.next
	} else if n.next != nil {
		t.m[p] = n.next
	} else {
		delete(t.m, p)
	}
	if n.next != nil {
		n.next.prev = n.prev
	}
	n.target, n.prev, n.next, n.serverOnly = nil, nil, nil, false
	t.n--
	return true
}

// NodeSubs returns the number of node subscriptions waiting for an event.
func (s *Session) NodeSubs() int {
	t := &s.nodeSubs
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.n
}

// dispatchNode hands a node event to the subscriptions on its path. It runs
// on go-zookeeper's receiving goroutine (onEvent).
func (s *Session) dispatchNode(ev zk.Event) {
	switch ev.Type {
	case zk.EventNodeDataChanged, zk.EventNodeDeleted, zk.EventNotWatching:
	default:
		return // NodeCreated (exists-watches) and NodeChildrenChanged: not a data watch's
	}
	t := &s.nodeSubs
	t.mu.Lock()
	head := t.m[ev.Path]
	if head == nil {
		t.mu.Unlock()
		return
	}
	delete(t.m, ev.Path)
	var fire []NodeEvents
	for n := head; n != nil; {
		next := n.next
		fire = append(fire, n.target)
		n.target, n.prev, n.next, n.serverOnly = nil, nil, nil, false
		t.n--
		n = next
	}
	t.mu.Unlock()
	for _, target := range fire {
		target.NodeEvent(ev)
	}
}

// WatchNode sets a data watch on p whose events go to the subscription n
// (see SubscribeNode), which it subscribes first; it retries connection
// errors on ep as Retry does, within ctx. It returns zk.ErrNoNode if p does
// not exist. On an error n is unsubscribed again, unless its event was
// dispatched already (then the target has seen it, or sees it shortly) or
// ctx has ended (then the caller unsubscribes it if it wants no events). A
// try left behind when ctx ends subscribes n again only if it does so
// before ctx ends: a caller that ends ctx and then calls CancelNode leaves
// nothing subscribed. Under the standard loss policy the watch is one that
// go-zookeeper does not know of (see serverOnlyBook): it costs no memory
// here, and go-zookeeper does not set it again after a reconnect; the
// Session does, while n stays subscribed, and dispatches NodeDeleted to n if
// the node went meanwhile, or was replaced by one that ep's session does not
// own (see rearmBook): p must be an ephemeral node of ep's session, as a
// lease's node is. Under SessionOnly it is
// go-zookeeper's GetW, re-set after a reconnect; its channel is not read (it
// is buffered, filled once and dropped by go-zookeeper).
func (s *Session) WatchNode(ctx context.Context, ep *Epoch, n *NodeSub, p string, target NodeEvents) error {
	serverOnly := s.cfg.policy != SessionOnly
	err := s.Retry(ctx, ep, func(c *zk.Conn) error {
		// Subscribed anew for every try (an event dispatched during a failed
		// try unsubscribed it), unless ctx has ended: a try left behind
		// then subscribes nothing.
		if !s.subscribeNodeLive(ctx, n, p, target, serverOnly) {
			return ctx.Err()
		}
		if !serverOnly {
			_, _, _, err := c.GetW(p)
			return err
		}
		s.wire.addServerOnly(p)
		defer s.wire.removeServerOnly(p)
		_, _, err := c.Get(p)
		return err
	})
	if err != nil && ctx.Err() == nil {
		// Not when ctx ended: the caller decides then (another WatchNode of
		// its may own the subscription by now).
		s.CancelNode(n, p)
	}
	return err
}

// Lease-end hooks: a lease derived from a lease context (WaitLease) ends with
// it synchronously, as a child context; what the holder's engine must do
// then (delete the node) needs a goroutine. Rather than one callback per
// lease (context.AfterFunc costs a registration and a context each), the
// session keeps, per lease context, a list of hooks and one callback that
// runs them all.

// LeaseEnds is what an EndHook calls, on a goroutine of the session's, once
// its lease context has ended. It must not block for long: the hooks of one
// lease context run one after the other.
type LeaseEnds interface {
	LeaseContextEnded()
}

// EndHook is a registration with OnLeaseEnd. The zero value is ready; embed
// it to spare an allocation.
type EndHook struct {
	list       *endList
	target     LeaseEnds
	prev, next *EndHook
}

// endList is the hooks of one lease context.
type endList struct {
	head *EndHook
}

// endHooks is the Session's table of hook lists, by lease context.
type endHooks struct {
	mu sync.Mutex
	m  map[context.Context]*endList
}

// OnLeaseEnd registers h (not registered) to call target once lctx, a lease
// context the session handed out, has ended. If lctx has ended already,
// target is called at once on the caller's goroutine. CancelLeaseEnd
// unregisters.
func (s *Session) OnLeaseEnd(lctx context.Context, h *EndHook, target LeaseEnds) {
	t := &s.endHooks
	t.mu.Lock()
	if t.m == nil {
		t.m = make(map[context.Context]*endList)
	}
	l := t.m[lctx]
	if l == nil {
		if lctx.Err() != nil {
			t.mu.Unlock()
			target.LeaseContextEnded()
			return
		}
		l = &endList{}
		t.m[lctx] = l
		// The state goroutine is counted until Close has ended every lease
		// context, so this Add never races with Close's Wait.
		s.wg.Add(1)
		context.AfterFunc(lctx, func() {
			defer s.wg.Done()
			s.runEndHooks(lctx, l)
		})
	}
	h.list, h.target, h.prev = l, target, nil
	h.next = l.head
	if h.next != nil {
		h.next.prev = h
	}
	l.head = h
	t.mu.Unlock()
}

// runEndHooks runs and forgets the hooks of the ended lease context lctx.
func (s *Session) runEndHooks(lctx context.Context, l *endList) {
	t := &s.endHooks
	t.mu.Lock()
	delete(t.m, lctx)
	var run []LeaseEnds
	for h := l.head; h != nil; {
		next := h.next
		run = append(run, h.target)
		h.list, h.prev, h.next = nil, nil, nil
		h = next
	}
	l.head = nil
	t.mu.Unlock()
	for _, target := range run {
		target.LeaseContextEnded()
	}
}

// CancelLeaseEnd unregisters h; it reports whether h was registered (false:
// its hook has run or is about to).
func (s *Session) CancelLeaseEnd(h *EndHook) bool {
	t := &s.endHooks
	t.mu.Lock()
	defer t.mu.Unlock()
	l := h.list
	if l == nil {
		return false
	}
	if h.prev != nil {
		h.prev.next = h.next
	} else {
		l.head = h.next
	}
	if h.next != nil {
		h.next.prev = h.prev
	}
	h.list, h.prev, h.next = nil, nil, nil
	return true
}
