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

// ErrUnknownOutcome is the error of a guarded write that was sent and whose
// answer was lost.
var ErrUnknownOutcome = recipes.ErrUnknownOutcome

// Hold is what a guarded write is made behind: a Lease, or a recipe's hold
// on one that can end first (a leader's term). Done is closed when it ends,
// and Err then says why.
type Hold interface {
	Done() <-chan struct{}
	Err() error
}

// Commit runs ops in one ZooKeeper transaction (a multi) behind a check that
// the lease's node exists: the writes commit only if the node is there on the
// server at that instant, so never after the lease's node was deleted, by its
// session's expiry or by anyone else, whatever this process believes. ops are
// go-zookeeper's *zk.CreateRequest, *zk.SetDataRequest, *zk.DeleteRequest and
// *zk.CheckVersionRequest, with recipe paths (under the session's namespace);
// a create with no ACL gets the session's, and nil data in a create or a
// setData is written as empty data (a Java client reads a null buffer as
// null, as everywhere in the library). It returns the responses to ops,
// in order.
//
// While the connection is down it waits within ctx for it to be back before
// it sends anything (ctx is the only timeout), and it sends the transaction
// once: again only after an attempt that was certainly never written to the
// connection.
//
// Errors: one matching ErrNotHeld when the lease has ended (with its Err,
// nothing sent; also when it ends while the call waits for the connection)
// or the server found its node gone (then the lease's Err may still be nil:
// the node watch tells it shortly, or the session's end); the error of the
// first operation ZooKeeper refused (zk.ErrNodeExists, zk.ErrBadVersion,
// ...; nothing committed); one matching ErrUnknownOutcome when the
// transaction was sent and its answer was lost (with the connection error,
// or ctx's error or session.ErrClosed when the call ended while it was in
// flight): it may have committed or not, and is not sent again; ctx's error
// or session.ErrClosed when the call ended while it waited for the
// connection (nothing sent: it never matches ErrUnknownOutcome then). A
// lease of a fixed node (NonFair) cannot guard writes (its name is reused by
// every holder, and ZooKeeper's check compares versions only):
// ErrBadArgument. Safe for concurrent use.
func (l *Lease) Commit(ctx context.Context, ops ...any) ([]zk.MultiResponse, error) {
	if l == nil {
		return nil, errNilLease()
	}
	return l.CommitWhile(ctx, l, ops...)
}

// CommitWhile is Commit behind h, a hold on the lease that can end before
// the lease does (a leader's term, whose node stays until its work
// returns): nothing is sent once h has ended, and a wait for the connection
// ends when h does, with an error matching ErrNotHeld and h's Err.
func (l *Lease) CommitWhile(ctx context.Context, h Hold, ops ...any) ([]zk.MultiResponse, error) {
	if l == nil {
		return nil, errNilLease()
	}
	if ctx == nil {
		return nil, l.e.errf(fmt.Errorf("%w: nil context", ErrBadArgument))
	}
	if h == nil {
		return nil, l.e.errf(fmt.Errorf("%w: nil hold", ErrBadArgument))
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
	ended := func() error {
		if err := l.Err(); err != nil {
			return err
		}
		return h.Err()
	}
	if err := ended(); err != nil {
		return nil, l.e.errf(fmt.Errorf("%w: %w", ErrNotHeld, Within(l.e.cfg.name, l.e.userPath, err)))
	}
	res, err := zksession.SendOnce(ctx, l.e.zs, l.ep, h.Done, func(c *zk.Conn) ([]zk.MultiResponse, error) {
		return c.Multi(multi...)
	})
	if err == nil {
		return res[1:], nil
	}
	switch {
	case errors.Is(err, ErrUnknownOutcome):
		return nil, l.e.errf(fmt.Errorf("transaction: %w", err))
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
	}
	if why := ended(); why != nil && !zksession.IsConnectionError(err) {
		// The wait for the connection ended with the lease (or the hold):
		// nothing was sent.
		return nil, l.e.errf(fmt.Errorf("%w: %w", ErrNotHeld, Within(l.e.cfg.name, l.e.userPath, why)))
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
			c.Data = zksession.NodeData(c.Data)
			out, path = &c, &c.Path
		}
	case *zk.SetDataRequest:
		if o != nil {
			c := *o
			c.Data = zksession.NodeData(c.Data)
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

// KeepUnknown returns cause, wrapped so that it still matches
// ErrUnknownOutcome when err did: a call that reports Close's error instead
// of its own must keep saying that a write may have applied.
func KeepUnknown(err, cause error) error {
	if errors.Is(err, ErrUnknownOutcome) && !errors.Is(cause, ErrUnknownOutcome) {
		return fmt.Errorf("%w: %w", ErrUnknownOutcome, cause)
	}
	return cause
}
