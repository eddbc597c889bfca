package cache

import (
	"context"
	"errors"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
	"go.uber.org/zap"

	"github.com/zkrecipes/zkrecipes/internal/engine"
	"github.com/zkrecipes/zkrecipes/internal/eventqueue"
	"github.com/zkrecipes/zkrecipes/internal/zksession"
)

// Polling bounds while the cached node (NodeCache, TreeCache) or the parent
// (ChildrenCache) does not exist: the first poll comes after pollMin, each
// further one after twice the previous wait, up to pollMax. The cache sets
// no exists watch on a missing node: go-zookeeper cannot remove one, so it
// would stay registered after Close until the node appears, as package
// leader's Observe explains.
const (
	pollMin = 50 * time.Millisecond
	pollMax = time.Second
)

// Backoff bounds after a failed read that is not a connection error (a
// connection error is retried inside the session's Retry) nor a refusal (a
// node the cache may not read is skipped): a session replaced during the
// read, an invalid path.
const (
	failMin = 50 * time.Millisecond
	failMax = 2 * time.Second
)

// fetchParallel bounds the reads a load has in flight: go-zookeeper sends
// them in order on the one connection, so a large tree loads at the pace of
// the server rather than of one round trip per read.
const fetchParallel = 64

// shape says what a core caches: the root's data or not, and how deep.
type shape struct {
	rootData bool // NodeCache, TreeCache; a ChildrenCache lists the root only
	maxDepth int  // deepest level cached below the root: 0 the root alone
}

// hasData says whether the nodes at depth are read (their data cached).
func (s shape) hasData(depth int) bool { return depth > 0 || s.rootData }

// wkind is the kind of a watch: data (or exists) or children.
type wkind uint8

const (
	dataKind wkind = iota + 1
	childKind
)

// wkey names a watch that fired: the node (by its path below the root, ""
// for the root) and the kind (an exists watch is of dataKind).
type wkey struct {
	rel  string
	kind wkind
}

// core is every cache: a tree of nodes below a root, of a shape. One
// goroutine (run) reads and applies every change, so the events of a node
// are pushed in the order of its reads. Reads of different nodes of one
// load run in parallel (fetch); a node is never read twice at once, and a
// read older than the copy is ignored.
type core struct {
	path  string // as given
	full  string // server path
	shape shape
	zs    *zksession.Session
	lg    *zap.Logger
	q     *eventqueue.Queue[Event]

	ctx       context.Context
	cancel    context.CancelFunc
	wg        sync.WaitGroup
	closeOnce sync.Once

	init chan struct{} // closed after the first load

	mu      sync.RWMutex
	root    *tnode           // the root's anchor (see tnode)
	rootIn  bool             // the root is in the copy
	skipped map[string]error // by rel: nodes left out because ZooKeeper refused their read

	// Owned by run (held and rootListed written under mu too).
	exists     map[string]struct{} // exists watches of skipped nodes (a refused read sets no watch), by rel, since the last reload
	absent     bool                // the root (or a ChildrenCache's parent) was missing at the last read
	held       int                 // the data and child watches of the nodes in the copy
	rootListed bool                // a ChildrenCache's parent holds a child watch

	sub   *zksession.TreeSub // the node events at and below the root
	dmu   sync.Mutex
	dirty map[wkey]struct{} // watches that fired
	kick  chan struct{}     // 1-buffered: dirty has entries
}

func newCore(sess any, p string, kind string, opts []Option) (*core, error) {
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
	var sh shape
	switch kind {
	case "node":
		sh = shape{rootData: true}
	case "children":
		sh = shape{maxDepth: 1}
	case "tree":
		sh = shape{rootData: true, maxDepth: cfg.maxDepth}
	}
	if cfg.depthSet && kind != "tree" {
		return nil, engine.NewError("cache", p, errMaxDepthTreeOnly)
	}
	lg := cfg.lg
	if lg == nil {
		lg = zs.Logger().Named("cache")
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &core{
		path:    p,
		full:    full,
		shape:   sh,
		zs:      zs,
		lg:      lg.With(zap.String("path", full)),
		q:       eventqueue.New[Event](cfg.events),
		ctx:     ctx,
		cancel:  cancel,
		init:    make(chan struct{}),
		root:    &tnode{path: p},
		skipped: make(map[string]error),
		exists:  make(map[string]struct{}),
		dirty:   make(map[wkey]struct{}),
		kick:    make(chan struct{}, 1),
	}
	// Subscribed before run starts, so no watch's event is missed.
	c.sub = zs.SubscribeTree(full, c)
	c.wg.Add(2)
	go func() { defer c.wg.Done(); c.q.Pump() }()
	go func() { defer c.wg.Done(); c.run() }()
	return c, nil
}

// close implements Close: it stops run and the queue's pump, and waits for
// them. Requests in flight are abandoned to the session (Retry returns at
// once when ctx ends). The watches stay on the server until they fire; their
// events find no subscriber.
func (c *core) close() error {
	c.closeOnce.Do(func() {
		c.cancel()
		c.sub.Cancel()
		c.q.Stop()
		c.wg.Wait()
	})
	return nil
}

func (c *core) run() {
	defer c.q.Finish()
	defer c.sub.Cancel() // also when the session closes: it counts no watch of a cache stopped
	var (
		ep     *zksession.Epoch
		full   = true // reload everything: first load, a transition, after an error, a poll
		first  = true
		poll   time.Duration   // the next poll while absent; 0 when present
		fail   time.Duration   // the next wait after a failure; 0 after a success
		period <-chan struct{} // closed at the session's first transition since the last reload began
	)
	for {
		cur, err := c.zs.WaitConnected(c.ctx)
		if err != nil {
			return // Close, or the session closed
		}
		if cur != ep {
			// A new session: it holds none of the old one's watches.
			ep, full = cur, true
		}
		select {
		case <-period:
			// The connection went down since the last reload (and may be
			// back): the server dropped the watches and their events may
			// be lost. Reload before reading anything the marks ask for.
			full = true
		default:
		}
		if full {
			period = c.zs.Changed()
		}
		err = c.step(ep, &full)
		c.sub.SetWatches(c.watches())
		if err != nil {
			if c.ctx.Err() != nil || errors.Is(err, zksession.ErrClosed) {
				return
			}
			full = true
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
			c.q.Push(Event{Type: Initialized})
			close(c.init)
		}
		var pollC <-chan time.Time
		var pollT *time.Timer
		if c.absent {
			poll = min(max(2*poll, pollMin), pollMax)
			pollT = time.NewTimer(poll)
			pollC = pollT.C
		} else {
			poll = 0
		}
	wait:
		for !full && !c.hasDirty() {
			select {
			case <-c.kick:
			case <-period:
				// Suspended, Reconnected, Lost or Closed: reload once
				// connected, to report exactly what changed while away (and
				// set every watch again), or end.
				full = true
			case <-pollC:
				full = true
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

// TreeEvent implements zksession.TreeEvents, on go-zookeeper's receiving
// goroutine: it marks the node of ev to be read again, for the watches of
// the cache's that ev ended (see the session's tree subscriptions: the
// event may come of another user's watch on the node; a read then finds
// nothing new).
func (c *core) TreeEvent(ev zk.Event) {
	rel := ev.Path[len(c.full):] // the session hands the events at and below full
	d := depth(rel)
	if d > c.shape.maxDepth {
		return
	}
	var data, kids bool
	switch ev.Type {
	case zk.EventNodeDataChanged, zk.EventNodeCreated:
		data = true
	case zk.EventNodeChildrenChanged:
		kids = d < c.shape.maxDepth
	case zk.EventNodeDeleted:
		data, kids = true, d < c.shape.maxDepth
	default:
		return // NotWatching: go-zookeeper's watches of an ended session; the new epoch reloads
	}
	c.dmu.Lock()
	if data {
		c.dirty[wkey{rel, dataKind}] = struct{}{}
	}
	if kids {
		c.dirty[wkey{rel, childKind}] = struct{}{}
	}
	c.dmu.Unlock()
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// watches returns the watches the cache holds: a data watch per node of
// the copy read with its data, a child watch per node listed, an exists
// watch per skipped node. Owned by run.
func (c *core) watches() int {
	n := c.held + len(c.exists)
	if c.rootListed {
		n++
	}
	return n
}

// watchesAt returns the watches a node of the copy at depth d holds.
func (c *core) watchesAt(d int) int {
	n := 0
	if c.shape.hasData(d) {
		n++
	}
	if d < c.shape.maxDepth {
		n++
	}
	return n
}

func (c *core) hasDirty() bool {
	c.dmu.Lock()
	defer c.dmu.Unlock()
	return len(c.dirty) > 0
}

func (c *core) takeDirty() map[wkey]struct{} {
	c.dmu.Lock()
	defer c.dmu.Unlock()
	d := c.dirty
	c.dirty = make(map[wkey]struct{})
	return d
}

// forgetFired forgets the exists watches that fired (an event that ends a
// data watch ends an exists watch on the node too), so that armSkipped sets
// them again, and drops from fired the data events of nodes whose data the
// cache does not read (a ChildrenCache's parent) unless such a watch fired.
func (c *core) forgetFired(fired map[wkey]struct{}) {
	for k := range fired {
		if k.kind != dataKind {
			continue
		}
		if _, ok := c.exists[k.rel]; ok {
			delete(c.exists, k.rel)
		} else if !c.shape.hasData(depth(k.rel)) {
			delete(fired, k)
		}
	}
}

// step does what run asks: a full reload, or the reads of the nodes whose
// watches fired, parents first.
func (c *core) step(ep *zksession.Epoch, full *bool) error {
	if *full {
		// Marks made before now are covered by the reload; those made during
		// it are newer than its reads and stay. The exists watches are set
		// again with the rest: after a reconnect the server holds none of
		// them (nobody lists them in go-zookeeper's SetWatches).
		c.takeDirty()
		c.exists = make(map[string]struct{})
		if err := c.refetch(ep, ""); err != nil {
			return err
		}
		*full = false
		return nil
	}
	dirty := c.takeDirty()
	c.forgetFired(dirty)
	keys := make([]wkey, 0, len(dirty))
	for k := range dirty {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].rel != keys[j].rel {
			return keys[i].rel < keys[j].rel
		}
		return keys[i].kind < keys[j].kind
	})
	done := make(map[string]bool) // subtrees read whole in this step
	for _, k := range keys {
		if covered(done, k.rel) {
			continue
		}
		var err error
		if k.kind == dataKind {
			err = c.reread(ep, k.rel, done)
		} else {
			err = c.relist(ep, k.rel, done)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// covered reports whether rel or one of its ancestors is in done.
func covered(done map[string]bool, rel string) bool {
	if len(done) == 0 {
		return false
	}
	for {
		if done[rel] {
			return true
		}
		if rel == "" {
			return false
		}
		rel = rel[:strings.LastIndexByte(rel, '/')]
	}
}

// readState is what a read found.
type readState uint8

const (
	got     readState = iota + 1
	gone              // zk.ErrNoNode
	refused           // zk.ErrNoAuth: the node is skipped
)

// fetched is a node as a load read it, with its children.
type fetched struct {
	rel    string
	depth  int
	n      Node
	state  readState
	err    error // refused: the refusal, naming the node
	listed bool  // the children were listed (kids)
	pzxid  int64 // listed: the node's Pzxid then (no child listed is newer)
	noList bool  // read the data alone
	kids   []*fetched
}

// read reads the node at rel: its data if its depth is cached with data,
// then its children if it is above the maximum depth, each with a watch
// that only the server holds (its event comes through the cache's tree
// subscription). Any error but a missing node and a refusal is returned.
// The two reads are of one incarnation of the node: the children of a node
// deleted and created again between them are not its (their events would
// be of a node the copy does not hold yet), so the node is read again then.
func (c *core) read(ep *zksession.Epoch, f *fetched) error {
	for {
		again, err := c.readOnce(ep, f)
		if !again {
			return err
		}
	}
}

// readOnce is one try of read: again when the node was replaced between
// its two reads.
func (c *core) readOnce(ep *zksession.Epoch, f *fetched) (again bool, err error) {
	p := c.full + f.rel
	f.state, f.err, f.listed, f.kids = got, nil, false, nil
	if c.shape.hasData(f.depth) {
		var data []byte
		var stat *zk.Stat
		err := c.zs.Retry(c.ctx, ep, func(conn *zk.Conn) error {
			d, s, err := c.zs.GetServerW(conn, p)
			if err != nil {
				return err
			}
			data, stat = d, s
			return nil
		})
		switch {
		case errors.Is(err, zk.ErrNoNode):
			f.state = gone
			return false, nil
		case errors.Is(err, zk.ErrNoAuth):
			f.state, f.err = refused, zksession.Refused("read", p, err)
			return false, nil
		case err != nil:
			return false, err
		}
		f.n = Node{Path: c.path + f.rel, Data: data, Stat: *stat}
	}
	if f.noList || f.depth >= c.shape.maxDepth {
		return false, nil
	}
	var names []string
	var czxid, pzxid int64
	err = c.zs.Retry(c.ctx, ep, func(conn *zk.Conn) error {
		n, st, err := c.zs.ChildrenServerW(conn, p)
		if err != nil {
			return err
		}
		names, czxid, pzxid = n, st.Czxid, st.Pzxid
		return nil
	})
	switch {
	case errors.Is(err, zk.ErrNoNode):
		f.state = gone
		return false, nil
	case errors.Is(err, zk.ErrNoAuth):
		f.state, f.err = refused, zksession.Refused("list", p, err)
		return false, nil
	case err != nil:
		return false, err
	}
	if c.shape.hasData(f.depth) && czxid != f.n.Stat.Czxid {
		return true, nil
	}
	sort.Strings(names)
	f.listed, f.pzxid = true, pzxid
	f.kids = make([]*fetched, len(names))
	for i, name := range names {
		f.kids[i] = &fetched{rel: f.rel + "/" + name, depth: f.depth + 1}
	}
	return false, nil
}

// fetch reads the subtrees at roots (all at one depth), level by level,
// with up to fetchParallel reads in flight.
func (c *core) fetch(ep *zksession.Epoch, roots []*fetched) error {
	level := roots
	for len(level) > 0 {
		if err := c.readAll(ep, level); err != nil {
			return err
		}
		var next []*fetched
		for _, f := range level {
			if f.state == got {
				next = append(next, f.kids...)
			}
		}
		level = next
	}
	return nil
}

// readAll reads every node of fs, in parallel; it returns the first error.
func (c *core) readAll(ep *zksession.Epoch, fs []*fetched) error {
	if len(fs) == 1 {
		return c.read(ep, fs[0])
	}
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		next int
		ferr error
	)
	take := func() *fetched {
		mu.Lock()
		defer mu.Unlock()
		if ferr != nil || next == len(fs) {
			return nil
		}
		next++
		return fs[next-1]
	}
	for i := 0; i < min(fetchParallel, len(fs)); i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for f := take(); f != nil; f = take() {
				if err := c.read(ep, f); err != nil {
					mu.Lock()
					if ferr == nil {
						ferr = err
					}
					mu.Unlock()
					return
				}
			}
		}()
	}
	wg.Wait()
	return ferr
}

// refetch reads the subtree at rel whole and brings the copy to it. rel is
// the root, or a node whose parent is in the copy.
func (c *core) refetch(ep *zksession.Epoch, rel string) error {
	var parent *tnode
	if rel != "" {
		_, parent = c.find(rel)
		if parent == nil {
			return nil // the parent has gone from the copy meanwhile
		}
	}
	f := &fetched{rel: rel, depth: depth(rel)}
	if err := c.fetch(ep, []*fetched{f}); err != nil {
		return err
	}
	if rel != "" {
		prel := rel[:strings.LastIndexByte(rel, '/')]
		ok, err := c.sameParent(ep, prel, parent)
		if err != nil || !ok {
			return err
		}
	}
	c.prune(f)
	skips := make(map[string]error)
	collectSkips(f, skips)
	c.mu.Lock()
	if parent == nil {
		c.merge(c.root, f)
	} else {
		old, _ := parent.child(rel[strings.LastIndexByte(rel, '/')+1:])
		parent.put(old, c.merge(old, f))
	}
	c.replaceSkips(rel, skips)
	c.mu.Unlock()
	return c.armSkipped(ep, skips)
}

// Incarnations. A node read after its parent was deleted and created again
// may be a child of the new parent, of which the copy knows nothing yet:
// put under the old one, it would be removed with it and added again, the
// same incarnation twice. So a node goes into the copy under a parent only
// when the reads prove it a child of the parent's incarnation held: read
// after the parent's listing, its Czxid is at most the listing's Pzxid
// (prune: it was the child listed); read before a listing of the parent,
// the listing is of the parent's Czxid held (sameParent: the parent existed
// from before the node was created until after its read).

// prune drops from the fetched tree f every node created after its
// parent's listing (Czxid above the listing's Pzxid), with its subtree, and
// marks that parent's children to be listed again: the next list reads it,
// or finds the parent replaced.
func (c *core) prune(f *fetched) {
	if !f.listed {
		return
	}
	kids := f.kids[:0]
	for _, k := range f.kids {
		if k.state == got && k.n.Stat.Czxid > f.pzxid {
			c.mark(f.rel, childKind)
			continue
		}
		c.prune(k)
		kids = append(kids, k)
	}
	clear(f.kids[len(kids):])
	f.kids = kids
}

// sameParent lists the node at prel, parent in the copy (the root's anchor
// for ""), after a read of one of its children, and reports whether it is
// still the incarnation held. When not, it marks the node's children to be
// listed again: that list finds it replaced and reads it whole.
func (c *core) sameParent(ep *zksession.Epoch, prel string, parent *tnode) (bool, error) {
	if !c.inCopy(parent) {
		return true, nil // a ChildrenCache's parent: not an incarnation in the copy
	}
	var czxid int64
	err := c.zs.Retry(c.ctx, ep, func(conn *zk.Conn) error {
		_, st, err := c.zs.ChildrenServerW(conn, c.full+prel)
		if err != nil {
			return err
		}
		czxid = st.Czxid
		return nil
	})
	switch {
	case errors.Is(err, zk.ErrNoNode), errors.Is(err, zk.ErrNoAuth):
		c.mark(prel, childKind) // gone or refused: that list says so
		return false, nil
	case err != nil:
		return false, err
	case czxid != parent.st.czxid:
		c.mark(prel, childKind)
		return false, nil
	}
	return true, nil
}

// mark marks the node at rel to be read again (kind) at the next step.
func (c *core) mark(rel string, kind wkind) {
	c.dmu.Lock()
	c.dirty[wkey{rel, kind}] = struct{}{}
	c.dmu.Unlock()
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// depth returns the depth of rel below the root.
func depth(rel string) int { return strings.Count(rel, "/") }

func collectSkips(f *fetched, into map[string]error) {
	if f.state == refused {
		into[f.rel] = f.err
	}
	for _, k := range f.kids {
		collectSkips(k, into)
	}
}

// reread reads the node at rel again after its data (or exists) watch
// fired.
func (c *core) reread(ep *zksession.Epoch, rel string, done map[string]bool) error {
	tn, parent := c.find(rel)
	if rel != "" && parent == nil {
		return nil // its parent has gone from the copy
	}
	c.mu.RLock()
	_, skipped := c.skipped[rel]
	c.mu.RUnlock()
	if tn == nil || !c.inCopy(tn) || skipped {
		if rel != "" && !skipped {
			return nil // not in the copy: its parent's listing says if it is back
		}
		done[rel] = true
		return c.refetch(ep, rel)
	}
	f := &fetched{rel: rel, depth: depth(rel), noList: true}
	if err := c.read(ep, f); err != nil {
		return err
	}
	if f.state == got && f.n.Stat.Czxid > tn.st.czxid {
		// Another incarnation: its children are new too.
		done[rel] = true
		return c.refetch(ep, rel)
	}
	c.mu.Lock()
	switch {
	case f.state != got:
		if rel == "" {
			c.absent = f.state == gone
		}
		c.removeAt(parent, tn)
	case f.n.Stat.Czxid == tn.st.czxid:
		if f.n.Stat.Mzxid > tn.st.mzxid {
			tn.set(&f.n)
			c.q.Push(Event{Type: Updated, Node: f.n})
		}
	}
	var skips map[string]error
	if f.state != got {
		c.clearSkipsUnder(rel)
	}
	if f.state == refused {
		skips = map[string]error{rel: f.err}
		c.replaceSkips(rel, skips)
	}
	c.mu.Unlock()
	return c.armSkipped(ep, skips)
}

// relist lists the children of the node at rel again after its child
// watch fired: children gone are removed, new ones read with their
// subtrees; children still there are not read: their own watches report
// their changes.
func (c *core) relist(ep *zksession.Epoch, rel string, done map[string]bool) error {
	tn, parent := c.find(rel)
	if tn == nil || tn == c.root && !c.anchored() {
		return nil // not in the copy (any more)
	}
	var names []string
	var czxid, pzxid int64
	p := c.full + rel
	err := c.zs.Retry(c.ctx, ep, func(conn *zk.Conn) error {
		n, st, err := c.zs.ChildrenServerW(conn, p)
		if err != nil {
			return err
		}
		names, czxid, pzxid = n, st.Czxid, st.Pzxid
		return nil
	})
	if err == nil && c.inCopy(tn) && czxid != tn.st.czxid {
		// Another incarnation than the copy's (the old one's delete not
		// read yet, its watch's event lost with a connection): its children
		// are not those of the node held. Read it whole.
		done[rel] = true
		return c.refetch(ep, rel)
	}
	if rel == "" {
		c.rootListed = !c.shape.rootData && err == nil
	}
	switch {
	case errors.Is(err, zk.ErrNoNode):
		c.mu.Lock()
		if rel == "" {
			c.absent = true
		}
		c.removeAt(parent, tn)
		c.clearSkipsUnder(rel)
		c.mu.Unlock()
		return nil
	case errors.Is(err, zk.ErrNoAuth):
		c.mu.Lock()
		c.removeAt(parent, tn)
		c.clearSkipsUnder(rel)
		skips := map[string]error{rel: zksession.Refused("list", p, err)}
		c.replaceSkips(rel, skips)
		c.mu.Unlock()
		return c.armSkipped(ep, skips)
	case err != nil:
		return err
	}
	sort.Strings(names)
	c.mu.Lock()
	// The children held and listed, both sorted by name: those gone are
	// removed, in order, the new ones read below, in one pass.
	held := tn.children()
	kept := make([]*tnode, 0, len(held))
	var add []*fetched
	for i, j := 0, 0; i < len(names) || j < len(held); {
		switch {
		case j == len(held) || i < len(names) && names[i] < tn.nameOf(held[j]):
			krel := rel + "/" + names[i]
			if _, skipped := c.skipped[krel]; !skipped { // else its exists watch says when to read it again
				add = append(add, &fetched{rel: krel, depth: depth(krel)})
			}
			i++
		case i == len(names) || names[i] > tn.nameOf(held[j]):
			c.remove(held[j])
			c.clearSkipsUnder(rel + "/" + tn.nameOf(held[j]))
			j++
		default:
			kept = append(kept, held[j])
			i, j = i+1, j+1
		}
	}
	tn.setChildren(kept)
	c.clearSkipsGone(rel, names)
	c.mu.Unlock()
	if len(add) == 0 {
		return nil
	}
	if err := c.fetch(ep, add); err != nil {
		return err
	}
	// The new children were read after the list: prune them as a listed
	// node's (see Incarnations).
	listed := &fetched{rel: rel, listed: true, pzxid: pzxid, kids: add}
	c.prune(listed)
	add = listed.kids
	all := make(map[string]error)
	c.mu.Lock()
	var added []*tnode // sorted by name, as add is
	for _, f := range add {
		done[f.rel] = true
		if k := c.merge(nil, f); k != nil {
			added = append(added, k)
		}
		skips := make(map[string]error)
		collectSkips(f, skips)
		c.replaceSkips(f.rel, skips)
		for r, err := range skips {
			all[r] = err
		}
	}
	tn.setChildren(mergeByName(tn, tn.children(), added))
	c.mu.Unlock()
	return c.armSkipped(ep, all)
}

// replaceSkips makes skips the skipped nodes at and below rel, logging a
// warning for each node newly skipped or skipped for another reason. c.mu
// held: the copy and Skipped change together.
func (c *core) replaceSkips(rel string, skips map[string]error) {
	for r, old := range c.skipped {
		if under(r, rel) {
			if _, still := skips[r]; !still {
				delete(c.skipped, r)
				c.lg.Info("cache: node read again after a refusal", zap.String("node", c.path+r), zap.NamedError("was", old))
			}
		}
	}
	for r, err := range skips {
		old, had := c.skipped[r]
		c.skipped[r] = err
		if !had || old.Error() != err.Error() {
			c.lg.Warn("cache: node left out of the copy: ZooKeeper refuses its read", zap.String("node", c.path+r), zap.Error(err))
		}
	}
}

// clearSkipsUnder forgets the skipped nodes strictly below rel (gone with
// it, or left out with it). c.mu held.
func (c *core) clearSkipsUnder(rel string) {
	for r := range c.skipped {
		if r != rel && under(r, rel) {
			delete(c.skipped, r)
		}
	}
}

// clearSkipsGone forgets the skipped children of rel that are not in now
// (sorted), and their subtrees. c.mu held.
func (c *core) clearSkipsGone(rel string, now []string) {
	for r := range c.skipped {
		if r == rel || !under(r, rel) {
			continue
		}
		name, _, _ := strings.Cut(r[len(rel)+1:], "/")
		if i := sort.SearchStrings(now, name); i == len(now) || now[i] != name {
			delete(c.skipped, r)
		}
	}
}

// under reports whether r is rel or below it.
func under(r, rel string) bool {
	return r == rel || rel == "" || strings.HasPrefix(r, rel) && len(r) > len(rel) && r[len(rel)] == '/'
}

// armSkipped sets an exists watch on each skipped node that has none of
// the cache's since the last reload, so that its next write (an ACL fixed,
// then the data written) or its delete reads it again. ZooKeeper does not
// check exists against the ACL. Like the data and child watches, only the
// server holds it.
func (c *core) armSkipped(ep *zksession.Epoch, skips map[string]error) error {
	rels := make([]string, 0, len(skips))
	for r := range skips {
		if _, ok := c.exists[r]; !ok {
			rels = append(rels, r)
		}
	}
	sort.Strings(rels)
	for _, r := range rels {
		p := c.full + r
		var ok bool
		err := c.zs.Retry(c.ctx, ep, func(conn *zk.Conn) error {
			o, _, err := c.zs.ExistsServerW(conn, p)
			if err != nil {
				return err
			}
			ok = o
			return nil
		})
		if errors.Is(err, zk.ErrNoAuth) {
			continue // not expected (exists is not checked): the next reload reads it again
		}
		if err != nil {
			return err
		}
		c.exists[r] = struct{}{}
		if !ok {
			// Gone meanwhile: nothing to skip. Its exists watch stays (it
			// cannot be removed) and reads it again if it is created.
			c.mu.Lock()
			delete(c.skipped, r)
			c.mu.Unlock()
			if r == "" {
				c.absent = true
			}
		}
	}
	return nil
}

// skips returns the skipped nodes by path (as the cache was given it),
// with their refusals.
func (c *core) skips() map[string]error {
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := make(map[string]error, len(c.skipped))
	for r, err := range c.skipped {
		out[c.path+r] = err
	}
	return out
}

// relOf returns p's path below the root, and false when p is not the root
// nor below it.
func (c *core) relOf(p string) (string, bool) {
	switch {
	case p == c.path:
		return "", true
	case len(p) > len(c.path)+1 && strings.HasPrefix(p, c.path) && p[len(c.path)] == '/':
		return p[len(c.path):], true
	}
	return "", false
}
