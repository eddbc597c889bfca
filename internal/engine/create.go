package engine

// Creating our node: the recipe directory, the create pipelined with the
// first read of the children, and the recovery of a create whose reply was
// lost (the ghost node).

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"

	"github.com/go-zookeeper/zk"
	"go.uber.org/zap"

	"github.com/zkrecipes/zkrecipes/internal/zksession"
)

// ensureDir makes sure the recipe directory exists (container nodes), once.
func (e *Engine) ensureDir(ctx context.Context) error {
	if e.dirReady.Load() {
		return nil
	}
	ep, err := e.zs.WaitConnected(ctx)
	if err != nil {
		return err
	}
	var ok bool
	var st *zk.Stat
	err = e.zs.Retry(ctx, ep, func(c *zk.Conn) error {
		var err error
		ok, st, err = c.Exists(e.path)
		return err
	})
	if err != nil && !errors.Is(err, zksession.ErrLost) {
		return err
	}
	if ok {
		e.checkDirData(st)
	} else if err := e.zs.EnsureContainers(ctx, e.path); err != nil {
		return err
	}
	e.dirReady.Store(true)
	return nil
}

// checkDirData turns the directory's setData off (WithMultiCreate(true),
// placed and counted nodes) for a directory that holds data (the setData
// would overwrite it).
func (e *Engine) checkDirData(st *zk.Stat) {
	if st != nil && st.DataLength > 0 && !e.noMulti.Swap(true) {
		e.log().Info("the recipe directory holds data: nodes are created without a setData on it")
	}
}

// createNode creates a contender node and returns its path and, when it can
// without another request, its czxid (else 0).
//
// go-zookeeper v1.0.4 has no create2 and returns only the path of a create;
// the session reads the czxid from the create's reply header
// (zksession.Session.CreatedZxid), so a plain create costs no extra request.
// With WithMultiCreate(true) the create is sent as a multi with a setData of
// empty data on the recipe directory (whose data is empty: engines and
// Curator store nothing there; sent as empty data, never a null, as is nil
// data of our node: see zksession.NodeData): one transaction, so the
// directory's new mzxid, in the setData's Stat, is our node's czxid. If the
// directory holds data, or the setData is refused (an ACL without WRITE on
// the directory), that mode falls back to a plain create.
func (e *Engine) createNode(conn *zk.Conn, p string, data []byte, flags int32) (string, int64, error) {
	acl := e.zs.ACL()
	data = zksession.NodeData(data)
	if e.cfg.create == createMulti && !e.noMulti.Load() {
		ops := []any{
			&zk.CreateRequest{Path: p, Data: data, Acl: acl, Flags: flags},
			&zk.SetDataRequest{Path: e.path, Data: zksession.NodeData(nil), Version: -1},
		}
		res, err := conn.Multi(ops...)
		if err == nil && len(res) == 2 && res[1].Stat != nil {
			return res[0].String, res[1].Stat.Mzxid, nil
		}
		if len(res) == 2 && errors.Is(res[1].Error, zk.ErrNoAuth) && !errors.Is(res[0].Error, zk.ErrNoAuth) {
			if !e.noMulti.Swap(true) {
				e.log().Info("no WRITE permission on the recipe directory: creating nodes with a plain create")
			}
		} else {
			return "", 0, refusedMulti(ops, res, err)
		}
	}
	path, err := conn.Create(p, data, flags, acl)
	if err != nil {
		return "", 0, zksession.Refused("create", p, err)
	}
	return path, e.zs.CreatedZxid(p), nil
}

// listOp is the children read that createAndList pipelines with the create
// (zksession.StartOp): the first is kept in the attempt, so that it costs no
// closure; a later one (after creating a missing directory) is made anew,
// since a read left behind may still be writing to the first.
type listOp struct {
	e    *Engine
	kids []string
	stat *zk.Stat

	// A gated read waits until the wire has written its create, or the
	// create has ended (zksession.GateCreate): sent is held locked until
	// then. Whoever takes the gate out of the wire's book unlocks it: the
	// wire, or the create once it has ended.
	sent sync.Mutex
}

// gate makes Run wait for the wire to write the create of path; the create
// itself opens the gate when it ends (createOp), whatever the outcome.
func (op *listOp) gate(zs *zksession.Session, path string) {
	op.sent.Lock()
	zs.GateCreate(path, op)
}

// CreateSent opens the gate: the create is written, and a request sent now
// goes behind it.
func (op *listOp) CreateSent() { op.sent.Unlock() }

// openGate opens the gate of a create of path that ended (or will never be
// sent), if the wire has not.
func (op *listOp) openGate(zs *zksession.Session, path string) {
	if zs.UngateCreate(path) {
		op.sent.Unlock()
	}
}

// Run reads the children, behind the create.
func (op *listOp) Run(c *zk.Conn) error {
	if op.sent.TryLock() {
		// Not gated (or let go already): let the create be queued first;
		// if this read still wins, our node is missing from it and we read
		// again.
		op.sent.Unlock()
		runtime.Gosched()
	} else {
		op.sent.Lock() // the gate
		op.sent.Unlock()
	}
	kids, st, err := c.Children(op.e.path)
	op.kids, op.stat = kids, st
	return err
}

// Late drops the result of a read left behind.
func (op *listOp) Late(error) { op.kids, op.stat = nil, nil }

// createAndList creates our protected node (base: see newNodeBase), recovering
// from lost replies,
// and, on the first try and after creating a missing directory, reads the
// directory in parallel: go-zookeeper sends
// requests in order on one connection and the server answers a session's
// requests in order, so a children list read after the create already
// contains our node (recognised by our UUID) and the first decision costs no
// extra round trip.
func (a *attempt) createAndList(base string) error {
	e := a.e
	pipelined := true
	for tries := 0; ; tries++ {
		if tries > 10 {
			return fmt.Errorf("create %s: giving up after %d tries", base, tries)
		}
		if err := a.ep.Err(); err != nil {
			return err
		}
		if err := a.ctx.Err(); err != nil {
			return err
		}
		var listed zksession.Started
		var lop, gate *listOp
		if pipelined {
			pipelined = false
			lop = &a.lop
			if tries > 0 {
				lop = &listOp{}
			}
			lop.e = e
			// A plain create tells the read when it is written (a multi
			// is not recognised on the wire: the read goes as it can).
			if a.d.Anchor == "" && (e.cfg.create != createMulti || e.noMulti.Load()) {
				lop.gate(e.zs, base)
				gate = lop
			}
			var err error
			if listed, err = zksession.StartOp(e.zs, lop); err != nil {
				if gate != nil {
					gate.openGate(e.zs, base)
					gate = nil
				}
				lop = nil
			}
		}
		a.cop.gate = gate
		created, czxid, err := a.create(base)
		switch {
		case err == nil:
			if err2 := a.ownCreate(created); err2 != nil {
				return err2
			}
			a.czxid = czxid
			if lop != nil {
				// If ctx ends first, the read is left behind: the next
				// step fails on ctx.
				if err, ended := listed.Wait(a.ctx); ended {
					if err == nil && contains(lop.kids, a.name) {
						a.kids = lop.kids
						e.checkDirData(lop.stat)
					}
					lop.kids, lop.stat = nil, nil // a waiter keeps no snapshot here
				}
			}
			return nil
		case errors.Is(err, zk.ErrNoNode):
			// The directory does not exist: a new key, or a container the
			// server reaped while the lock was idle. Create it (from the
			// bottom up: under an existing parent, one request) and try
			// again, with the read pipelined again.
			e.dirReady.Store(false)
			if err2 := e.zs.CreateContainers(a.ctx, e.path); err2 != nil {
				return err2
			}
			e.dirReady.Store(true)
			pipelined = true
		case zksession.IsConnectionError(err):
			e.zs.NoteRetry(err)
			a.ghosts = true
			found, gerr := a.findGhost()
			if gerr != nil {
				return gerr
			}
			if found {
				return nil
			}
		case errors.Is(err, zk.ErrSessionExpired):
			return errSessionLost(err)
		default:
			return err
		}
	}
}

// createOp is an attempt's create on a worker of the session
// (zksession.CallOp): the request, its result and what its late end needs,
// kept in the attempt (see create), so that a create costs no closure.
type createOp struct {
	a      *attempt
	base   string
	ep     *zksession.Epoch
	prefix string

	// Run's result, read by create only after a CallOp that ended.
	path  string
	czxid int64

	// gate is the read pipelined behind this create, if any, to be let go
	// once the create has ended (see listOp.gate).
	gate *listOp

	mu      sync.Mutex
	settled chan struct{} // made by the first to need it (see settledChan)
}

// Run sends the create (see attempt.create).
func (op *createOp) Run(c *zk.Conn) error {
	p, z, err := op.a.createOn(c, op.base)
	op.path, op.czxid = p, z
	op.endGate()
	return err
}

// endGate lets the read pipelined behind the create go, if the wire has not
// (the create ended, or never started).
func (op *createOp) endGate() {
	if g := op.gate; g != nil {
		op.gate = nil
		g.openGate(op.a.e.zs, op.base)
	}
}

// Late settles a create whose caller has left (see attempt.create).
func (op *createOp) Late(err error) {
	op.endGate() // Run never started, or has ended
	settled := op.settledChan()
	if err == nil || zksession.IsConnectionError(err) || errors.Is(err, zk.ErrSessionExpired) {
		swept := op.a.e.zs.GuaranteedSweep(op.ep, op.a.e.path, op.prefix)
		go func() {
			<-swept
			close(settled)
		}()
		return
	}
	close(settled)
}

// settledChan returns the channel closed once a left create is settled,
// made at its first use: by Late, or by create when it left the request.
func (op *createOp) settledChan() chan struct{} {
	op.mu.Lock()
	defer op.mu.Unlock()
	if op.settled == nil {
		op.settled = make(chan struct{})
	}
	return op.settled
}

// create sends our protected create and waits for it within the attempt's
// ctx, the only bound (zksession.CallOp). If ctx ends first, the request goes
// on without us, and once it has completed the session's queue sweeps the
// directory for our UUID, whatever the outcome: a late success leaves a node
// nobody waits on, and a connection error may have left a ghost. The attempt
// then keeps a channel (lateCreate) closed once that is settled, which fail
// waits for as for its own deletes, and so does Close: a node that a Close
// raced with the create's reply is gone when Close returns. The request is
// the attempt's createOp: an attempt sends a create only after the last one
// ended (one left behind ends the attempt).
func (a *attempt) create(base string) (string, int64, error) {
	op := &a.cop
	op.a, op.base, op.ep, op.prefix = a, base, a.ep, a.protectedPrefix()
	op.path, op.czxid = "", 0
	err, ended := zksession.CallOp(a.ctx, a.e.zs, op)
	if !ended {
		if ce := a.ctx.Err(); ce != nil && err == ce {
			// CallOp left the request behind (an answer it had would
			// have been returned instead), or never sent it: Late runs,
			// and in the second case has run already.
			a.lateCreate = op.settledChan()
		}
		return "", 0, err
	}
	// Ended: Late will not run. Keep nothing of the request while we wait.
	op.base, op.prefix, op.ep = "", "", nil
	return op.path, op.czxid, err
}

// ownCreate checks that a successful create ran on our epoch's session:
// requests queued while disconnected may be sent on a NEW session after the
// old one expired (see HAZARDS; answeredOnOurSession). Otherwise the node is
// deleted and the attempt fails.
func (a *attempt) ownCreate(created string) error {
	name := created[strings.LastIndexByte(created, '/')+1:]
	c, ok := parseChild(name, []string{a.d.Marker})
	if !ok {
		return fmt.Errorf("create returned unexpected name %q", created)
	}
	if !a.answeredOnOurSession() || a.ep.Err() != nil {
		// It landed on another session: the sweep (see fail) deletes it,
		// on whichever session is current.
		a.ghosts = true
		return errSessionChanged(a.ep)
	}
	a.node, a.name, a.seq = created, name, c.Seq
	if u := len(protectedMarker); len(name) > u+len(a.uuid) && name[:u] == protectedMarker &&
		name[u:u+len(a.uuid)] == a.uuid && name[u+len(a.uuid)] == '-' {
		// Share the node name's copy of the UUID and the prefix: a waiter
		// keeps less.
		a.uuid = name[u : u+len(a.uuid)]
		a.prefix = name[:u+len(a.uuid)+1]
	}
	return nil
}

// answeredOnOurSession reports, right after a reply, whether it came on the
// attempt's session: the connection's session id can only move forward, so
// if it still equals the epoch's after the reply, the request ran on it.
func (a *attempt) answeredOnOurSession() bool {
	return a.e.zs.Conn().SessionID() == a.ep.SessionID()
}

// findGhost looks for our node after a create whose outcome is unknown. It
// adopts it only if its ephemeralOwner is our (live) session; a node of ours
// owned by another session is deleted. It reports whether we now have a node.
func (a *attempt) findGhost() (bool, error) {
	e := a.e
	prefix := a.protectedPrefix()
	var kids []string
	err := e.zs.Retry(a.ctx, a.ep, func(c *zk.Conn) error {
		var err error
		kids, _, err = c.Children(e.path)
		return zksession.Refused("list", e.path, err)
	})
	if errors.Is(err, zk.ErrNoNode) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	for _, k := range kids {
		if !strings.HasPrefix(k, prefix) {
			continue
		}
		p := e.path + "/" + k
		var ok bool
		var ks *zk.Stat
		err := e.zs.Retry(a.ctx, a.ep, func(c *zk.Conn) error {
			var err error
			ok, ks, err = c.Exists(p)
			return err
		})
		if err != nil {
			return false, err
		}
		if !ok {
			continue
		}
		if ks.EphemeralOwner == a.ep.SessionID() && a.ep.Err() == nil {
			c, parsed := parseChild(k, []string{a.d.Marker})
			if !parsed {
				continue
			}
			a.node, a.name, a.seq, a.czxid = p, k, c.Seq, ks.Czxid
			a.kids = kids
			e.log().Debug("adopted node after a lost create reply", zap.String("node", k))
			return true, nil
		}
		e.log().Warn("deleting our node created on another session", zap.String("node", k),
			zap.String("owner", fmt.Sprintf("0x%x", ks.EphemeralOwner)))
		err = e.zs.Retry(a.ctx, a.ep, func(c *zk.Conn) error {
			err := c.Delete(p, ks.Version)
			if errors.Is(err, zk.ErrNoNode) {
				return nil
			}
			return zksession.Refused("delete", p, err)
		})
		if err != nil {
			return false, err
		}
	}
	// Not found: the create never reached the server. (Had it reached it,
	// the read would show it: the server orders a session's requests, across
	// its connections, and closes the old connection when the session
	// reconnects.)
	return false, nil
}

func contains(names []string, name string) bool {
	for _, n := range names {
		if n == name {
			return true
		}
	}
	return false
}

// errSessionChanged reports a node created on a session other than ep's.
func errSessionChanged(ep *zksession.Epoch) error {
	if err := ep.Err(); err != nil {
		return fmt.Errorf("%w: %w", zksession.ErrSessionChanged, err)
	}
	return zksession.ErrSessionChanged
}

// errSessionLost wraps zk.ErrSessionExpired so that it matches zksession.ErrLost.
func errSessionLost(err error) error {
	return fmt.Errorf("%w: %w", zksession.ErrLost, err)
}
