package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/go-zookeeper/zk"
	"go.uber.org/zap"

	"github.com/zkrecipes/zkrecipes/internal/zksession"
)

// Counted leases: the engine side of Curator's InterProcessSemaphoreV2
// layout, where a lease holds when the lease directory has at most a maximum
// number of children, and acquirers are serialised by a fair mutex in a
// sibling directory (the guard). See package semaphore for the algorithm.

// ErrGuardLost is returned by AcquireCounted when the guard lease has ended
// or its node is gone: nothing was created. It wraps the guard's cause when
// the guard's lease ended (zksession.ErrSuspended, zksession.ErrLost, ...).
var ErrGuardLost = errors.New("guard lost")

// CountedSpec describes one AcquireCounted transaction.
type CountedSpec struct {
	// Marker is the base name of our nodes: they are named
	// "_c_<uuid>-" + Marker + sequence (Curator's "lease-").
	Marker string
	// Data is every node's data (the participant id).
	Data []byte
	// N is how many nodes (leases) to create, all or none; at least 1.
	N int
	// Max is the most children the directory may have, ours included, right
	// after our create for the leases to be granted; at least 0.
	Max int
	// Guard, if not nil, is a held lease of this session whose node the same
	// transaction deletes (the semaphore's acquirer mutex): the create happens
	// only while the guard's node exists, and releases it. The guard's
	// Engine should not watch its nodes (WithNodeWatch(false)). Once the
	// transaction has run the guard is released (Err is ErrReleased) whatever
	// AcquireCounted returns; otherwise the caller still owns it.
	Guard *Lease
}

// AcquireCounted creates spec.N protected EPHEMERAL_SEQUENTIAL nodes in the
// recipe directory in one transaction (a multi) together with an empty
// setData on the directory and, with a guard, the delete of the guard's node.
// The setData's Stat is the directory right after our creates: its
// NumChildren is the count the leases are decided on (the count of every
// child, as Curator's semaphore counts), atomically, and its Mzxid is our
// nodes' czxid (the fencing token, shared by the N leases). When that count
// is at most spec.Max the N leases are granted; otherwise our nodes are
// deleted and the error matches ErrBusy. It never waits for a change of
// the directory: the caller waits (holding its guard) and calls it when it
// expects room.
//
// When the directory holds data, or the session may not write it, the
// transaction has no setData, and the decision falls back to Curator's own
// rule: the children are read after the create (one more request, and one
// per node for its czxid).
//
// A transaction whose reply is lost is recovered as a protected create is:
// the directory is listed and our nodes (found by their UUIDs, owned by our
// live session) adopted, deciding on that listing; a transaction that did
// not reach the server is sent again. Errors: ErrGuardLost (the guard's
// node is gone or its lease ended; nothing was created), ErrBusy,
// ctx's error, ErrClosed, zksession.ErrLost and ZooKeeper errors; on every
// failure our nodes are deleted before it returns (as Acquire's are). ctx
// bounds everything. Safe for concurrent use.
func (e *Engine) AcquireCounted(ctx context.Context, spec CountedSpec) ([]*Lease, error) {
	if ctx == nil {
		return nil, e.errf(fmt.Errorf("%w: nil context", ErrBadArgument))
	}
	d := Standard(spec.Marker, 1)
	if err := checkDriver(d); err != nil {
		return nil, e.errf(err)
	}
	if spec.N < 1 || spec.Max < 0 {
		return nil, e.errf(fmt.Errorf("%w: counted acquire of %d nodes with at most %d", ErrBadArgument, spec.N, spec.Max))
	}
	if g := spec.Guard; g != nil && g.e.zs != e.zs {
		return nil, e.errf(fmt.Errorf("%w: guard of another session", ErrBadArgument))
	}
	c := &counted{e: e, spec: spec, d: d, user: ctx}
	if err := e.begin(ctx, &c.scope); err != nil {
		return nil, err
	}
	defer e.end(&c.scope)
	return c.run()
}

// counted is one AcquireCounted in progress: one attempt per node, sharing
// the epoch, the lease context and the ctx.
type counted struct {
	scope // ctx: the user's ctx merged with Close
	e     *Engine
	spec  CountedSpec
	d     *Driver
	user  context.Context

	ep     *zksession.Epoch
	lctx   context.Context
	as     []*attempt
	ghosts bool // a transaction's outcome is unknown: our UUIDs are swept on failure
}

func (c *counted) run() ([]*Lease, error) {
	e := c.e
	c.as = make([]*attempt, c.spec.N)
	for i := range c.as {
		c.as[i] = &attempt{scope: scope{ctx: c.ctx}, e: e, d: c.d, data: c.spec.Data, user: c.user, try: true, uuid: NewUUID()}
	}
	if err := c.as[0].connect(); err != nil {
		return nil, c.fail(err)
	}
	c.ep, c.lctx = c.as[0].ep, c.as[0].lctx
	for _, a := range c.as {
		a.ep, a.lctx = c.ep, c.lctx
	}
	if err := c.checkGuard(); err != nil {
		return nil, c.fail(err)
	}
	if err := e.ensureDir(c.ctx); err != nil {
		return nil, c.fail(err)
	}
	count, err := c.createAll()
	if err != nil {
		return nil, c.fail(err)
	}
	if count > c.spec.Max {
		return nil, c.fail(fmt.Errorf("%w: %d children after our create, at most %d may hold", ErrBusy, count, c.spec.Max))
	}
	return c.grantAll()
}

// checkGuard fails when the guard's lease has ended or belongs to another
// epoch than ours.
func (c *counted) checkGuard() error {
	g := c.spec.Guard
	if g == nil {
		return nil
	}
	if err := g.Err(); err != nil {
		return fmt.Errorf("%w: %w", ErrGuardLost, err)
	}
	if g.ep != c.ep {
		return fmt.Errorf("%w: it belongs to session 0x%x, now 0x%x", ErrGuardLost, g.ep.SessionID(), c.ep.SessionID())
	}
	return nil
}

// ops builds the transaction.
func (c *counted) ops(withStat bool) []any {
	e := c.e
	acl := e.zs.ACL()
	ops := make([]any, 0, len(c.as)+2)
	for _, a := range c.as {
		p := e.path + "/" + ProtectedPrefix(a.uuid) + c.d.Marker
		ops = append(ops, &zk.CreateRequest{Path: p, Data: zksession.NodeData(c.spec.Data), Acl: acl, Flags: zk.FlagEphemeralSequential})
	}
	if withStat {
		ops = append(ops, &zk.SetDataRequest{Path: e.path, Data: zksession.NodeData(nil), Version: -1})
	}
	if g := c.spec.Guard; g != nil {
		ops = append(ops, &zk.DeleteRequest{Path: g.node, Version: -1})
	}
	return ops
}

// createAll runs the transaction until it has run (then it returns the
// count to decide on) or failed for good.
func (c *counted) createAll() (int, error) {
	e := c.e
	n := len(c.as)
	for tries := 0; ; tries++ {
		if tries > 10 {
			return 0, fmt.Errorf("counted create in %s: giving up after %d tries", e.path, tries)
		}
		if err := c.ep.Err(); err != nil {
			return 0, err
		}
		if err := c.ctx.Err(); err != nil {
			return 0, err
		}
		if err := c.checkGuard(); err != nil {
			return 0, err
		}
		withStat := !e.noMulti.Load()
		ops := c.ops(withStat)
		ep, dir, prefixes := c.ep, e.path, c.prefixes()
		res, err := zksession.Call(c.ctx, e.zs, func(conn *zk.Conn) ([]zk.MultiResponse, error) {
			return conn.Multi(ops...)
		}, func(_ []zk.MultiResponse, err error) {
			// We left before the reply: whatever was created is nobody's.
			if err == nil || zksession.IsConnectionError(err) || errors.Is(err, zk.ErrSessionExpired) {
				for _, p := range prefixes {
					e.zs.GuaranteedSweep(ep, dir, p)
				}
			}
		})
		switch {
		case err == nil:
			return c.created(res, withStat)
		case zksession.IsConnectionError(err):
			e.zs.NoteRetry(err)
			c.ghosts = true
			applied, count, gerr := c.findGhosts()
			if gerr != nil {
				return 0, gerr
			}
			if applied {
				return count, nil
			}
			// It never reached the server: send it again.
		case errors.Is(err, zk.ErrSessionExpired):
			return 0, errSessionLost(err)
		default:
			i := failedOp(res)
			switch {
			case i >= 0 && i < n && errors.Is(res[i].Error, zk.ErrNoNode):
				// The directory is gone (a container reaped when empty).
				e.dirReady.Store(false)
				if err2 := e.ensureDir(c.ctx); err2 != nil {
					return 0, err2
				}
			case withStat && i == n && errors.Is(res[i].Error, zk.ErrNoAuth):
				if !e.noMulti.Swap(true) {
					e.log().Info("no WRITE permission on the recipe directory: deciding counted leases on a children read (one more request per acquire)")
				}
			case c.spec.Guard != nil && i >= 0 && i == len(res)-1 && errors.Is(res[i].Error, zk.ErrNoNode):
				return 0, fmt.Errorf("%w: its node %s is gone", ErrGuardLost, c.spec.Guard.Node())
			default:
				return 0, refusedMulti(ops, res, err)
			}
		}
	}
}

// prefixes returns our protected prefixes.
func (c *counted) prefixes() []string {
	out := make([]string, len(c.as))
	for i, a := range c.as {
		out[i] = ProtectedPrefix(a.uuid)
	}
	return out
}

// failedOp returns the index of the operation that failed a transaction, or
// -1. The server answers the operations before it with no error, and those
// after it with a runtime-inconsistency error.
func failedOp(res []zk.MultiResponse) int {
	for i, r := range res {
		if r.Error != nil {
			return i
		}
	}
	return -1
}

// created takes the results of a transaction that ran.
func (c *counted) created(res []zk.MultiResponse, withStat bool) (int, error) {
	c.guardGone()
	if len(res) < len(c.as) {
		c.ghosts = true
		return 0, fmt.Errorf("counted create in %s: %d results for %d nodes", c.e.path, len(res), len(c.as))
	}
	for i, a := range c.as {
		if err := a.ownCreate(res[i].String); err != nil {
			// Another session's nodes (see ownCreate): the sweep deletes them.
			c.ghosts = true
			return 0, err
		}
	}
	if withStat && len(res) > len(c.as) && res[len(c.as)].Stat != nil {
		st := res[len(c.as)].Stat
		for _, a := range c.as {
			a.czxid = st.Mzxid
		}
		return int(st.NumChildren), nil
	}
	return c.countAfter()
}

// guardGone releases the guard lease once a transaction deleting its node
// has run.
func (c *counted) guardGone() {
	if g := c.spec.Guard; g != nil {
		g.forget()
	}
}

// countAfter reads the directory after our create and returns its count of
// children (Curator's rule), reading our nodes' czxids as well when unknown.
func (c *counted) countAfter() (int, error) {
	e := c.e
	var kids []string
	err := e.zs.Retry(c.ctx, c.ep, func(conn *zk.Conn) error {
		var err error
		kids, _, err = conn.Children(e.path)
		return zksession.Refused("list", e.path, err)
	})
	if errors.Is(err, zk.ErrNoNode) {
		kids = nil
	} else if err != nil {
		return 0, err
	}
	for _, a := range c.as {
		if !contains(kids, a.name) {
			if err2 := c.ep.Err(); err2 != nil {
				return 0, err2
			}
			a.node = ""
			return 0, fmt.Errorf("%w: %s", ErrNodeDeleted, a.name)
		}
	}
	for _, a := range c.as {
		if a.czxid == 0 {
			if err := a.statSelf(false); err != nil {
				return 0, err
			}
		}
	}
	return len(kids), nil
}

// findGhosts looks for our nodes after a transaction whose reply was lost.
// A transaction is atomic: either every node is there (applied: it returns
// the count of the listing, read after the create) or none is (not applied,
// unless a third party deleted ours). A node of ours owned by another
// session is deleted.
func (c *counted) findGhosts() (applied bool, count int, err error) {
	e := c.e
	var kids []string
	err = e.zs.Retry(c.ctx, c.ep, func(conn *zk.Conn) error {
		var err error
		kids, _, err = conn.Children(e.path)
		return zksession.Refused("list", e.path, err)
	})
	if errors.Is(err, zk.ErrNoNode) {
		return false, 0, nil
	}
	if err != nil {
		return false, 0, err
	}
	found := 0
	for _, a := range c.as {
		prefix := ProtectedPrefix(a.uuid)
		for _, k := range kids {
			if !strings.HasPrefix(k, prefix) {
				continue
			}
			p := e.path + "/" + k
			var ok bool
			var st *zk.Stat
			err := e.zs.Retry(c.ctx, c.ep, func(conn *zk.Conn) error {
				var err error
				ok, st, err = conn.Exists(p)
				return err
			})
			if err != nil {
				return false, 0, err
			}
			if !ok {
				continue
			}
			if st.EphemeralOwner == c.ep.SessionID() && c.ep.Err() == nil {
				ch, parsed := parseChild(k, []string{c.d.Marker})
				if !parsed {
					continue
				}
				a.node, a.name, a.seq, a.czxid = p, k, ch.Seq, st.Czxid
				found++
				break
			}
			e.log().Warn("deleting our node created on another session", zap.String("node", k),
				zap.String("owner", fmt.Sprintf("0x%x", st.EphemeralOwner)))
			err = e.zs.Retry(c.ctx, c.ep, func(conn *zk.Conn) error {
				err := conn.Delete(p, st.Version)
				if errors.Is(err, zk.ErrNoNode) {
					return nil
				}
				return zksession.Refused("delete", p, err)
			})
			if err != nil {
				return false, 0, err
			}
		}
	}
	switch found {
	case 0:
		return false, 0, nil
	case len(c.as):
		e.log().Debug("adopted our nodes after a lost transaction reply", zap.Int("nodes", found))
		c.guardGone()
		return true, len(kids), nil
	}
	c.guardGone()
	return false, 0, fmt.Errorf("%w: %d of our %d nodes are gone", ErrNodeDeleted, len(c.as)-found, len(c.as))
}

// grantAll grants a lease per node, or releases them all.
func (c *counted) grantAll() ([]*Lease, error) {
	if err := c.lctx.Err(); err != nil || c.ep.Err() != nil {
		// Suspended (or lost) since the lease context was captured, before
		// the transaction was sent: never grant now.
		if err2 := c.ep.Err(); err2 != nil {
			return nil, c.fail(err2)
		}
		return nil, c.fail(context.Cause(c.lctx))
	}
	if err := c.ctx.Err(); err != nil {
		// Won just as ctx ended (or Close): release, report ctx.
		return nil, c.fail(err)
	}
	ls := make([]*Lease, 0, len(c.as))
	for i, a := range c.as {
		l, err := c.e.grant(a) // on failure grant has deleted a's node
		if err != nil {
			for _, l := range ls {
				rctx, cancel := context.WithTimeout(context.WithoutCancel(c.user), c.e.cfg.cleanupTimeout)
				_ = l.Release(rctx)
				cancel()
			}
			for _, rest := range c.as[i+1:] {
				rest.fail(err)
			}
			return nil, err
		}
		ls = append(ls, l)
	}
	return ls, nil
}

// fail deletes our nodes (see attempt.fail) and returns the error to report.
func (c *counted) fail(err error) error {
	var out error
	for _, a := range c.as {
		if c.ghosts {
			a.ghosts = true // the sweep by UUID covers our node too
		}
		out = a.fail(err)
	}
	return out
}

// forget ends the lease as released without deleting its node: a
// transaction of ours has deleted it (AcquireCounted's guard). A lease that
// has already ended keeps its cause.
func (l *Lease) forget() {
	l.relMu.Lock()
	defer l.relMu.Unlock()
	if l.relErr != nil {
		return
	}
	l.relErr = &noErr
	mine := l.e.releasedErr()
	if l.x == nil {
		l.end(mine)
		l.finish()
		return
	}
	claimed := l.claimMonitor()
	l.end(mine)
	l.settleMonitor(claimed, mine)
}
