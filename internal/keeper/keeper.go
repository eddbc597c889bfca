package keeper

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/go-zookeeper/zk"
	"go.uber.org/zap"

	"github.com/zkrecipes/zkrecipes/internal/zksession"
	"github.com/zkrecipes/zkrecipes/session"
)

// Changes wakes every waiter on a state guarded by mu at each change of it.
// The zero value is not ready: use NewChanges.
type Changes struct {
	mu *sync.Mutex
	ch chan struct{}
}

// NewChanges returns the Changes of a state guarded by mu.
func NewChanges(mu *sync.Mutex) Changes {
	return Changes{mu: mu, ch: make(chan struct{})}
}

// BroadcastLocked wakes every waiter. mu held.
func (c *Changes) BroadcastLocked() {
	close(c.ch)
	c.ch = make(chan struct{})
}

// ChanLocked returns a channel closed at the next change. mu held.
func (c *Changes) ChanLocked() <-chan struct{} { return c.ch }

// Until waits until cond, called with mu held at every change, returns true
// (nil) or an error (that error), or until ctx ends: then it returns ctx's
// error and ctxEnded true.
func (c *Changes) Until(ctx context.Context, cond func() (bool, error)) (err error, ctxEnded bool) {
	for {
		c.mu.Lock()
		ok, err := cond()
		ch := c.ch
		c.mu.Unlock()
		switch {
		case err != nil:
			return err, false
		case ok:
			return nil, false
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err(), true
		}
	}
}

// UntilHeld waits, as Until, until held (the node holds new data) returns
// true or an error. When ctx ends first, it tells the outcome: nil when held
// reports the data held after all; an error matching
// zksession.ErrUnknownOutcome and ctx's when a write went out on zs's
// connection since sent (zs.WritesSent read before the data was stored, so
// that every write carrying it went out after), as the node may hold the
// data; ctx's error when none did (the node does not hold it).
func (c *Changes) UntilHeld(ctx context.Context, zs *zksession.Session, sent uint64, held func() (bool, error)) error {
	err, ctxEnded := c.Until(ctx, held)
	if !ctxEnded {
		return err
	}
	c.mu.Lock()
	ok, _ := held()
	c.mu.Unlock()
	switch {
	case ok: // written as ctx ended
		return nil
	case zs.WritesSent() != sent:
		return fmt.Errorf("%w: a write went out, and the node holding the data is not confirmed: %w", zksession.ErrUnknownOutcome, err)
	}
	return err
}

// Kick wakes a keeper's goroutine through kick (capacity 1) without
// blocking: a wake already pending stands for this one.
func Kick(kick chan<- struct{}) {
	select {
	case kick <- struct{}{}:
	default:
	}
}

// NewBackOff returns an exponential backoff from first to most, never
// giving up.
func NewBackOff(first, most time.Duration) *backoff.ExponentialBackOff {
	bo := backoff.NewExponentialBackOff()
	bo.InitialInterval = first
	bo.MaxInterval = most
	bo.MaxElapsedTime = 0
	bo.Reset() // the constructor took its default first interval (500 ms)
	return bo
}

// Loop is a keeper's goroutine: each round waits for a connected session,
// establishes the node and keeps it.
type Loop struct {
	// Establish makes the node exist under ep.
	Establish func(ep *zksession.Epoch) error
	// Keep keeps the node under ep, after Establish succeeded; nil: start
	// the next round at once.
	Keep func(ep *zksession.Epoch) error
	// Again reports whether a round's error means starting the next round
	// at once, without a pause; nil: none does.
	Again func(err error) bool
	// Stop records why the keeper stopped before Close: the session was
	// closed, or ZooKeeper refused the node for good.
	Stop func(err error)
	// BackOff gives the pause after a failed round; a round that
	// established the node resets it.
	BackOff backoff.BackOff
	// Log gets a line at every pause.
	Log *zap.Logger
}

// Run runs rounds until ctx ends or Stop is called: after a round that
// failed (not for a lost epoch, nor one that Again accepts), it pauses for
// BackOff's next interval.
func (l Loop) Run(ctx context.Context, zs *zksession.Session) {
	bo := l.BackOff
	for ctx.Err() == nil {
		ep, err := zs.WaitConnected(ctx)
		if err != nil {
			if ctx.Err() == nil {
				l.Stop(err) // the session was closed
			}
			return
		}
		err = l.Establish(ep)
		if err == nil {
			bo.Reset()
			err = l.Keep(ep)
		}
		switch {
		case ctx.Err() != nil:
			return
		case err == nil, l.Again != nil && l.Again(err), ep.Err() != nil:
			continue
		case errors.Is(err, session.ErrClosed) || zksession.Permanent(err):
			l.Stop(err)
			return
		}
		d := bo.NextBackOff()
		l.Log.Debug("node not established; trying again", zap.Error(err), zap.Duration("backoff", d))
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return
		}
	}
}

// Get reads node under ep, retrying as zs.Retry does. On an error it
// returns no data and no stat. (An attempt that Retry gave up on may still
// be running: its results are read only after a success.)
func Get(ctx context.Context, zs *zksession.Session, ep *zksession.Epoch, node string) ([]byte, *zk.Stat, error) {
	var got []byte
	var st *zk.Stat
	err := zs.Retry(ctx, ep, func(c *zk.Conn) error {
		d, s, err := c.Get(node)
		if err == nil {
			got, st = d, s
		}
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	return got, st, nil
}

// GetW reads node under ep with a data watch (zs.GetW), retrying as
// zs.Retry does; on an error, as Get.
func GetW(ctx context.Context, zs *zksession.Session, ep *zksession.Epoch, node string) ([]byte, *zk.Stat, *zksession.Watch, error) {
	var got []byte
	var st *zk.Stat
	var w *zksession.Watch
	err := zs.Retry(ctx, ep, func(*zk.Conn) error {
		d, s, ww, err := zs.GetW(node)
		if err == nil {
			got, st, w = d, s, ww
		}
		return err
	})
	if err != nil {
		return nil, nil, nil, err
	}
	return got, st, w, nil
}

// AwaitChange waits for w's event (nil: the node changed or went), the end
// of ep (its error) or of ctx (its cause).
func AwaitChange(ctx context.Context, ep *zksession.Epoch, w *zksession.Watch) error {
	select {
	case ev, ok := <-w.Events():
		w.Event(ev, ok)
		return nil
	case <-ep.Lost():
		return ep.Err()
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// SetVersioned sets data on node conditional on version. A version that
// moved is read again and the write retried while the node is the same one
// (czxid); when it is another node now, it returns replaced true and no
// error. It returns the node's stat after the write (nil on an error).
func SetVersioned(ctx context.Context, zs *zksession.Session, ep *zksession.Epoch, node string, czxid int64, version int32, data []byte) (*zk.Stat, bool, error) {
	for {
		var set *zk.Stat
		err := zs.Retry(ctx, ep, func(c *zk.Conn) error {
			s, err := c.Set(node, data, version)
			if err == nil {
				set = s
			}
			return err
		})
		switch {
		case err == nil:
			return set, false, nil
		case !errors.Is(err, zk.ErrBadVersion):
			return nil, false, err
		}
		_, st, err := Get(ctx, zs, ep, node)
		switch {
		case err != nil:
			return nil, false, err
		case st.Czxid != czxid:
			return st, true, nil
		}
		version = st.Version
	}
}
