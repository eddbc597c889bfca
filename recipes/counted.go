package recipes

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/go-zookeeper/zk"
	"go.uber.org/zap"

	"github.com/zkrecipes/zkrecipes/session"
)

// Counted leases: the engine side of Curator's InterProcessSemaphoreV2
// layout, where a lease holds when the lease directory has at most a maximum
// number of children, and acquirers are serialised by a fair mutex in a
// sibling directory (the guard). See package semaphore for the algorithm.

// ErrGuardLost is returned by AcquireCounted when the guard lease has ended
// or its node is gone: nothing was created. It wraps the guard's cause when
// the guard's lease ended (session.ErrSuspended, session.ErrLost, ...).
var ErrGuardLost = errors.New("recipes: guard lost")

// TrustHandoff is an optional interface of a Driver. When TrustHandoff
// returns true, a waiter holds as soon as the node it waits for is deleted
// (the notice of its data watch), without reading the children again and
// without watching its own node: a handoff then costs no request at all. It
// is exact while the queue is left in order; when a waiter in the middle
// gives up (or its session ends), the one behind it holds alongside the
// holder, and a third party's delete of a waiter's node goes unnoticed. Use
// it only for a queue whose exclusion keeps nothing safe, such as the
// semaphore's acquirer mutex: every write its holder makes is a transaction
// that deletes the holder's own node, so it fails as a whole when that node
// is gone, and the lease count is checked in the same transaction.
type TrustHandoff interface {
	TrustHandoff() bool
}

func trustsHandoff(d Driver) bool {
	t, ok := d.(TrustHandoff)
	return ok && t.TrustHandoff()
}

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
// deleted and the error matches ErrWouldBlock. It never waits for a change of
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
// node is gone or its lease ended; nothing was created), ErrWouldBlock,
// ctx's error, ErrClosed, session.ErrLost and ZooKeeper errors; on every
// failure our nodes are deleted before it returns (as Acquire's are). ctx
// bounds everything. Safe for concurrent use.
func (in *Engine) AcquireCounted(ctx context.Context, spec CountedSpec) ([]*Lease, error) {
	if ctx == nil {
		return nil, in.errf(fmt.Errorf("%w: nil context", ErrBadOption))
	}
	d := StandardDriver{Name: spec.Marker}
	if err := checkDriver(d); err != nil {
		return nil, in.errf(err)
	}
	if spec.N < 1 || spec.Max < 0 {
		return nil, in.errf(fmt.Errorf("%w: counted acquire of %d nodes with at most %d", ErrBadOption, spec.N, spec.Max))
	}
	if g := spec.Guard; g != nil && g.in.sess != in.sess {
		return nil, in.errf(fmt.Errorf("%w: guard of another session", ErrBadOption))
	}
	c := &counted{in: in, spec: spec, d: d, user: ctx}
	if err := in.begin(ctx, &c.scope); err != nil {
		return nil, err
	}
	defer in.end(&c.scope)
	return c.run()
}

// counted is one AcquireCounted in progress: one attempt per node, sharing
// the epoch, the lease context and the ctx.
type counted struct {
	scope // ctx: the user's ctx merged with Close
	in    *Engine
	spec  CountedSpec
	d     StandardDriver
	user  context.Context

	ep     *session.Epoch
	lctx   context.Context
	as     []*attempt
	ghosts bool // a transaction's outcome is unknown: our UUIDs are swept on failure
}

func (c *counted) run() ([]*Lease, error) {
	in := c.in
	c.as = make([]*attempt, c.spec.N)
	for i := range c.as {
		c.as[i] = &attempt{scope: scope{ctx: c.ctx}, in: in, d: c.d, data: c.spec.Data, user: c.user, try: true, uuid: NewUUID()}
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
	if err := in.ensureDir(c.ctx); err != nil {
		return nil, c.fail(err)
	}
	count, err := c.createAll()
	if err != nil {
		return nil, c.fail(err)
	}
	if count > c.spec.Max {
		return nil, c.fail(fmt.Errorf("%w: %d children after our create, at most %d may hold", ErrWouldBlock, count, c.spec.Max))
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
	in := c.in
	acl := in.sess.ACL()
	ops := make([]any, 0, len(c.as)+2)
	for _, a := range c.as {
		p := in.path + "/" + ProtectedPrefix(a.uuid) + c.d.Name
		ops = append(ops, &zk.CreateRequest{Path: p, Data: c.spec.Data, Acl: acl, Flags: zk.FlagEphemeralSequential})
	}
	if withStat {
		ops = append(ops, &zk.SetDataRequest{Path: in.path, Data: nil, Version: -1})
	}
	if g := c.spec.Guard; g != nil {
		ops = append(ops, &zk.DeleteRequest{Path: g.node, Version: -1})
	}
	return ops
}

// createAll runs the transaction until it has run (then it returns the
// count to decide on) or failed for good.
func (c *counted) createAll() (int, error) {
	in := c.in
	n := len(c.as)
	for tries := 0; ; tries++ {
		if tries > 10 {
			return 0, fmt.Errorf("counted create in %s: giving up after %d tries", in.path, tries)
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
		withStat := !in.noMulti.Load()
		ops := c.ops(withStat)
		ep, dir, prefixes := c.ep, in.path, c.prefixes()
		res, err := session.Call(c.ctx, in.sess, func(conn *zk.Conn) ([]zk.MultiResponse, error) {
			return conn.Multi(ops...)
		}, func(_ []zk.MultiResponse, err error) {
			// We left before the reply: whatever was created is nobody's.
			if err == nil || session.IsConnectionError(err) || errors.Is(err, zk.ErrSessionExpired) {
				for _, p := range prefixes {
					in.sess.Toolkit().GuaranteedSweep(ep, dir, p)
				}
			}
		})
		switch {
		case err == nil:
			return c.created(res, withStat)
		case session.IsConnectionError(err):
			c.ghosts = true
			applied, count, e := c.findGhosts()
			if e != nil {
				return 0, e
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
				in.dirReady.Store(false)
				if e := in.ensureDir(c.ctx); e != nil {
					return 0, e
				}
			case withStat && i == n && errors.Is(res[i].Error, zk.ErrNoAuth):
				if !in.noMulti.Swap(true) {
					in.lg.Info("no WRITE permission on the recipe directory: deciding counted leases on a children read (one more request per acquire)")
				}
			case c.spec.Guard != nil && i >= 0 && i == len(res)-1 && errors.Is(res[i].Error, zk.ErrNoNode):
				return 0, fmt.Errorf("%w: its node %s is gone", ErrGuardLost, c.spec.Guard.name)
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
		return 0, fmt.Errorf("counted create in %s: %d results for %d nodes", c.in.path, len(res), len(c.as))
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
	in := c.in
	var kids []string
	err := in.sess.Toolkit().Retry(c.ctx, c.ep, func(conn *zk.Conn) error {
		var err error
		kids, _, err = conn.Children(in.path)
		return session.Refused("list", in.path, err)
	})
	if errors.Is(err, zk.ErrNoNode) {
		kids = nil
	} else if err != nil {
		return 0, err
	}
	for _, a := range c.as {
		if !contains(kids, a.name) {
			if e := c.ep.Err(); e != nil {
				return 0, e
			}
			a.node = ""
			return 0, fmt.Errorf("%w: %s", ErrLockLost, a.name)
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
	in := c.in
	var kids []string
	err = in.sess.Toolkit().Retry(c.ctx, c.ep, func(conn *zk.Conn) error {
		var err error
		kids, _, err = conn.Children(in.path)
		return session.Refused("list", in.path, err)
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
			p := in.path + "/" + k
			var ok bool
			var st *zk.Stat
			err := in.sess.Toolkit().Retry(c.ctx, c.ep, func(conn *zk.Conn) error {
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
				ch, parsed := parseChild(k, []string{c.d.Name})
				if !parsed {
					continue
				}
				a.node, a.name, a.seq, a.czxid = p, k, ch.Seq, st.Czxid
				found++
				break
			}
			in.lg.Warn("deleting our node created on another session", zap.String("node", k),
				zap.String("owner", fmt.Sprintf("0x%x", st.EphemeralOwner)))
			err = in.sess.Toolkit().Retry(c.ctx, c.ep, func(conn *zk.Conn) error {
				err := conn.Delete(p, st.Version)
				if errors.Is(err, zk.ErrNoNode) {
					return nil
				}
				return session.Refused("delete", p, err)
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
		in.lg.Debug("adopted our nodes after a lost transaction reply", zap.Int("nodes", found))
		c.guardGone()
		return true, len(kids), nil
	}
	c.guardGone()
	return false, 0, fmt.Errorf("%w: %d of our %d nodes are gone", ErrLockLost, len(c.as)-found, len(c.as))
}

// grantAll grants a lease per node, or releases them all.
func (c *counted) grantAll() ([]*Lease, error) {
	if err := c.lctx.Err(); err != nil || c.ep.Err() != nil {
		// Suspended (or lost) since the lease context was captured, before
		// the transaction was sent: never grant now.
		if e := c.ep.Err(); e != nil {
			return nil, c.fail(e)
		}
		return nil, c.fail(context.Cause(c.lctx))
	}
	if err := c.ctx.Err(); err != nil {
		// Won just as ctx ended (or Close): release, report ctx.
		return nil, c.fail(err)
	}
	ls := make([]*Lease, 0, len(c.as))
	for i, a := range c.as {
		l, err := c.in.grant(a) // on failure grant has deleted a's node
		if err != nil {
			for _, l := range ls {
				rctx, cancel := context.WithTimeout(context.WithoutCancel(c.user), c.in.cfg.cleanupTimeout)
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
	l.relOnce.Do(func() {
		defer close(l.relDone)
		mine := l.in.errf(ErrReleased)
		claimed := l.claimMonitor()
		l.cancel(mine)
		l.settleMonitor(claimed, mine)
	})
}
