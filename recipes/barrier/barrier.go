package barrier

import (
	"context"
	"errors"
	"path"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/internal/zksession"
	"github.com/zkrecipes/zkrecipes/session"
)

// Barrier is a barrier that one process sets and removes while others wait
// for its removal: one persistent node, wire-compatible with Apache
// Curator's DistributedBarrier. A Barrier starts no goroutine and is safe
// for concurrent use.
type Barrier struct {
	b base
}

// New returns the barrier at path (under the session's namespace). It
// validates its arguments and does no I/O.
func New(sess *session.Session, path string, opts ...Option) (*Barrier, error) {
	b, err := newBase(sess, "barrier", path, opts)
	if err != nil {
		return nil, err
	}
	return &Barrier{b: b}, nil
}

// Set creates the barrier's node (a persistent node; missing parents are
// created as container nodes); a barrier already set stays set. ctx bounds
// it; while the connection is down Set waits for it, and a create whose
// answer was lost is sent again (a repeat finds the node set). Errors: ctx's
// error or session.ErrClosed, also matching recipes.ErrUnknownOutcome when a
// create was sent and its answer had not come (the barrier may or may not
// be set; not when nothing was sent); ZooKeeper errors (zk.ErrNoAuth). Safe
// for concurrent use.
func (b *Barrier) Set(ctx context.Context) error {
	actx, end, err := b.b.begin(ctx)
	if err != nil {
		return err
	}
	defer end()
	var w zksession.Write
	for {
		if err := b.b.zs.EnsureContainers(actx, path.Dir(b.b.full)); err != nil {
			return b.b.result(ctx, w.Result(err))
		}
		err = b.b.zs.RetryWriteAcrossSessions(actx, &w, func(conn *zk.Conn) error {
			_, err := conn.Create(b.b.full, b.b.cfg.data, zk.FlagPersistent, b.b.zs.ACL())
			return zksession.Refused("create", b.b.full, err)
		})
		if errors.Is(err, zk.ErrNoNode) {
			continue // the server reaped the parent container in between
		}
		if errors.Is(err, zk.ErrNodeExists) {
			err = nil
		}
		return b.b.result(ctx, w.Result(err))
	}
}

// Remove deletes the barrier's node, which releases every Wait; a barrier
// not set stays so. ctx bounds it, as for Set. Errors as Set's (with
// recipes.ErrUnknownOutcome, the barrier may or may not be removed). Safe for
// concurrent use.
func (b *Barrier) Remove(ctx context.Context) error {
	actx, end, err := b.b.begin(ctx)
	if err != nil {
		return err
	}
	defer end()
	var w zksession.Write
	err = b.b.zs.RetryWriteAcrossSessions(actx, &w, func(conn *zk.Conn) error {
		return zksession.Refused("delete", b.b.full, conn.Delete(b.b.full, -1))
	})
	if errors.Is(err, zk.ErrNoNode) {
		err = nil
	}
	return b.b.result(ctx, w.Result(err))
}

// Wait blocks while the barrier is set and returns nil once its node does
// not exist (at once if it is not set). It keeps a data watch on the node
// and waits through disconnects and session losses. ctx bounds it.
// Errors: ctx's error, session.ErrClosed (Close of the Barrier or the
// session), ZooKeeper errors. Safe for concurrent use.
func (b *Barrier) Wait(ctx context.Context) error {
	actx, end, err := b.b.begin(ctx)
	if err != nil {
		return err
	}
	defer end()
	for {
		ep, err := b.b.zs.WaitConnected(actx)
		if err != nil {
			return b.b.result(ctx, err)
		}
		var w *zksession.Watch
		err = b.b.zs.Retry(actx, ep, func(*zk.Conn) error {
			_, _, w2, err := b.b.zs.GetW(b.b.full)
			if err == nil {
				w = w2
			}
			return zksession.Refused("watch", b.b.full, err)
		})
		switch {
		case errors.Is(err, zk.ErrNoNode):
			return nil
		case errors.Is(err, session.ErrLost) && actx.Err() == nil:
			continue
		case err != nil:
			return b.b.result(ctx, err)
		}
		if err := waitEvent(actx, w, ep.Lost()); err != nil {
			return b.b.result(ctx, err)
		}
	}
}

// Close ends every Wait in progress with session.ErrClosed; later calls
// fail with it. The node stays as it is. Idempotent.
func (b *Barrier) Close() error {
	b.b.cancel()
	return nil
}
