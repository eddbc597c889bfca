package barrier

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/internal/engine"
	"github.com/zkrecipes/zkrecipes/internal/zksession"
	"github.com/zkrecipes/zkrecipes/recipes"
	"github.com/zkrecipes/zkrecipes/session"
)

// readyNode is the child that Curator's DistributedDoubleBarrier creates
// when enough members have entered.
const readyNode = "ready"

// DoubleBarrier is a double barrier, wire-compatible with Apache Curator's
// DistributedDoubleBarrier: members Enter, which returns once the stated
// number of members have entered, do their work, and Leave, which returns
// once every member has left. Each member is one DoubleBarrier value (one
// member node); its calls run one at a time (a call waits for the one
// before). It starts no goroutine and is safe for concurrent use.
type DoubleBarrier struct {
	b       base
	members int

	turn chan struct{} // holds one token: the right to run a call

	// Owned by the holder of the turn token.
	name    string           // our member node's name: a random UUID, as Curator's, new at each Enter
	node    string           // its server path
	entered *zksession.Epoch // the session of our member node, or nil
}

// NewDouble returns a member of the double barrier at path (under the
// session's namespace) for members members (at least 1): Enter returns once
// that many members have entered. More may enter: it is a threshold, not a
// limit, as in Curator. It validates its arguments and does no I/O.
func NewDouble(sess *session.Session, path string, members int, opts ...Option) (*DoubleBarrier, error) {
	b, err := newBase(sess, "double barrier", path, opts)
	if err != nil {
		return nil, err
	}
	if members < 1 {
		return nil, b.errf(fmt.Errorf("%w: %d members: want at least 1", session.ErrBadArgument, members))
	}
	d := &DoubleBarrier{b: b, members: members, turn: make(chan struct{}, 1)}
	d.turn <- struct{}{}
	return d, nil
}

// take waits for the turn to run a call, within ctx (merged with Close).
func (d *DoubleBarrier) take(ctx context.Context) error {
	select {
	case <-d.turn:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (d *DoubleBarrier) give() { d.turn <- struct{}{} }

// Enter creates this member's node (EPHEMERAL, named by a new random UUID) and
// blocks until the barrier is open: the "ready" node exists, or at least
// the stated number of member nodes do, and then this member creates
// "ready". It waits on a child watch of the barrier's directory, through
// disconnects. Calling Enter again after it returned, before Leave, returns
// nil at once while the member's session lasts.
//
// If the session is lost before the barrier opens, the member's node is
// gone (the others no longer count it) and Enter returns an error matching
// session.ErrLost; calling Enter again joins on the new session. When ctx
// ends or the DoubleBarrier is closed, Enter returns ctx's error or
// session.ErrClosed within a few milliseconds, and its member node is
// deleted: before it returns on a healthy connection, else as soon as the
// connection allows. A member node deleted by
// someone else ends it with recipes.ErrNodeDeleted. Safe for concurrent use.
func (d *DoubleBarrier) Enter(ctx context.Context) error {
	actx, end, err := d.b.begin(ctx)
	if err != nil {
		return err
	}
	defer end()
	if err := d.take(actx); err != nil {
		return d.b.result(ctx, err)
	}
	defer d.give()
	if d.entered != nil && d.entered.Err() == nil {
		return nil
	}
	d.entered = nil
	// A new name for each attempt: a create of an earlier attempt that
	// go-zookeeper sends late, on a new session, is deleted by the session
	// (it is not ours), and must not take this attempt's node with it.
	d.name = engine.NewUUID()
	d.node = d.b.full + "/" + d.name
	ep, err := d.b.zs.WaitConnected(actx)
	if err != nil {
		return d.b.result(ctx, err)
	}
	if err := d.join(actx, ep); err != nil {
		return d.b.result(ctx, d.abandon(actx, ep, err))
	}
	if err := d.awaitReady(actx, ep); err != nil {
		return d.b.result(ctx, d.abandon(actx, ep, err))
	}
	d.entered = ep
	return nil
}

// abandon queues the delete of the member node of a failed Enter (or of
// Close), waits for it while the connection is up, at most cleanupTimeout
// and, once ctx has ended, cleanupGrace more, and returns err. What is not
// done by then the session's queue finishes.
func (d *DoubleBarrier) abandon(ctx context.Context, ep *zksession.Epoch, err error) error {
	if ep.Err() != nil || errors.Is(err, recipes.ErrNodeDeleted) {
		return err // the node went with the session, or is gone
	}
	done := d.b.zs.GuaranteedDelete(ep, d.node, -1)
	limit := time.NewTimer(cleanupTimeout)
	defer limit.Stop()
	ctxDone := ctx.Done()
	if ctx.Err() != nil {
		limit.Reset(cleanupGrace)
		ctxDone = nil
	}
	for {
		changed := d.b.zs.Changed() // before the state: a change after it closes this
		switch d.b.zs.State() {
		case zksession.Connected, zksession.Reconnected, zksession.ReadOnly:
		default:
			return err // the queue deletes it once the connection is back
		}
		select {
		case <-done:
			return err
		case <-limit.C:
			return err
		case <-d.b.zs.Done():
			return err
		case <-ctxDone:
			ctxDone = nil
			if !limit.Stop() {
				<-limit.C
			}
			limit.Reset(cleanupGrace)
		case <-changed:
		}
	}
}

// join creates the member node on ep's session, adopting it when a create
// whose reply was lost had made it.
func (d *DoubleBarrier) join(ctx context.Context, ep *zksession.Epoch) error {
	for {
		_, _, err := d.b.zs.CreateEphemeral(ctx, ep, d.node, d.b.cfg.data, 0)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, zk.ErrNoNode):
			if err := d.b.zs.CreateContainers(ctx, d.b.full); err != nil {
				return err
			}
			continue
		case !errors.Is(err, zk.ErrNodeExists) && !zksession.IsConnectionError(err):
			return err
		}
		// An earlier create of ours may have made the node: look.
		var st *zk.Stat
		err = d.b.zs.Retry(ctx, ep, func(conn *zk.Conn) error {
			_, s, err := conn.Exists(d.node)
			if err == nil {
				st = s
			}
			return zksession.Refused("read", d.node, err)
		})
		if err != nil {
			return err
		}
		if st != nil && st.EphemeralOwner == ep.SessionID() {
			return nil
		}
	}
}

// awaitReady waits until the barrier is open, creating "ready" when enough
// members are there.
func (d *DoubleBarrier) awaitReady(ctx context.Context, ep *zksession.Epoch) error {
	for {
		kids, w, err := d.list(ctx, ep)
		if err != nil {
			return err
		}
		count, ours := 0, false
		for _, k := range kids {
			switch k {
			case readyNode:
				return nil
			case d.name:
				ours = true
			}
			count++
		}
		if !ours {
			return fmt.Errorf("member node %s: %w", d.name, recipes.ErrNodeDeleted)
		}
		if count >= d.members {
			err := d.b.zs.Retry(ctx, ep, func(conn *zk.Conn) error {
				_, err := conn.Create(d.b.full+"/"+readyNode, d.b.cfg.data, zk.FlagPersistent, d.b.zs.ACL())
				return zksession.Refused("create", d.b.full+"/"+readyNode, err)
			})
			if err == nil || errors.Is(err, zk.ErrNodeExists) || errors.Is(err, zksession.ErrSessionChanged) {
				return nil
			}
			return err
		}
		select {
		case ev, ok := <-w.Events():
			w.Event(ev, ok)
		case <-ep.Lost():
			return ep.Err()
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// list reads the barrier's children with a child watch, on ep's session.
func (d *DoubleBarrier) list(ctx context.Context, ep *zksession.Epoch) ([]string, *zksession.Watch, error) {
	var kids []string
	var w *zksession.Watch
	err := d.b.zs.Retry(ctx, ep, func(*zk.Conn) error {
		k, _, w2, err := d.b.zs.ChildrenW(d.b.full)
		if err == nil {
			kids, w = k, w2
		}
		return zksession.Refused("list", d.b.full, err)
	})
	if err != nil {
		// An attempt abandoned when ctx ended may still write kids and w.
		return nil, nil, err
	}
	return kids, w, nil
}

// Leave deletes this member's node and blocks until no member node is left
// (the children of the barrier's directory other than "ready"); then it
// deletes "ready", as Curator's members do (see the package doc on reusing
// the path for another round). A member whose session was lost has left: its node went with it.
// Leave without Enter only waits. It waits on a child watch of the
// directory, through disconnects and session losses. ctx bounds it. When
// it ends (or at Close) before this member's node is deleted, the delete
// is handed to the session, which makes it as soon as the connection
// allows, so the others go on; on a healthy connection Leave waits for it
// up to 10 ms past ctx (at Close, as long as Close waits). Calling Leave
// again then only waits. Errors: ctx's error, session.ErrClosed, ZooKeeper
// errors. Safe for concurrent use.
func (d *DoubleBarrier) Leave(ctx context.Context) error {
	actx, end, err := d.b.begin(ctx)
	if err != nil {
		return err
	}
	defer end()
	if err := d.take(actx); err != nil {
		return d.b.result(ctx, err)
	}
	defer d.give()
	if ep := d.entered; ep != nil {
		err := d.b.zs.Retry(actx, ep, func(conn *zk.Conn) error {
			return zksession.Refused("delete", d.node, conn.Delete(d.node, -1))
		})
		d.entered = nil
		switch {
		case err == nil, errors.Is(err, zk.ErrNoNode), errors.Is(err, session.ErrLost):
			// deleted, or gone with its session
		default:
			// ctx ended or Close came (perhaps while disconnected), or
			// the server refused: the session's queue deletes the node,
			// so the other members do not wait for this one. At Close,
			// wait for it as Close does.
			wctx := actx
			if ctx.Err() == nil && d.b.ctx.Err() != nil {
				wctx = context.Background()
			}
			return d.b.result(ctx, d.abandon(wctx, ep, err))
		}
	}
	for {
		ep, err := d.b.zs.WaitConnected(actx)
		if err != nil {
			return d.b.result(ctx, err)
		}
		kids, w, err := d.list(actx, ep)
		switch {
		case errors.Is(err, zk.ErrNoNode):
			return nil // the directory is gone: nobody is left
		case errors.Is(err, session.ErrLost) && actx.Err() == nil:
			continue
		case err != nil:
			return d.b.result(ctx, err)
		}
		left := true
		for _, k := range kids {
			if k != readyNode {
				left = false
			}
		}
		if left {
			ready := d.b.full + "/" + readyNode
			err := d.b.do(actx, func(conn *zk.Conn) error {
				return zksession.Refused("delete", ready, conn.Delete(ready, -1))
			})
			if errors.Is(err, zk.ErrNoNode) {
				err = nil
			}
			return d.b.result(ctx, err)
		}
		if err := waitEvent(actx, w, ep.Lost()); err != nil {
			return d.b.result(ctx, err)
		}
	}
}

// Close ends the calls in progress with session.ErrClosed, deletes this
// member's node if it has entered and not left (on a healthy connection
// before it returns, waiting at most 5 s; else the session deletes it once
// the connection is back), and makes later calls fail with
// session.ErrClosed. Idempotent.
func (d *DoubleBarrier) Close() error {
	if d.b.ctx.Err() != nil {
		return nil
	}
	d.b.cancel()
	<-d.turn // the call in progress returns promptly once canceled
	defer d.give()
	if ep := d.entered; ep != nil {
		d.entered = nil
		d.abandon(context.Background(), ep, nil)
	}
	return nil
}
