package engine

// Writes guarded by a lease: a transaction whose first operation checks that
// the lease's node still exists, so that the writes commit only while the
// lease holds, whatever its holder believes.

import (
	"context"
	"errors"
	"fmt"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/internal/zksession"
	"github.com/zkrecipes/zkrecipes/recipes"
)

// ErrNotHeld is the error of a guarded write (Commit) whose lease no longer
// holds.
var ErrNotHeld = recipes.ErrNotHeld

// Commit runs ops in one ZooKeeper transaction (a multi) behind a check that
// the lease's node exists: the writes commit only if the node is there on the
// server at that instant, so never after the lease's node was deleted, by its
// session's expiry or by anyone else, whatever this process believes. ops are
// go-zookeeper's *zk.CreateRequest, *zk.SetDataRequest, *zk.DeleteRequest and
// *zk.CheckVersionRequest, with recipe paths (under the session's namespace);
// a create with no ACL gets the session's. It returns the responses to ops,
// in order.
//
// Errors: one matching ErrNotHeld when the lease has ended (with its Err,
// nothing sent) or the server found its node gone (then the lease's Err may
// still be nil: the node watch tells it shortly, or the session's end); the
// error of the first operation ZooKeeper refused (zk.ErrNodeExists,
// zk.ErrBadVersion, ...; nothing committed); ctx's error, or a connection
// error, when the answer did not come: the transaction may then have
// committed or not, and is not sent again. A lease of a fixed node (NonFair)
// cannot guard writes (its name is reused by every holder, and ZooKeeper's
// check compares versions only): ErrBadArgument. Safe for concurrent use.
func (l *Lease) Commit(ctx context.Context, ops ...any) ([]zk.MultiResponse, error) {
	if l == nil {
		return nil, errNilLease()
	}
	if ctx == nil {
		return nil, l.e.errf(fmt.Errorf("%w: nil context", ErrBadArgument))
	}
	if l.x != nil && l.x.fixed != nil {
		return nil, l.e.errf(fmt.Errorf("%w: the lease of a fixed node cannot guard writes: every holder's node has the same name", ErrBadArgument))
	}
	multi := make([]any, 0, len(ops)+1)
	multi = append(multi, &zk.CheckVersionRequest{Path: l.node, Version: -1})
	for i, op := range ops {
		g, err := l.e.guardedOp(op)
		if err != nil {
			return nil, l.e.errf(fmt.Errorf("%w: operation %d: %w", ErrBadArgument, i, err))
		}
		multi = append(multi, g)
	}
	if err := l.Err(); err != nil {
		return nil, l.e.errf(fmt.Errorf("%w: %w", ErrNotHeld, Within(l.e.cfg.name, l.e.userPath, err)))
	}
	res, err := zksession.Call(ctx, l.e.zs, func(c *zk.Conn) ([]zk.MultiResponse, error) {
		return c.Multi(multi...)
	}, nil)
	if err == nil {
		return res[1:], nil
	}
	switch {
	case len(res) > 0 && errors.Is(res[0].Error, zk.ErrNoNode):
		return nil, l.e.errf(fmt.Errorf("%w: its node %s is gone: %w", ErrNotHeld, l.Node(), zk.ErrNoNode))
	case errors.Is(err, zk.ErrSessionExpired):
		return nil, l.e.errf(fmt.Errorf("%w: its session expired: %w", ErrNotHeld, err))
	case len(res) == len(multi):
		for i, r := range res[1:] {
			if r.Error != nil { // the first one failed; those after it were rolled back
				return nil, l.e.errf(fmt.Errorf("operation %d (%s): %w", i, opPath(ops[i]), r.Error))
			}
		}
	case zksession.IsConnectionError(err), errors.Is(err, ctx.Err()):
		return nil, l.e.errf(fmt.Errorf("the transaction's outcome is unknown: %w", err))
	}
	return nil, l.e.errf(err)
}

// guardedOp returns a copy of op with its path under the session's
// namespace (and the session's ACL for a create without one).
func (e *Engine) guardedOp(op any) (any, error) {
	var out any
	var path *string // the copy's path
	switch o := op.(type) {
	case *zk.CreateRequest:
		if o != nil {
			c := *o
			if len(c.Acl) == 0 {
				c.Acl = e.zs.ACL()
			}
			out, path = &c, &c.Path
		}
	case *zk.SetDataRequest:
		if o != nil {
			c := *o
			out, path = &c, &c.Path
		}
	case *zk.DeleteRequest:
		if o != nil {
			c := *o
			out, path = &c, &c.Path
		}
	case *zk.CheckVersionRequest:
		if o != nil {
			c := *o
			out, path = &c, &c.Path
		}
	default:
		return nil, fmt.Errorf("%T is not a *zk.CreateRequest, *zk.SetDataRequest, *zk.DeleteRequest or *zk.CheckVersionRequest", op)
	}
	if path == nil {
		return nil, fmt.Errorf("nil %T", op)
	}
	full, err := e.zs.Path(*path)
	if err != nil {
		return nil, err
	}
	*path = full
	return out, nil
}

// opPath names an operation's kind and path for an error.
func opPath(op any) string {
	switch o := op.(type) {
	case *zk.CreateRequest:
		return "create " + o.Path
	case *zk.SetDataRequest:
		return "setData " + o.Path
	case *zk.DeleteRequest:
		return "delete " + o.Path
	case *zk.CheckVersionRequest:
		return "check " + o.Path
	}
	return fmt.Sprintf("%T", op)
}
