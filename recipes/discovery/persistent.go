package discovery

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/go-zookeeper/zk"
	"go.uber.org/zap"

	"github.com/zkrecipes/zkrecipes/internal/engine"
	"github.com/zkrecipes/zkrecipes/internal/keeper"
	"github.com/zkrecipes/zkrecipes/internal/zksession"
	"github.com/zkrecipes/zkrecipes/session"
)

// persistent keeps the persistent node of a Static or Permanent instance:
// it creates the node (or takes over the one there, as Curator's
// registerService does), writes new data to it, and creates it again when
// someone deletes it. It is group.Node for a node that outlives its
// session: nothing is owned, so a node is told apart by its czxid and, at
// Close, by its data.
type persistent struct {
	zs   *zksession.Session
	path string // as given
	full string // on the server
	dir  string
	lg   *zap.Logger

	mu      sync.Mutex
	data    []byte
	gen     uint64 // generation of data: +1 at every setData
	exists  bool   // the node is ours and exists, as last seen
	czxid   int64
	version int32
	held    []byte // the node's data as last written or read
	created bool   // a create of ours succeeded: the node may exist, even unrecorded
	written uint64 // generation of data the node holds
	ep      *zksession.Epoch
	err     error // why it stopped before Close
	closed  bool
	changes keeper.Changes

	kick chan struct{}

	ctx       context.Context
	cancel    context.CancelCauseFunc
	wg        sync.WaitGroup
	closeOnce sync.Once
}

func newPersistent(zs *zksession.Session, p, full string, data []byte, lg *zap.Logger) *persistent {
	ctx, cancel := context.WithCancelCause(context.Background())
	n := &persistent{
		zs: zs, path: p, full: full, dir: path.Dir(full), lg: lg,
		data: data, gen: 1,
		kick: make(chan struct{}, 1),
		ctx:  ctx, cancel: cancel,
	}
	n.changes = keeper.NewChanges(&n.mu)
	n.wg.Add(1)
	go n.run()
	return n
}

func (n *persistent) broadcastLocked() { n.changes.BroadcastLocked() }

func (n *persistent) waitUntil(ctx context.Context, cond func() (bool, error)) error {
	err, _ := n.changes.Until(ctx, cond)
	return err
}

func (n *persistent) stoppedLocked() error {
	switch {
	case n.closed:
		return engine.Closed()
	case n.err != nil:
		return n.err
	}
	return nil
}

func (n *persistent) Wait(ctx context.Context) error {
	return n.waitUntil(ctx, func() (bool, error) {
		if err := n.stoppedLocked(); err != nil {
			return false, err
		}
		return n.exists, nil
	})
}

func (n *persistent) Path() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.exists {
		return ""
	}
	return n.path
}

func (n *persistent) SetData(ctx context.Context, data []byte) error {
	// Read before the data is stored, so that every write carrying it goes
	// out after: if none went out by the time ctx ends, the node does not
	// hold the data (as group.Node.SetData).
	sent := n.zs.WritesSent()
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return engine.Closed()
	}
	n.data = data
	n.gen++
	gen := n.gen
	n.mu.Unlock()
	keeper.Kick(n.kick)
	return n.changes.UntilHeld(ctx, n.zs, sent, func() (bool, error) {
		if n.exists && n.written >= gen {
			return true, nil
		}
		return false, n.stoppedLocked()
	})
}

// Close stops keeping the node and deletes it: the node of the czxid this
// keeper last saw (a node someone else created under the name since is left
// alone), within cleanupTimeout; if that cannot be done in time (the
// connection is down), the session's background queue deletes it later
// while it holds the data last written or read. A create still in flight
// at Close deletes its node itself when it lands.
func (n *persistent) Close() error {
	n.closeOnce.Do(func() {
		n.mu.Lock()
		n.closed = true
		n.broadcastLocked()
		n.mu.Unlock()
		n.cancel(session.ErrClosed)
		n.wg.Wait()
		n.mu.Lock()
		created, czxid, held, ep := n.created, n.czxid, n.held, n.ep
		n.exists = false
		n.broadcastLocked()
		n.mu.Unlock()
		if !created || ep == nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
		defer cancel()
		if err := n.deleteOwn(ctx, czxid, held); err != nil {
			n.lg.Warn("node not deleted at Close: left to the session's background deletion", zap.Error(err))
			n.zs.GuaranteedDeleteIfData(ep, n.full, held)
		}
	})
	return nil
}

// deleteOwn deletes the node while its czxid is czxid (0, when the create
// was not read back: while it holds held, our data), at the version read.
func (n *persistent) deleteOwn(ctx context.Context, czxid int64, held []byte) error {
	for {
		var st *zk.Stat
		var got []byte
		err := n.zs.RetryAcrossSessions(ctx, func(c *zk.Conn) error {
			d, s, err := c.Get(n.full)
			if err == nil {
				got, st = d, s
			}
			return err
		})
		switch {
		case errors.Is(err, zk.ErrNoNode):
			return nil
		case err != nil:
			return err
		case czxid != 0 && st.Czxid != czxid, czxid == 0 && !bytes.Equal(got, held):
			return nil // someone else's node now
		}
		err = n.zs.RetryAcrossSessions(ctx, func(c *zk.Conn) error { return c.Delete(n.full, st.Version) })
		if err == nil || errors.Is(err, zk.ErrNoNode) {
			return nil
		}
		if !errors.Is(err, zk.ErrBadVersion) {
			return err
		}
	}
}

// run establishes the node and keeps it until Close, or until ZooKeeper
// refuses it for good.
func (n *persistent) run() {
	defer n.wg.Done()
	keeper.Loop{Establish: n.establish, Keep: n.keep, Stop: n.stop, BackOff: retryBackOff(), Log: n.lg}.Run(n.ctx, n.zs)
}

// retryBackOff is the keeper's pause after a failed round: from 100 ms,
// backing off to 5 s, never giving up.
func retryBackOff() *backoff.ExponentialBackOff {
	return keeper.NewBackOff(100*time.Millisecond, 5*time.Second)
}

func (n *persistent) stop(err error) {
	n.lg.Info("registration stopped: it will not be created again", zap.Error(err))
	n.mu.Lock()
	n.err = err
	n.exists = false
	n.broadcastLocked()
	n.mu.Unlock()
}

func (n *persistent) snapshot() ([]byte, uint64) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.data, n.gen
}

// set records the node as ours, holding held (of generation written when
// that is our data).
func (n *persistent) set(ep *zksession.Epoch, st *zk.Stat, held []byte, written uint64) {
	n.mu.Lock()
	was := n.exists
	n.exists, n.czxid, n.version, n.held, n.ep, n.created = true, st.Czxid, st.Version, held, ep, true
	n.written = max(n.written, written)
	n.broadcastLocked()
	n.mu.Unlock()
	if !was {
		n.lg.Info("node created")
	}
}

func (n *persistent) clear(why string) {
	n.mu.Lock()
	was := n.exists
	n.exists = false
	n.broadcastLocked()
	n.mu.Unlock()
	if was {
		n.lg.Info("node gone: creating it again", zap.String("why", why))
	}
}

// establish creates the node, or takes over the node of that name: one
// that holds our data (a create whose reply was lost, or the node left from
// an earlier session) is adopted, another gets our data.
func (n *persistent) establish(ep *zksession.Epoch) error {
	data, gen := n.snapshot()
	for try := 0; ; try++ {
		err := n.zs.Retry(n.ctx, ep, func(c *zk.Conn) error { return n.create(c, ep, data) })
		switch {
		case err == nil:
			_, st, err := keeper.Get(n.ctx, n.zs, ep, n.full)
			if err != nil {
				return err // the next round finds the node
			}
			n.set(ep, st, data, gen)
			return nil
		case errors.Is(err, zk.ErrNoNode) && try == 0:
			if err := n.zs.CreateContainers(n.ctx, n.dir); err != nil {
				return err
			}
		case errors.Is(err, zk.ErrNodeExists):
			return n.takeOver(ep, data, gen)
		default:
			return err
		}
	}
}

// create creates the node with data. Its result is recorded here, under
// n.mu, not only by the caller: a create that lands after Close (whose Retry
// gave up on it) deletes its node, and one that landed before is known to
// Close even if the caller never saw its answer. A create that failed with
// a connection error may have been applied all the same (its answer was
// lost): it counts as created, so that a Close before the next look finds
// the node by its data and deletes it.
func (n *persistent) create(c *zk.Conn, ep *zksession.Epoch, data []byte) error {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return engine.Closed()
	}
	n.mu.Unlock()
	_, err := c.Create(n.full, data, 0, n.zs.ACL())
	if err != nil && !zksession.IsConnectionError(err) {
		return err // the server's answer: nothing created
	}
	n.mu.Lock()
	late := n.closed
	if !late {
		n.created, n.held, n.ep, n.czxid = true, data, ep, 0 // czxid unknown until read
	}
	n.mu.Unlock()
	if late {
		n.zs.GuaranteedDeleteIfData(ep, n.full, data)
	}
	return err
}

// takeOver adopts the node there, writing our data to it unless it holds
// it.
func (n *persistent) takeOver(ep *zksession.Epoch, data []byte, gen uint64) error {
	got, st, err := keeper.Get(n.ctx, n.zs, ep, n.full)
	switch {
	case errors.Is(err, zk.ErrNoNode):
		return nil // gone meanwhile: create it in the next round
	case err != nil:
		return err
	case st.EphemeralOwner != 0:
		return n.waitOut(ep)
	case bytes.Equal(got, data):
		n.set(ep, st, data, gen)
		return nil
	}
	return n.write(ep, st.Czxid, st.Version, data, gen)
}

// waitOut waits until the ephemeral node of another session (a Dynamic
// instance with this id) that holds the name changes or goes: its data is
// not ours to write. It returns nil to look again.
func (n *persistent) waitOut(ep *zksession.Epoch) error {
	_, st, w, err := keeper.GetW(n.ctx, n.zs, ep, n.full)
	switch {
	case errors.Is(err, zk.ErrNoNode):
		return nil
	case err != nil:
		return err
	case st.EphemeralOwner == 0:
		return nil
	}
	n.lg.Info("the name is another session's ephemeral node: waiting for it to go",
		zap.String("owner", fmt.Sprintf("0x%x", st.EphemeralOwner)))
	return keeper.AwaitChange(n.ctx, ep, w)
}

// write sets data of generation gen on the node, conditional on version; a
// version that moved is read again while the node is the same (czxid).
func (n *persistent) write(ep *zksession.Epoch, czxid int64, version int32, data []byte, gen uint64) error {
	st, replaced, err := keeper.SetVersioned(n.ctx, n.zs, ep, n.full, czxid, version, data)
	switch {
	case replaced:
		n.clear("replaced by another node")
		return nil
	case err == nil:
		n.set(ep, st, data, gen)
		return nil
	case errors.Is(err, zk.ErrNoNode):
		n.clear("deleted")
		return nil
	}
	return err
}

// keep watches the node, writes new data to it, and returns when it is gone
// or replaced (nil: establish it again), when ep ends, or on an error.
func (n *persistent) keep(ep *zksession.Epoch) error {
	for {
		n.mu.Lock()
		exists, czxid, version, data, gen, written := n.exists, n.czxid, n.version, n.data, n.gen, n.written
		n.mu.Unlock()
		if !exists {
			return nil
		}
		if written < gen {
			if err := n.write(ep, czxid, version, data, gen); err != nil {
				return err
			}
			continue
		}
		changed := n.zs.Changed()
		got, st, w, err := keeper.GetW(n.ctx, n.zs, ep, n.full)
		switch {
		case errors.Is(err, zk.ErrNoNode):
			n.clear("deleted")
			return nil
		case ep.Err() != nil:
			return ep.Err() // the node stays: the next epoch adopts it
		case err != nil:
			return err
		case st.Czxid != czxid:
			n.clear("deleted and created again by someone else")
			return nil
		}
		n.mu.Lock()
		if n.exists {
			n.version, n.held = st.Version, got
		}
		n.mu.Unlock()
		select {
		case ev, ok := <-w.Events():
			w.Event(ev, ok)
		case <-n.kick:
		case <-changed:
		case <-ep.Lost():
			return ep.Err()
		case <-n.ctx.Done():
			return nil
		}
	}
}
