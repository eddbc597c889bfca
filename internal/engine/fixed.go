package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"

	"github.com/go-zookeeper/zk"
	"go.uber.org/zap"

	"github.com/zkrecipes/zkrecipes/internal/zksession"
)

// Fixed-node (non-fair) locks: one EPHEMERAL node with a fixed name in the
// recipe directory; whoever creates it holds the lock. Not a Curator recipe.
// The node's data is "<uuid> <participant id>", the uuid being new for every
// acquire, so that after a connection error the creator recognises its node
// by its data and its ephemeralOwner.

// AcquireFixed takes the fixed-node lock <dir>/name: it creates the node
// (one write when the lock is free) and, if the node exists, watches it (GetW)
// and tries again once it is deleted. Every waiter is woken by a release and
// the fastest wins: the lock is not fair, and a release wakes all waiters. id
// is the participant id stored in the node. Blocking, errors and cleanup are
// as for Acquire.
func (e *Engine) AcquireFixed(ctx context.Context, name, id string) (*Lease, error) {
	return e.acquireFixed(ctx, name, id, false)
}

// TryAcquireFixed is AcquireFixed without the wait: it returns an error
// matching ErrBusy if the node exists (held by someone else).
func (e *Engine) TryAcquireFixed(ctx context.Context, name, id string) (*Lease, error) {
	return e.acquireFixed(ctx, name, id, true)
}

// FixedHolder returns the holder of the fixed-node lock <dir>/name, or nil if
// it is free. ctx bounds the requests.
func (e *Engine) FixedHolder(ctx context.Context, name string) (*Participant, error) {
	if ctx == nil {
		return nil, e.errf(fmt.Errorf("%w: nil context", ErrBadArgument))
	}
	if err := checkFixedName(name); err != nil {
		return nil, e.errf(err)
	}
	if !e.enter() {
		return nil, e.closedErr()
	}
	defer e.wg.Done()
	ep, err := e.zs.WaitConnected(ctx)
	if err != nil {
		return nil, e.errf(err)
	}
	var data []byte
	var st *zk.Stat
	err = e.zs.Retry(ctx, ep, func(c *zk.Conn) error {
		var err error
		p := e.path + "/" + name
		data, st, err = c.Get(p)
		return zksession.Refused("read", p, err)
	})
	if errors.Is(err, zk.ErrNoNode) {
		return nil, nil
	}
	if err != nil {
		return nil, e.errf(err)
	}
	_, pid := parseFixedData(data)
	return &Participant{ID: pid, Node: name, Kind: KindOf(""), Holds: true, SessionID: st.EphemeralOwner, Token: st.Czxid}, nil
}

func checkFixedName(name string) error {
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\x00") {
		return fmt.Errorf("%w: node name %q", ErrBadArgument, name)
	}
	return nil
}

// parseFixedData splits "<uuid> <id>"; data in another format is all id.
func parseFixedData(data []byte) (uuid, id string) {
	s := string(data)
	if len(s) > uuidLen && s[uuidLen] == ' ' && isUUID(s[:uuidLen]) {
		return s[:uuidLen], s[uuidLen+1:]
	}
	return "", s
}

type getResult struct {
	data []byte
	stat *zk.Stat
	w    *zksession.Watch
	err  error
}

func (e *Engine) acquireFixed(ctx context.Context, name, id string, try bool) (*Lease, error) {
	if ctx == nil {
		return nil, e.errf(fmt.Errorf("%w: nil context", ErrBadArgument))
	}
	if err := checkFixedName(name); err != nil {
		return nil, e.errf(err)
	}
	if e.hooks != nil {
		if octx, o := e.ObserveAcquire(ctx, e.cfg.kind, 0); o != nil {
			l, err := e.acquireFixedAs(octx, name, id, try, o)
			o.Done(err, l)
			return l, err
		}
	}
	return e.acquireFixedAs(ctx, name, id, try, nil)
}

// acquireFixedAs is acquireFixed, observed by o (nil: not observed).
func (e *Engine) acquireFixedAs(ctx context.Context, name, id string, try bool, o *Observation) (*Lease, error) {
	a := &attempt{e: e, user: ctx, try: try, uuid: NewUUID(), obs: o}
	if err := e.begin(ctx, &a.scope); err != nil {
		return nil, err
	}
	defer e.end(&a.scope)
	a.fixed = e.path + "/" + name
	a.data = []byte(a.uuid + " " + id)
	l, err := a.runFixed(name, id)
	if err != nil {
		return nil, err
	}
	l.x.id = id
	return l, nil
}

func (a *attempt) runFixed(name, id string) (*Lease, error) {
	e := a.e
	if err := a.connect(); err != nil {
		return nil, a.fail(err)
	}
	// The create finds out whether the directory exists (ErrNoNode below).
	pipelined := true
	for tries := 0; ; tries++ {
		if err := a.ctx.Err(); err != nil {
			return nil, a.fail(err)
		}
		if a.node == "" {
			if err := a.recapture(); err != nil {
				return nil, a.fail(err)
			}
			var got chan getResult
			if pipelined {
				// Read the node right behind the create (same connection, in
				// order): the token comes back without an extra round trip.
				pipelined = false
				got = make(chan getResult, 1)
				e.wg.Add(1)
				go func() {
					defer e.wg.Done()
					runtime.Gosched()
					r, err := zksession.Call(a.ctx, e.zs, func(c *zk.Conn) (getResult, error) {
						var r getResult
						var err error
						// A try-acquire never sets a watch it will not wait
						// on: if the create fails, this read was of the
						// holder's node.
						if e.cfg.nodeWatch && !a.try {
							r.data, r.stat, r.w, err = e.zs.GetW(a.fixed)
						} else {
							r.data, r.stat, err = c.Get(a.fixed)
						}
						return r, err
					}, nil)
					r.err = err
					got <- r
				}()
			}
			err := a.createFixed()
			switch {
			case err == nil:
				if a.e.zs.Conn().SessionID() != a.ep.SessionID() || a.ep.Err() != nil {
					// The create ran on another session (go-zookeeper re-sent
					// it on a new one) or after our epoch ended. Never delete
					// the fixed name unconditionally: by now it may be the
					// next holder's. fail sweeps it by our data, which is
					// unique to this acquire.
					a.ghosts = true
					awaitRead(a.ctx, got)
					return nil, a.fail(fmt.Errorf("create ran on another session: %w", errSessionChanged(a.ep)))
				}
				a.node, a.name = a.fixed, name
				if got != nil {
					select {
					case r := <-got:
						if r.err == nil && bytes.Equal(r.data, a.data) && r.stat.EphemeralOwner == a.ep.SessionID() {
							a.czxid = r.stat.Czxid
							a.self = r.w
						}
					case <-a.ctx.Done():
						// Leave the read behind: the next step fails on ctx.
					}
				}
			case errors.Is(err, zk.ErrNodeExists):
				// A watch the pipelined read may have set on the holder's node
				// is the shared one that fixedExists waits on.
				awaitRead(a.ctx, got)
				held, err := a.fixedExists()
				if err != nil {
					return nil, a.fail(err)
				}
				if !held {
					continue
				}
			case errors.Is(err, zk.ErrNoNode):
				// No directory: a new key, or a reaped container (see
				// createAndList).
				awaitRead(a.ctx, got)
				e.dirReady.Store(false)
				if err := e.zs.CreateContainers(a.ctx, e.path); err != nil {
					return nil, a.fail(err)
				}
				e.dirReady.Store(true)
				pipelined = true
				continue
			case zksession.IsConnectionError(err):
				e.zs.NoteRetry(err)
				awaitRead(a.ctx, got)
				a.ghosts = true
				held, err := a.fixedExists()
				if err != nil {
					return nil, a.fail(err)
				}
				if !held {
					continue
				}
			case errors.Is(err, zk.ErrSessionExpired):
				awaitRead(a.ctx, got)
				return nil, a.fail(errSessionLost(err))
			default:
				awaitRead(a.ctx, got)
				return nil, a.fail(err)
			}
		}
		// We own the node.
		if a.lctx.Err() != nil || a.ep.Err() != nil {
			// Suspended since the lease context was captured: wait for the
			// connection, then check that the node is still ours.
			if err := a.recapture(); err != nil {
				return nil, a.fail(err)
			}
			a.czxid, a.self = 0, nil
		}
		if err := a.ctx.Err(); err != nil {
			return nil, a.fail(err)
		}
		if a.czxid == 0 {
			if err := a.statSelf(e.cfg.nodeWatch); err != nil {
				return nil, a.fail(err)
			}
			if a.lctx.Err() != nil || a.ep.Err() != nil {
				continue
			}
		}
		return e.grant(a)
	}
}

// awaitRead waits for the pipelined read, if any, within ctx.
func awaitRead(ctx context.Context, got chan getResult) {
	if got == nil {
		return
	}
	select {
	case <-got:
	case <-ctx.Done():
	}
}

// createFixed sends the create of the fixed node and waits for it within the
// attempt's ctx, the only bound (zksession.Call). If ctx ends first, the
// request goes on without us, and once it has completed the session's queue
// deletes the node if it carries our data (unique to this acquire), whatever
// the outcome: a late success, or a ghost after a connection error.
func (a *attempt) createFixed() error {
	e := a.e
	ep, node, data := a.ep, a.fixed, a.data
	_, err := zksession.Call(a.ctx, e.zs, func(c *zk.Conn) (string, error) {
		p, err := c.Create(node, data, zk.FlagEphemeral, e.zs.ACL())
		return p, zksession.Refused("create", node, err)
	}, func(_ string, err error) {
		if err == nil || zksession.IsConnectionError(err) || errors.Is(err, zk.ErrSessionExpired) {
			e.zs.GuaranteedDeleteIfData(ep, node, data)
		}
	})
	return err
}

// fixedExists handles an existing (or unknown) fixed node: it adopts the node
// if it is ours (our data, our session) and reports held; deletes it if it is
// ours on another session; otherwise waits for its deletion (or returns
// ErrBusy for a try). held == false means: try to create again.
func (a *attempt) fixedExists() (held bool, err error) {
	e := a.e
	var data []byte
	var st *zk.Stat
	var w *zksession.Watch
	err = e.zs.Retry(a.ctx, a.ep, func(c *zk.Conn) error {
		var err error
		if a.try {
			// A try-acquire never sets a watch it will not wait on.
			data, st, err = c.Get(a.fixed)
			return zksession.Refused("read", a.fixed, err)
		}
		data, st, w, err = e.zs.GetW(a.fixed)
		return zksession.Refused("watch", a.fixed, err)
	})
	if errors.Is(err, zk.ErrNoNode) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if bytes.Equal(data, a.data) {
		if st.EphemeralOwner == a.ep.SessionID() && a.ep.Err() == nil {
			a.node, a.name, a.czxid = a.fixed, a.fixed[strings.LastIndexByte(a.fixed, '/')+1:], st.Czxid
			if e.cfg.nodeWatch {
				a.self = w // nil for a try-acquire: armed when granted
			}
			e.log().Debug("adopted our node after a lost create reply", zap.String("node", a.name))
			return true, nil
		}
		// Ours, but created on another session (or our epoch is over):
		// delete it while it still carries our data, then create again.
		return false, e.zs.Retry(a.ctx, a.ep, deleteFixedOp(a.ep.SessionID(), a.fixed, a.data, 0))
	}
	if a.try {
		return false, ErrBusy
	}
	if ce := e.check(zap.DebugLevel, "waiting"); ce != nil {
		ce.Write(zap.String("node", a.fixed))
	}
	select {
	case ev, ok := <-w.Events():
		w.Event(ev, ok)
		return false, nil
	case <-a.ep.Lost():
		return false, a.ep.Err()
	case <-a.ctx.Done():
		return false, context.Cause(a.ctx)
	}
}

// deleteOwned deletes the fixed node only while it is still ours (our data,
// our session): unlike our sequential nodes, whose names are unique, the
// fixed name may by now belong to the next holder. See deleteFixedOp for how
// the read, the checks and the delete fit together.
//
// After ep is over it checks on the current epoch: if our session id came
// back (a Lost declared by the local timer), the node may still be there.
func (e *Engine) deleteOwned(ctx context.Context, ep *zksession.Epoch, node string, data []byte) error {
	on := ep
	if ep.Err() != nil {
		cur, err := e.zs.WaitConnected(ctx)
		if err != nil {
			return err
		}
		if cur.SessionID() != ep.SessionID() {
			return nil // the server removed the ephemerals of ep's session
		}
		on = cur
	}
	return e.zs.Retry(ctx, on, deleteFixedOp(on.SessionID(), node, data, ep.SessionID()))
}

// deleteFixedOp returns a Retry op that deletes the fixed node while it
// carries data (unique to one acquire) and, with owner != 0, while its
// ephemeralOwner is owner. A missing or foreign node counts as done.
//
// The read and the delete are two requests; the delete is conditional on the
// version read, so only a third party deleting our node and another
// participant recreating it between the two (within one round trip) could
// fool it. A second danger is go-zookeeper itself: a request still queued
// when the connection drops is sent on the next connection, which may belong
// to a NEW session (HAZARDS), and there a delete of version 0 would remove
// the next holder's node of the same name. So right before the delete the op
// checks that go-zookeeper is connected on session sid (the session Retry
// runs on); otherwise it returns a connection error and Retry waits for the
// connection and reads again. What remains is a delete queued in the instant
// between that check and the connection dropping (see the package
// documentation).
func deleteFixedOp(sid int64, node string, data []byte, owner int64) func(c *zk.Conn) error {
	return func(c *zk.Conn) error {
		for {
			got, st, err := c.Get(node)
			if errors.Is(err, zk.ErrNoNode) {
				return nil
			}
			if err != nil {
				return zksession.Refused("read", node, err)
			}
			if !bytes.Equal(got, data) || (owner != 0 && st.EphemeralOwner != owner) {
				return nil
			}
			if err := onSession(c, sid); err != nil {
				return err
			}
			err = c.Delete(node, st.Version)
			if errors.Is(err, zk.ErrBadVersion) {
				continue // changed under us: look again
			}
			if errors.Is(err, zk.ErrNoNode) {
				return nil
			}
			return zksession.Refused("delete", node, err)
		}
	}
}

// onSession returns nil if go-zookeeper is connected on session sid right
// now (its own state, not the Session's view, which lags behind by one event),
// else an error matching zk.ErrConnectionClosed, which Retry retries after the
// connection is up again on its epoch.
func onSession(c *zk.Conn, sid int64) error {
	if st, id := c.State(), c.SessionID(); st != zk.StateHasSession || id != sid {
		return fmt.Errorf("%w: not sent: the connection is %v on session 0x%x, want 0x%x", zk.ErrConnectionClosed, st, id, sid)
	}
	return nil
}

// deleteOwnedPersist runs deleteOwned until it is done, our epoch ends (the
// server then removes the node), or Close was called and the cleanup timeout
// passed; connection errors are retried after a pause even when the
// session's retry policy gives up. A fixed node never goes to the session's
// guaranteed-delete queue, which deletes unconditionally. It returns the
// error only when ZooKeeper refuses the delete (e.g. zk.ErrNoAuth), without
// logging it: the caller reports it.
func (e *Engine) deleteOwnedPersist(ep *zksession.Epoch, node string, data []byte) error {
	ctx, cancel := e.untilClosed()
	defer cancel()
	d := armPauseMin
	for {
		err := e.deleteOwned(ctx, ep, node, data)
		switch {
		case err == nil, errors.Is(err, zksession.ErrClosed):
			return nil
		case errors.Is(err, zksession.ErrLost), ctx.Err() != nil:
			// Our epoch is over, or Close came while the connection was
			// down. A Lost declared by the local timer may see the same
			// session come back with the node still there: the session's
			// durable queue deletes it (while it carries our data) if so,
			// for as long as that session lives.
			e.zs.GuaranteedDeleteIfData(ep, node, data)
			return nil
		case zksession.IsConnectionError(err):
			// The retry policy gave up; the next deleteOwned waits for the
			// connection again.
			_ = pause(ctx, d)
			d = min(2*d, armPauseMax)
			continue
		}
		return e.errf(err)
	}
}
