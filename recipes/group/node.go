package group

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path"
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

// Mode says how a Node names its znode. Every mode is ephemeral: the node
// goes with the session that created it, and the Node creates it again.
type Mode int

const (
	// Ephemeral: the node is the path itself (Curator's PersistentNode with
	// CreateMode.EPHEMERAL and no protection, as GroupMember uses it).
	Ephemeral Mode = iota + 1
	// ProtectedEphemeral: the node is <parent>/_c_<uuid>-<name>, where
	// <name> is the path's last segment (CreateMode.EPHEMERAL with
	// protection). The uuid is this Node's for its whole life.
	ProtectedEphemeral
	// ProtectedEphemeralSequential: the node is
	// <parent>/_c_<uuid>-<name><seq>, with the server's 10-digit sequence
	// number (CreateMode.EPHEMERAL_SEQUENTIAL with protection). Each create
	// gets a new sequence number, so Path changes when the node is created
	// again.
	ProtectedEphemeralSequential
)

// String returns the mode's name, e.g. "ProtectedEphemeral".
func (m Mode) String() string {
	switch m {
	case Ephemeral:
		return "Ephemeral"
	case ProtectedEphemeral:
		return "ProtectedEphemeral"
	case ProtectedEphemeralSequential:
		return "ProtectedEphemeralSequential"
	}
	return fmt.Sprintf("Mode(%d)", int(m))
}

// maxData is the largest node data accepted: ZooKeeper's packet limit is
// 1 MiB, requests included.
const maxData = 512 << 10

// cleanupTimeout bounds how long Close waits for the node's deletion; a
// deletion that takes longer goes on in the session's background queue.
const cleanupTimeout = 5 * time.Second

type runState int

const (
	latent runState = iota
	started
	closed
)

// Node is a node that stays: once started, it creates an ephemeral znode and
// creates it again whenever it is gone (Curator's PersistentNode): after a
// session loss, as soon as the next session is connected; after someone
// deleted it, at once. Its data is the Node's, set at construction and by
// SetData. See the package documentation for what a loss means for it.
//
// A Node is safe for concurrent use.
type Node struct {
	zs     *zksession.Session
	path   string // as given
	full   string // full server path of the node (Ephemeral) or of its base name
	dir    string // full server path of the parent
	base   string // the path's last segment
	mode   Mode
	prefix string // protected modes: "_c_<uuid>-"
	lg     *zap.Logger

	mu      sync.Mutex
	state   runState
	data    []byte
	gen     uint64 // the generation of data: 1 at construction, +1 at each SetData
	node    string // full server path of our node; "" while there is none
	czxid   int64  // the node's czxid: who it is, whatever its name
	version int32  // the node's data version as last seen
	written uint64 // the generation of the data the node holds
	ep      *zksession.Epoch
	err     error          // why the Node stopped before Close
	changes keeper.Changes // wakes waiters at every change of the above

	kick chan struct{} // SetData wakes the goroutine (capacity 1)

	ctx       context.Context
	cancel    context.CancelCauseFunc
	wg        sync.WaitGroup
	closeOnce sync.Once
}

// NewNode returns a Node for path (relative to the session's namespace) in
// the given mode, with data as its node's data (nil is empty data, written
// as such, never as a null that Java clients would read; at most 512 KiB). It validates its arguments and does no I/O; Start creates the
// node. Options: WithLogger. Bad input gives an error matching
// session.ErrBadArgument.
func NewNode(sess *session.Session, path string, mode Mode, data []byte, opts ...Option) (*Node, error) {
	n, err := newNode(sess, path, mode, data, opts)
	if err != nil {
		return nil, engine.NewError("group", path, err)
	}
	return n, nil
}

func newNode(sess *session.Session, p string, mode Mode, data []byte, opts []Option) (*Node, error) {
	zs, err := zksession.Of(sess)
	if err != nil {
		return nil, err
	}
	full, err := zs.Path(p)
	if err != nil {
		return nil, err
	}
	switch mode {
	case Ephemeral, ProtectedEphemeral, ProtectedEphemeralSequential:
	default:
		return nil, fmt.Errorf("%w: mode %v", session.ErrBadArgument, mode)
	}
	if len(data) > maxData {
		return nil, fmt.Errorf("%w: data of %d bytes (at most %d)", session.ErrBadArgument, len(data), maxData)
	}
	cfg, err := buildConfig(opts)
	if err != nil {
		return nil, err
	}
	lg := cfg.logger
	if lg == nil {
		lg = zs.Logger()
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	n := &Node{
		zs:     zs,
		path:   p,
		full:   full,
		dir:    path.Dir(full),
		base:   path.Base(full),
		mode:   mode,
		lg:     lg.Named("group").With(zap.String("path", full)),
		data:   bytes.Clone(data),
		gen:    1,
		kick:   make(chan struct{}, 1),
		ctx:    ctx,
		cancel: cancel,
	}
	n.changes = keeper.NewChanges(&n.mu)
	if mode != Ephemeral {
		n.prefix = engine.ProtectedPrefix(engine.NewUUID())
	}
	return n, nil
}

// errf wraps err with the Node's recipe name and path.
func (n *Node) errf(err error) error { return engine.NewError("group", n.path, err) }

// Start starts the goroutine that creates the node and keeps it. It does not
// block. It returns ErrStarted when called twice and session.ErrClosed after
// Close.
func (n *Node) Start() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	switch n.state {
	case started:
		return n.errf(ErrStarted)
	case closed:
		return n.errf(engine.Closed())
	}
	n.state = started
	n.wg.Add(1)
	go n.run()
	return nil
}

// Wait blocks until the node exists on the current session (at once if it
// does), as Curator's waitForInitialCreate. It returns an error matching
// ctx's when ctx ends first, ErrNotStarted before Start, session.ErrClosed
// after Close, and the error that stopped the Node (a ZooKeeper refusal such
// as zk.ErrNoAuth, or session.ErrClosed when the session was closed). The
// node may be gone again by the time the caller looks. A nil ctx gives
// session.ErrBadArgument. Safe to call concurrently.
func (n *Node) Wait(ctx context.Context) error {
	if ctx == nil {
		return n.errf(fmt.Errorf("%w: nil context", session.ErrBadArgument))
	}
	return n.waitUntil(ctx, func() (bool, error) {
		if err := n.stoppedLocked(); err != nil {
			return false, err
		}
		return n.node != "", nil
	})
}

// waitUntil waits until cond, called with n.mu held at every change of the
// Node, returns true or an error, or until ctx ends.
func (n *Node) waitUntil(ctx context.Context, cond func() (bool, error)) error {
	err, ctxEnded := n.changes.Until(ctx, cond)
	if ctxEnded {
		return n.errf(err)
	}
	return err
}

// stoppedLocked returns the error that ends a wait: not started, closed or
// stopped. n.mu held.
func (n *Node) stoppedLocked() error {
	switch {
	case n.state == latent:
		return n.errf(ErrNotStarted)
	case n.state == closed:
		return n.errf(engine.Closed())
	case n.err != nil:
		return n.err
	}
	return nil
}

// Path returns the path of the node (relative to the session's namespace) as
// it exists now, or "" while it does not exist. For the protected modes it
// is the name with the protection prefix (and the sequence number). It does
// no I/O.
func (n *Node) Path() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.node == "" {
		return ""
	}
	return strings.TrimPrefix(n.node, n.zs.Namespace())
}

// Data returns the Node's data: what its node holds, or will hold once
// written (a copy). It does no I/O.
func (n *Node) Data() []byte {
	n.mu.Lock()
	defer n.mu.Unlock()
	return bytes.Clone(n.data)
}

// SetData replaces the Node's data (nil is empty data, at most 512 KiB) and
// blocks until the node holds it: written to the node that exists, or to the
// next one created. Before Start it only stores the data, for the first
// create. When ctx ends first it returns an error matching ctx's; the data is
// kept all the same and written as soon as it can be. That error also
// matches recipes.ErrUnknownOutcome when a write went out on the session's
// connection meanwhile (perhaps one carrying the data) and the Node has not
// had its answer: the node may already hold the data. It does not when no
// write was sent (the connection was down all along). It returns
// session.ErrClosed after Close, the error that stopped the Node (see Wait),
// and session.ErrBadArgument for a nil ctx or data too large. The write is
// conditional on the node's version as last read, so it never overwrites a
// change it has not read; a conflict is retried only on the node this Node
// created (the same czxid). ZooKeeper cannot make a write conditional on a
// node's owner: a node that another session deleted and created again under
// the same name just before the write, with the same version, can still
// receive it. Safe to call concurrently: the data of the call that came last
// wins.
func (n *Node) SetData(ctx context.Context, data []byte) error {
	if ctx == nil {
		return n.errf(fmt.Errorf("%w: nil context", session.ErrBadArgument))
	}
	if len(data) > maxData {
		return n.errf(fmt.Errorf("%w: data of %d bytes (at most %d)", session.ErrBadArgument, len(data), maxData))
	}
	// Read before the data is stored, so that every write carrying it goes
	// out after: if none went out by the time ctx ends, the node does not
	// hold the data.
	sent := n.zs.WritesSent()
	n.mu.Lock()
	if n.state == closed {
		n.mu.Unlock()
		return n.errf(engine.Closed())
	}
	n.data = bytes.Clone(data)
	n.gen++
	gen := n.gen
	if n.state == latent {
		n.mu.Unlock()
		return nil
	}
	n.mu.Unlock()
	keeper.Kick(n.kick)
	// stoppedLocked's errors are wrapped already; ctx's and an unknown
	// outcome are wrapped here.
	return n.errf(n.changes.UntilHeld(ctx, n.zs, sent, func() (bool, error) {
		if n.node != "" && n.written >= gen {
			return true, nil
		}
		return false, n.stoppedLocked()
	}))
}

// Close stops keeping the node and deletes it, and returns after the Node's
// goroutine has exited. The deletion is given a few seconds; when the
// connection is down it goes on in the background (and the node goes with
// its session anyway). It deletes the node only while it is the one this
// Node created (the same czxid and owner, read just before): a node that
// another session created under the same name is left alone, except when
// it was created between that read and the delete with the same version,
// which ZooKeeper cannot rule out (as for SetData). Calls waiting in Wait or
// SetData return session.ErrClosed. Close is idempotent and returns nil.
func (n *Node) Close() error {
	n.closeOnce.Do(func() {
		n.mu.Lock()
		n.state = closed
		n.broadcastLocked()
		n.mu.Unlock()
		n.cancel(session.ErrClosed)
		n.wg.Wait()
		n.mu.Lock()
		node, czxid, ep := n.node, n.czxid, n.ep
		n.node = ""
		n.broadcastLocked()
		n.mu.Unlock()
		if node == "" {
			return
		}
		// node may name a node that is no longer ours: deleted and created
		// again by another session (under a fixed name) since the goroutine
		// last looked. Delete it only while it is the one we created.
		done := n.zs.GuaranteedDeleteOwned(ep, node, czxid)
		t := time.NewTimer(cleanupTimeout)
		defer t.Stop()
		select {
		case <-done:
		case <-t.C:
			n.lg.Warn("node not deleted yet at Close: left to the session's background deletion",
				zap.String("node", node))
		}
	})
	return nil
}

// placed returns the czxid of the node in place (0 while there is none)
// and a channel closed at the Node's next change: a Member waits on it for
// its node to be created.
func (n *Node) placed() (int64, <-chan struct{}) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.node == "" {
		return 0, n.changes.ChanLocked()
	}
	return n.czxid, n.changes.ChanLocked()
}

// broadcastLocked wakes every waiter. n.mu held.
func (n *Node) broadcastLocked() { n.changes.BroadcastLocked() }

// errRetryNow makes run establish the node again at once.
var errRetryNow = errors.New("create again")

// run creates the node and keeps it until Close, or until ZooKeeper refuses
// it for good.
func (n *Node) run() {
	defer n.wg.Done()
	keeper.Loop{
		Establish: n.establish,
		Keep:      n.keep,
		Again:     func(err error) bool { return errors.Is(err, errRetryNow) },
		Stop:      n.stop,
		BackOff:   keeper.NewBackOff(100*time.Millisecond, 5*time.Second),
		Log:       n.lg,
	}.Run(n.ctx, n.zs)
}

// stop records why the Node stopped before Close.
func (n *Node) stop(err error) {
	err = n.errf(err)
	n.lg.Info("node stopped: it will not be created again", zap.Error(err))
	n.mu.Lock()
	n.err = err
	n.node = ""
	n.broadcastLocked()
	n.mu.Unlock()
}

// setNode records node as ours, created or adopted under ep, holding the
// data of generation written.
func (n *Node) setNode(ep *zksession.Epoch, node string, st *zk.Stat, written uint64) {
	n.mu.Lock()
	n.node, n.czxid, n.version, n.written, n.ep = node, st.Czxid, st.Version, written, ep
	n.broadcastLocked()
	n.mu.Unlock()
	n.lg.Info("node created", zap.String("node", node), zap.String("session_id", fmt.Sprintf("0x%x", ep.SessionID())))
}

// clearNode records that our node is gone (or no longer ours).
func (n *Node) clearNode(why string) {
	n.mu.Lock()
	node := n.node
	n.node = ""
	n.broadcastLocked()
	n.mu.Unlock()
	if node != "" {
		n.lg.Info("node gone: creating it again", zap.String("node", node), zap.String("why", why))
	}
}

// snapshot returns the data to create the node with and its generation.
func (n *Node) snapshot() ([]byte, uint64) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.data, n.gen
}

// writtenFor returns gen if got is the Node's data of generation gen, else
// 0 (the data must be written).
func writtenFor(got, data []byte, gen uint64) uint64 {
	if bytes.Equal(got, data) {
		return gen
	}
	return 0
}

// establish makes the node exist under ep: it adopts our node if one is
// there (a create whose reply was lost, a reconnect after the local timer
// declared the session lost), or creates it. With a fixed name held by
// another session, it waits for that node to go and returns errRetryNow.
func (n *Node) establish(ep *zksession.Epoch) error {
	data, gen := n.snapshot()
	if n.mode != Ephemeral {
		found, err := n.adopt(ep, data, gen)
		if found || err != nil {
			return err
		}
	}
	name, flags := n.full, int32(0)
	switch n.mode {
	case ProtectedEphemeral:
		name = path.Join(n.dir, n.prefix+n.base)
	case ProtectedEphemeralSequential:
		name, flags = path.Join(n.dir, n.prefix+n.base), zk.FlagSequence
	}
	for try := 0; ; try++ {
		created, st, err := n.zs.CreateEphemeral(n.ctx, ep, name, data, flags)
		switch {
		case err == nil:
			n.setNode(ep, created, st, gen)
			return nil
		case errors.Is(err, zk.ErrNoNode) && try == 0 && n.dir != "/":
			if err := n.zs.CreateContainers(n.ctx, n.dir); err != nil {
				return err
			}
		case errors.Is(err, zk.ErrNodeExists) && flags == 0:
			return n.existing(ep, name, data, gen)
		default:
			// A connection error leaves the outcome unknown: the next
			// round adopts the node if it was created.
			return err
		}
	}
}

// adopt looks for nodes with this Node's protected prefix: the first owned
// by ep's session becomes ours, the others (left by an earlier session of
// this Node, or a second copy) are deleted. It reports whether it adopted
// one.
func (n *Node) adopt(ep *zksession.Epoch, data []byte, gen uint64) (bool, error) {
	var kids []string
	err := n.zs.Retry(n.ctx, ep, func(c *zk.Conn) error {
		k, _, err := c.Children(n.dir)
		if err == nil {
			kids = k
		}
		return err
	})
	if errors.Is(err, zk.ErrNoNode) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	adopted := false
	for _, k := range kids {
		if !strings.HasPrefix(k, n.prefix) {
			continue
		}
		p := path.Join(n.dir, k)
		got, st, err := keeper.Get(n.ctx, n.zs, ep, p)
		switch {
		case errors.Is(err, zk.ErrNoNode):
			continue
		case err != nil:
			return false, err
		case !adopted && st.EphemeralOwner == ep.SessionID():
			n.setNode(ep, p, st, writtenFor(got, data, gen))
			adopted = true
			continue
		}
		n.lg.Info("deleting a node of this Node's from another session", zap.String("node", p),
			zap.String("owner", fmt.Sprintf("0x%x", st.EphemeralOwner)))
		err = n.zs.Retry(n.ctx, ep, func(c *zk.Conn) error { return c.Delete(p, st.Version) })
		if err != nil && !errors.Is(err, zk.ErrNoNode) && !errors.Is(err, zk.ErrBadVersion) {
			return adopted, err
		}
	}
	return adopted, nil
}

// existing handles a create of the fixed name that found the node there:
// ours (owned by ep's session) is adopted; another session's is waited out.
func (n *Node) existing(ep *zksession.Epoch, name string, data []byte, gen uint64) error {
	got, st, w, err := keeper.GetW(n.ctx, n.zs, ep, name)
	switch {
	case errors.Is(err, zk.ErrNoNode):
		return errRetryNow
	case err != nil:
		return err
	case st.EphemeralOwner == ep.SessionID():
		n.setNode(ep, name, st, writtenFor(got, data, gen))
		return nil
	}
	// Another session's node: another process that uses the same name, or
	// a session of ours that the server has not expired yet. Its data is
	// not ours to write; wait until it changes or goes, then look again.
	n.lg.Info("the node exists under another session: waiting for it to go",
		zap.String("owner", fmt.Sprintf("0x%x", st.EphemeralOwner)))
	if err := keeper.AwaitChange(n.ctx, ep, w); err != nil {
		return err
	}
	return errRetryNow
}

// keep watches our node, writes new data to it, and returns when it is gone
// (nil: create it again), when ep ends, or on an error.
func (n *Node) keep(ep *zksession.Epoch) error {
	for {
		n.mu.Lock()
		node, czxid, version, data, gen, written := n.node, n.czxid, n.version, n.data, n.gen, n.written
		n.mu.Unlock()
		if node == "" {
			return nil
		}
		if written < gen {
			if err := n.write(ep, node, czxid, version, data, gen); err != nil {
				return err
			}
			continue
		}
		changed := n.zs.Changed()
		_, st, w, err := keeper.GetW(n.ctx, n.zs, ep, node)
		switch {
		case errors.Is(err, zk.ErrNoNode):
			n.clearNode("deleted")
			return nil
		case ep.Err() != nil:
			n.clearNode("session lost")
			return ep.Err()
		case err != nil:
			return err
		case st.Czxid != czxid:
			// Deleted, and created again by another session.
			n.clearNode("replaced by another session's node")
			return nil
		}
		n.mu.Lock()
		if n.node == node {
			n.version = st.Version
		}
		n.mu.Unlock()
		select {
		case ev, ok := <-w.Events():
			w.Event(ev, ok) // deleted or changed: look again
		case <-n.kick:
		case <-changed:
			// Suspended, Reconnected...: look again once the connection is
			// up, as Curator creates the node again at RECONNECTED.
		case <-ep.Lost():
			n.clearNode("session lost")
			return ep.Err()
		case <-n.ctx.Done():
			return nil
		}
	}
}

// write sets data of generation gen on our node, conditional on its
// version; a version that moved is read again, as long as the node is still
// ours (the same czxid).
func (n *Node) write(ep *zksession.Epoch, node string, czxid int64, version int32, data []byte, gen uint64) error {
	st, replaced, err := keeper.SetVersioned(n.ctx, n.zs, ep, node, czxid, version, zksession.NodeData(data))
	switch {
	case replaced:
		n.clearNode("replaced by another session's node")
		return nil
	case err == nil:
		n.mu.Lock()
		if n.node == node {
			n.version = st.Version
			n.written = max(n.written, gen)
			n.broadcastLocked()
		}
		n.mu.Unlock()
		return nil
	case errors.Is(err, zk.ErrNoNode):
		n.clearNode("deleted")
		return nil
	case ep.Err() != nil:
		n.clearNode("session lost")
		return ep.Err()
	}
	return err
}
