package engine

// Reading the children and waiting for the watched child to go.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-zookeeper/zk"
	"go.uber.org/zap"

	"github.com/zkrecipes/zkrecipes/internal/zksession"
)

// readChildren captures the lease context, then reads the directory; a
// speculative watch (a.spec) is sent right before the read.
func (a *attempt) readChildren() error {
	if err := a.recapture(); err != nil {
		return err
	}
	e := a.e
	if sp := a.spec; sp != nil && sp.p == nil {
		p, ep, zs := e.path+"/"+sp.name, a.ep, e.zs
		sp.p, _ = zksession.Start(e.zs, func(*zk.Conn) (*zksession.Watch, error) {
			if err := ep.Err(); err != nil {
				return nil, err
			}
			_, _, w, err := zs.GetW(p)
			return w, err
		}, nil)
		if sp.p == nil {
			a.spec = nil
		}
	}
	var kids []string
	err := e.zs.Retry(a.ctx, a.ep, func(c *zk.Conn) error {
		var err error
		kids, _, err = c.Children(e.path)
		return zksession.Refused("list", e.path, err)
	})
	if errors.Is(err, zk.ErrNoNode) {
		a.kids = []string{} // directory gone: so is our node
		return nil
	}
	if err != nil {
		return err
	}
	a.kids = kids
	return nil
}

// statSelf reads our own node: its czxid (the fencing token) and, with watch,
// arms a data watch on it. A missing node means it was deleted.
func (a *attempt) statSelf(watch bool) error {
	var st *zk.Stat
	var data []byte
	var w *zksession.Watch
	sess := a.e.zs
	// The op may outlive this call (Retry leaves it behind when ctx ends):
	// it reads only copies, never the attempt's fields.
	node := a.node
	err := sess.Retry(a.ctx, a.ep, func(c *zk.Conn) error {
		var err error
		if watch {
			data, st, w, err = sess.GetW(node)
			return zksession.Refused("watch", node, err)
		}
		data, st, err = c.Get(node)
		return zksession.Refused("read", node, err)
	})
	if errors.Is(err, zk.ErrNoNode) {
		if err2 := a.ep.Err(); err2 != nil {
			return err2
		}
		a.node = ""
		return ErrNodeDeleted
	}
	if err != nil {
		return err
	}
	if a.fixed != "" && !bytes.Equal(data, a.data) {
		// A fixed name: our node was deleted and another acquire created the
		// name again. Its owner may well be our session (two acquirers of
		// one process share it), so only the data, unique to each acquire,
		// tells. It is not ours: never delete it.
		if err2 := a.ep.Err(); err2 != nil {
			return err2
		}
		a.node = ""
		return ErrNodeDeleted
	}
	if st.EphemeralOwner != a.ep.SessionID() {
		if a.fixed != "" {
			// Our data on another session's node (a create re-sent on a new
			// session): fail sweeps it by our data, never by name alone.
			a.node, a.ghosts = "", true
		}
		return fmt.Errorf("%w: node owner 0x%x", zksession.ErrSessionChanged, st.EphemeralOwner)
	}
	a.czxid = st.Czxid
	if watch {
		a.self = w
	}
	return nil
}

// wait sets a data watch on the child named watch and blocks until it
// fires, our own node changes, the epoch ends or ctx ends. A missing
// predecessor returns at once (rescan).
func (a *attempt) wait(watch string) error {
	e := a.e
	// Our own node is watched while we wait only where it pays: when the
	// watched child's deletion alone hands us the recipe (we are next in
	// line on the snapshot), the watch lets heldWithout grant on the
	// deletion notice without reading the children again. Deeper in the
	// queue the next decision reads the children anyway, and that read
	// finds a third-party delete of our node (ErrNodeDeleted). Directly
	// behind the holder (the watched child sorts first) the watch is armed
	// too, whatever the driver: there the wait may last as long as the
	// hold, and a third-party delete of our node must not go unnoticed for
	// that long (a read-write lock's writer never takes over on the notice
	// alone, yet waits right behind the holder).
	//
	// Next in line, the watch is set only once the wait has lasted
	// nodeWatchDelay, as a held lease sets its own (Lease.monitor): a
	// short wait, the common case behind a busy holder or a leader that
	// steps down, then costs neither the request nor the notification
	// that our own delete would fire at our release, and a notice within
	// the delay still grants without a read (a.quick, see heldWithout).
	// A waiter that looks ahead (see Driver.LookAhead) is not next in line: the
	// read that follows the deletion it waits for finds a delete of ours.
	// The lease then sets the watch nodeWatchDelay after the acquire, so a
	// third party's delete of our node, before or after the acquire, ends
	// the lease at the latest nodeWatchDelay (and a round trip) after the
	// acquire returned, as WithNodeWatch promises.
	next := e.cfg.nodeWatch && a.self == nil && !a.looking && (a.holdsWithout(watch) || a.watchesFirst(watch))
	a.quick = false
	if a.czxid == 0 {
		// Learn our token while we wait anyway.
		if err := a.statSelf(false); err != nil {
			return err
		}
	}
	w, err := a.specResult(watch)
	if w == nil && !errors.Is(err, zk.ErrNoNode) {
		p := e.path + "/" + watch
		// Keep the name as part of the path (which the watch keeps
		// anyway), not the snapshot's string: a waiter holds less.
		watch = p[len(e.path)+1:]
		err = e.zs.Retry(a.ctx, a.ep, func(*zk.Conn) error {
			var err error
			_, _, w, err = e.zs.GetW(p)
			return zksession.Refused("watch", p, err)
		})
	}
	if errors.Is(err, zk.ErrNoNode) {
		if !a.answeredOnOurSession() {
			// The reply may have come on a new session, on which our node
			// is gone too: read again (the read checks the epoch).
			return nil
		}
		// As good as its deletion notice, and as quick as one can be: it
		// was in the snapshot, and is gone.
		a.gone = watch
		a.obs.noticed()
		a.quick = a.self == nil && next
		a.selfChanged()
		return nil
	}
	if err != nil {
		return err
	}
	if ce := e.check(zap.DebugLevel, "waiting"); ce != nil {
		ce.Write(zap.String("node", a.name), zap.String("watch", watch))
	}
	var arm <-chan time.Time
	if next {
		t := time.NewTimer(nodeWatchDelay)
		defer t.Stop()
		arm = t.C
	}
	var selfEvents <-chan zk.Event
	if a.self != nil {
		selfEvents = a.self.Events()
	}
	for {
		select {
		case ev, ok := <-w.Events():
			if w.Event(ev, ok).Type == zk.EventNodeDeleted {
				a.gone = watch
				a.obs.noticed()
				// Deleted within the delay: grant without our own watch.
				a.quick = a.self == nil && next
			}
			a.selfChanged()
		case <-arm:
			// Still waiting after the delay: watch our node (a missing
			// node ends the wait with ErrNodeDeleted).
			arm, next = nil, false // no grant without the watch from now on
			if err := a.statSelf(true); err != nil {
				if !zksession.IsConnectionError(err) || a.ep.Err() != nil || a.ctx.Err() != nil {
					return err
				}
				// The retry policy gave up on the connection: wait on
				// without the watch (a notice then leads to a read, which
				// finds our node gone if it is).
				continue
			}
			selfEvents = a.self.Events()
			continue
		case ev, ok := <-selfEvents:
			a.self.Event(ev, ok)
			a.self = nil // fired: rescan finds out what happened, rearm later
		case <-a.ep.Lost():
			return a.ep.Err()
		case <-a.ctx.Done():
			return context.Cause(a.ctx)
		}
		return nil
	}
}

// selfChanged forgets a gone notice if the watch on our own node has fired:
// events and replies come in order on the connection, so if our node changed
// before the notice (or the reply that found the watched child missing), its
// event is queued already, and the next read finds out what happened.
func (a *attempt) selfChanged() {
	if a.self == nil {
		return
	}
	select {
	case ev, ok := <-a.self.Events():
		a.self.Event(ev, ok)
		a.self, a.gone, a.quick = nil, "", false
	default:
	}
}

// specResult takes the speculative watch (a.spec) if it is on the child
// watch, and returns its outcome once in: a watch, zk.ErrNoNode (the child is
// gone), or nil and the error of a watch to be set again. A speculative watch
// on another child is dropped: it stays registered until that child changes
// (see zksession.Watch), and our predecessor's deletion is not far.
func (a *attempt) specResult(watch string) (*zksession.Watch, error) {
	sp := a.spec
	a.spec = nil
	if sp == nil || sp.name != watch {
		return nil, nil
	}
	select {
	case <-sp.p.Done():
	case <-a.ctx.Done():
		sp.p.Abandon()
		return nil, nil // the Retry that follows returns ctx's error
	case <-a.ep.Lost():
		sp.p.Abandon()
		return nil, nil // and this one the epoch's
	}
	w, err := sp.p.Result()
	if err != nil && !errors.Is(err, zk.ErrNoNode) {
		return nil, nil
	}
	return w, err
}
