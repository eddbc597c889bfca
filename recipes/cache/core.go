package cache

import (
	"context"
	"errors"
	"sort"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
	"go.uber.org/zap"

	"github.com/zkrecipes/zkrecipes/internal/engine"
	"github.com/zkrecipes/zkrecipes/internal/zksession"
)

// Polling bounds while the cached node (NodeCache) or the parent
// (ChildrenCache) does not exist: the first poll comes after pollMin, each
// further one after twice the previous wait, up to pollMax. The cache sets
// no exists watch: go-zookeeper cannot remove one, so it would stay
// registered after Close until the node appears, as package leader's
// Observe explains.
const (
	pollMin = 50 * time.Millisecond
	pollMax = time.Second
)

// Backoff bounds after a failed read that is not a connection error (a
// connection error is retried inside the session's Retry): an ACL that
// refuses the read, a session replaced during the read.
const (
	failMin = 50 * time.Millisecond
	failMax = 2 * time.Second
)

// core is both caches: one node (kids false, cached under the name "") or
// the children of a node (kids true, cached by name). One goroutine (run)
// reads and applies every change, so the events of a node are pushed in the
// order of its reads, and a read never runs beside another: the order of
// reads on one session is the order of the server's states.
type core struct {
	path string // as given
	full string // server path
	kids bool
	zs   *zksession.Session
	lg   *zap.Logger
	q    *queue

	ctx       context.Context
	cancel    context.CancelFunc
	wg        sync.WaitGroup
	closeOnce sync.Once

	init chan struct{} // closed after the first load

	mu    sync.RWMutex
	nodes map[string]Node // by child name; "" for a NodeCache's node

	// Owned by run.
	watchers map[string]*zksession.Watch // the data watch a goroutine waits on, by name

	dmu   sync.Mutex
	dirty map[string]*zksession.Watch // names whose data watch fired, with the watch
	kick  chan struct{}               // 1-buffered: dirty has entries
}

func newCore(sess any, p string, kids bool, opts []Option) (*core, error) {
	zs, err := zksession.Of(sess)
	if err != nil {
		return nil, engine.NewError("cache", p, err)
	}
	full, err := zs.Path(p)
	if err != nil {
		return nil, engine.NewError("cache", p, err)
	}
	cfg, err := buildConfig(opts)
	if err != nil {
		return nil, engine.NewError("cache", p, err)
	}
	lg := cfg.lg
	if lg == nil {
		lg = zs.Logger().Named("cache")
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &core{
		path:     p,
		full:     full,
		kids:     kids,
		zs:       zs,
		lg:       lg.With(zap.String("path", full)),
		q:        newQueue(cfg.events),
		ctx:      ctx,
		cancel:   cancel,
		init:     make(chan struct{}),
		nodes:    make(map[string]Node),
		watchers: make(map[string]*zksession.Watch),
		dirty:    make(map[string]*zksession.Watch),
		kick:     make(chan struct{}, 1),
	}
	// Subscribed before run starts, so no Reconnected after NewNode or
	// NewChildren returned is missed.
	sub := zs.Subscribe()
	c.wg.Add(2)
	go func() { defer c.wg.Done(); c.q.pump() }()
	go func() { defer c.wg.Done(); c.run(sub) }()
	return c, nil
}

// close implements Close: it stops run and every watcher goroutine and
// waits for them. Requests in flight are abandoned to the session (Retry
// returns at once when ctx ends).
func (c *core) close() error {
	c.closeOnce.Do(func() {
		c.cancel()
		close(c.q.stop)
		c.wg.Wait()
	})
	return nil
}

// loop is run's state between steps.
type loop struct {
	full   bool             // reload everything: first load, new epoch, Reconnected, after an error, a poll
	relist bool             // the parent's children changed (ChildrenCache)
	pw     *zksession.Watch // the parent's child watch (ChildrenCache); nil when absent
}

func (c *core) run(sub *zksession.Subscription[zksession.Event]) {
	defer c.q.finish()
	defer sub.Close()
	var (
		ep    *zksession.Epoch
		st    = loop{full: true}
		first = true
		poll  time.Duration // the next poll while absent; 0 when present
		fail  time.Duration // the next wait after a failure; 0 after a success
	)
	for {
		cur, err := c.zs.WaitConnected(c.ctx)
		if err != nil {
			return // Close, or the session closed
		}
		if cur != ep {
			ep, st.full = cur, true // a new session: its watches are all new
		}
		if err := c.step(ep, &st); err != nil {
			if c.ctx.Err() != nil || errors.Is(err, zksession.ErrClosed) {
				return
			}
			st.full = true
			if errors.Is(err, zksession.ErrLost) {
				continue // wait for the next epoch
			}
			fail = min(max(2*fail, failMin), failMax)
			c.lg.Warn("cache: read failed; reloading", zap.Error(err), zap.Duration("backoff", fail))
			if !c.sleep(fail) {
				return
			}
			continue
		}
		fail = 0
		if first {
			first = false
			c.q.push(Event{Type: Initialized})
			close(c.init)
		}
		var pollC <-chan time.Time
		var pollT *time.Timer
		if c.absent(&st) {
			poll = min(max(2*poll, pollMin), pollMax)
			pollT = time.NewTimer(poll)
			pollC = pollT.C
		} else {
			poll = 0
		}
		var pwC <-chan zk.Event
		if st.pw != nil {
			pwC = st.pw.Events()
		}
	wait:
		for !st.full && !st.relist && !c.hasDirty() {
			select {
			case ev, ok := <-pwC:
				st.pw.Event(ev, ok)
				st.pw, st.relist = nil, true
			case <-c.kick:
			case ev, ok := <-sub.C():
				if !ok || ev.State == zksession.Closed {
					return
				}
				if ev.State == zksession.Reconnected {
					st.full = true // reload: report exactly what changed while away
				}
			case <-pollC:
				st.full = true
				break wait
			case <-c.ctx.Done():
				return
			}
		}
		if pollT != nil {
			pollT.Stop()
		}
	}
}

// absent reports whether what the cache watches was missing at its last
// read: then no watch fires at its creation, and run polls.
func (c *core) absent(st *loop) bool {
	if c.kids {
		return st.pw == nil
	}
	_, ok := c.get("")
	return !ok
}

// sleep waits d; false when the cache is closed first.
func (c *core) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-c.ctx.Done():
		return false
	}
}

// step does what st asks: a full reload, or the re-listing of the
// children and the reads of the nodes whose watch fired.
func (c *core) step(ep *zksession.Epoch, st *loop) error {
	if st.full {
		// Marks made before now are covered by the reload; those made during
		// it are newer than its reads and stay.
		c.forgetFired(c.takeDirty())
		if err := c.reload(ep, st); err != nil {
			return err
		}
		st.full, st.relist = false, false
		return nil
	}
	if st.relist {
		if err := c.relist(ep, st); err != nil {
			return err
		}
		st.relist = false
	}
	dirty := c.takeDirty()
	c.forgetFired(dirty)
	for name := range dirty {
		n, ok, err := c.read(ep, name)
		if err != nil {
			return err
		}
		c.apply(name, n, ok)
	}
	return nil
}

// forgetFired forgets the watches that fired: their goroutines have
// exited.
func (c *core) forgetFired(fired map[string]*zksession.Watch) {
	for name, w := range fired {
		if c.watchers[name] == w {
			delete(c.watchers, name)
		}
	}
}

// reload reads everything again and reports the differences.
func (c *core) reload(ep *zksession.Epoch, st *loop) error {
	names := []string{""}
	if c.kids {
		var err error
		names, st.pw, err = c.list(ep)
		if err != nil {
			return err
		}
	}
	found := make(map[string]Node, len(names))
	for _, name := range names {
		n, ok, err := c.read(ep, name)
		if err != nil {
			return err
		}
		if ok {
			found[name] = n
		}
	}
	c.mu.RLock()
	all := make([]string, 0, len(c.nodes)+len(found))
	for name := range c.nodes {
		if _, ok := found[name]; !ok {
			all = append(all, name)
		}
	}
	c.mu.RUnlock()
	for name := range found {
		all = append(all, name)
	}
	sort.Strings(all)
	for _, name := range all {
		n, ok := found[name]
		c.apply(name, n, ok)
	}
	return nil
}

// relist reads the children again: new ones are read, gone ones removed.
// Children still there are not read: their own watches report their
// changes.
func (c *core) relist(ep *zksession.Epoch, st *loop) error {
	names, pw, err := c.list(ep)
	if err != nil {
		return err
	}
	st.pw = pw
	now := make(map[string]bool, len(names))
	for _, name := range names {
		now[name] = true
	}
	c.mu.RLock()
	var gone []string
	for name := range c.nodes {
		if !now[name] {
			gone = append(gone, name)
		}
	}
	c.mu.RUnlock()
	sort.Strings(gone)
	for _, name := range gone {
		c.apply(name, Node{}, false)
	}
	for _, name := range names {
		c.mu.RLock()
		_, had := c.nodes[name]
		c.mu.RUnlock()
		if had {
			continue
		}
		n, ok, err := c.read(ep, name)
		if err != nil {
			return err
		}
		c.apply(name, n, ok)
	}
	return nil
}

// list reads the children with the session's shared child watch; a
// missing parent gives no names and no watch.
func (c *core) list(ep *zksession.Epoch) ([]string, *zksession.Watch, error) {
	var names []string
	var w *zksession.Watch
	err := c.zs.Retry(c.ctx, ep, func(*zk.Conn) error {
		n, _, ww, err := c.zs.ChildrenW(c.full)
		if err != nil {
			return err
		}
		names, w = n, ww
		return nil
	})
	if errors.Is(err, zk.ErrNoNode) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	sort.Strings(names)
	return names, w, nil
}

// read reads the node name ("" for the NodeCache's node) with the
// session's shared data watch, and starts a goroutine waiting on that watch
// unless one waits on it already. ok is false when the node does not exist.
func (c *core) read(ep *zksession.Epoch, name string) (Node, bool, error) {
	p, up := c.full, c.path
	if name != "" {
		p, up = p+"/"+name, up+"/"+name
	}
	var data []byte
	var stat *zk.Stat
	var w *zksession.Watch
	err := c.zs.Retry(c.ctx, ep, func(*zk.Conn) error {
		d, s, ww, err := c.zs.GetW(p)
		if err != nil {
			return err
		}
		data, stat, w = d, s, ww
		return nil
	})
	if errors.Is(err, zk.ErrNoNode) {
		return Node{}, false, nil
	}
	if err != nil {
		return Node{}, false, err
	}
	c.watch(name, w)
	return Node{Path: up, Data: data, Stat: *stat}, true, nil
}

// watch starts a goroutine that marks name dirty when w fires, unless one
// waits on the same registration already (the session shares one watch per
// node: a read that joined it returns a Watch equal to the first).
func (c *core) watch(name string, w *zksession.Watch) {
	if old := c.watchers[name]; old != nil && *old == *w {
		return
	}
	c.watchers[name] = w
	c.wg.Add(1) // run holds a count of its own, so this never races with Wait
	go func() {
		defer c.wg.Done()
		select {
		case ev, ok := <-w.Events():
			w.Event(ev, ok)
			c.dmu.Lock()
			c.dirty[name] = w
			c.dmu.Unlock()
			select {
			case c.kick <- struct{}{}:
			default:
			}
		case <-c.ctx.Done():
		}
	}()
}

func (c *core) hasDirty() bool {
	c.dmu.Lock()
	defer c.dmu.Unlock()
	return len(c.dirty) > 0
}

func (c *core) takeDirty() map[string]*zksession.Watch {
	c.dmu.Lock()
	defer c.dmu.Unlock()
	d := c.dirty
	c.dirty = make(map[string]*zksession.Watch)
	return d
}

// apply records what a read found for name and pushes the events that
// lead from the cached node to it. Czxid tells incarnations apart (a node
// deleted and created again has a new one, though its version starts at 0
// again) and Mzxid writes; a read older than the cached node is ignored, so
// no event ever goes back in time.
func (c *core) apply(name string, n Node, exists bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	old, had := c.nodes[name]
	switch {
	case !exists:
		if had {
			delete(c.nodes, name)
			c.q.push(Event{Type: Removed, Node: old})
		}
	case !had:
		c.nodes[name] = n
		c.q.push(Event{Type: Added, Node: n})
	case n.Stat.Czxid > old.Stat.Czxid:
		c.nodes[name] = n
		c.q.push(Event{Type: Removed, Node: old})
		c.q.push(Event{Type: Added, Node: n})
	case n.Stat.Czxid == old.Stat.Czxid && n.Stat.Mzxid > old.Stat.Mzxid:
		c.nodes[name] = n
		c.q.push(Event{Type: Updated, Node: n})
	}
}

// get returns the cached node name.
func (c *core) get(name string) (Node, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	n, ok := c.nodes[name]
	return n, ok
}

// list returns the cached children, sorted by name.
func (c *core) listCached() []Node {
	c.mu.RLock()
	out := make([]Node, 0, len(c.nodes))
	for _, n := range c.nodes {
		out = append(out, n)
	}
	c.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}
