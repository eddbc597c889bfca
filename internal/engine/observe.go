package engine

// The session's hooks (session.Hooks): an acquire's start and end, a lease's
// end. With no hook set, an acquire pays for one nil check.

import (
	"context"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/zkrecipes/zkrecipes/internal/zksession"
	"github.com/zkrecipes/zkrecipes/session"
)

// WithObserved names the recipe for the session's hooks: kind is its
// session.Recipe Kind for Acquire and TryAcquire with a Driver without a
// Kind of its own and for AcquireFixed (a recipe that observes its acquires
// itself, with ObserveAcquire, leaves it ""), name the user's WithName.
func WithObserved(kind, name string) Option {
	return func(c *config) error { c.kind, c.userName = kind, name; return nil }
}

// Ended is what ObserveEnd watches: a recipe's lease or term over an engine
// Lease, whose end may come before the engine lease's.
type Ended interface {
	Context() context.Context
	Err() error
}

// hooksOf returns the session's hooks, nil when none are set.
func hooksOf(zs *zksession.Session) *session.Hooks {
	if h := zs.Hooks(); h != nil {
		if u, ok := h.User.(*session.Hooks); ok {
			return u
		}
	}
	return nil
}

// AcquireObserved is Acquire observed by o (from ObserveAcquire, nil for
// none) instead of by the Engine's own kind: for a recipe whose acquire is
// more than one engine acquire (a leader's campaign). The caller ends o.
func (e *Engine) AcquireObserved(ctx context.Context, d *Driver, data []byte, o *Observation) (*Lease, error) {
	if ctx == nil {
		return nil, e.errf(fmt.Errorf("%w: nil context", ErrBadArgument))
	}
	if err := checkDriver(d); err != nil {
		return nil, e.errf(err)
	}
	return e.acquireAs(ctx, d, data, false, o)
}

// Observation is one acquire observed by the hooks (see ObserveAcquire).
type Observation struct {
	e       *Engine
	r       session.Recipe
	end     func(session.AcquireEnd)
	woken   time.Time // the last deletion notice of the node waited on
	granted time.Time // when Done was told of the leases: the start of Held
}

// ObserveAcquire starts the Acquire hook for an acquire of kind (max: a
// semaphore's fixed maximum) and returns the context the acquire goes on
// with, and the observation to end (nil when no Acquire or LeaseEnd hook is
// set: then ctx is returned as it is).
func (e *Engine) ObserveAcquire(ctx context.Context, kind string, max int) (context.Context, *Observation) {
	h := e.hooks
	if h == nil || kind == "" || (h.Acquire == nil && h.LeaseEnd == nil) {
		return ctx, nil
	}
	o := &Observation{e: e, r: session.Recipe{Kind: kind, Name: e.cfg.userName, Path: e.userPath, Max: max}}
	if h.Acquire != nil {
		if c, end := h.Acquire(ctx, o.r); c != nil {
			ctx, o.end = c, end
		} else {
			o.end = end
		}
	}
	return ctx, o
}

// Done ends the observation: err is the acquire's error, ls its leases,
// whose ends the LeaseEnd hook is told of (a recipe whose leases are not
// the engine's passes none and calls ObserveEnd). A nil observation does
// nothing.
func (o *Observation) Done(err error, ls ...*Lease) {
	if o == nil {
		return
	}
	if o.end != nil {
		ae := session.AcquireEnd{Err: err}
		if err == nil && !o.woken.IsZero() {
			ae.Handoff = time.Since(o.woken)
		}
		o.end(ae)
	}
	if err != nil || o.e.hooks.LeaseEnd == nil {
		return
	}
	o.granted = time.Now()
	for _, l := range ls {
		if l == nil {
			continue
		}
		if l.x != nil {
			// A monitored lease has its context and goroutine anyway.
			o.e.observeEnd(l, o.r)
			continue
		}
		// A light lease tells its end from finish, with no context or
		// goroutine of its own; if finish ran already, it is told here.
		// Whichever of the two takes o back from the lease tells it.
		l.obs.Store(o)
		if l.finished.Load() && l.obs.CompareAndSwap(o, nil) {
			l.tellEnd(o)
		}
	}
}

// tellEnd tells the LeaseEnd hook that the light lease l, observed by o,
// has ended (see finish).
func (l *Lease) tellEnd(o *Observation) {
	o.e.tellEnd(o.r, o.granted, l.Err())
}

// tellEnd calls the LeaseEnd hook for a lease of r held since start, ended
// by cause: the loss delay of a suspension or loss runs from the last
// answer heard before the fault.
func (e *Engine) tellEnd(r session.Recipe, start time.Time, cause error) {
	le := session.LeaseEnd{Held: time.Since(start), Cause: cause}
	if errors.Is(cause, zksession.ErrSuspended) || errors.Is(cause, zksession.ErrLost) {
		if heard := e.zs.FaultHeard(); !heard.IsZero() {
			le.Delay = max(0, time.Since(heard))
		}
	}
	e.hooks.LeaseEnd(r, le)
}

// ObserveEnd tells the LeaseEnd hook, if any, of x's end, as the lease of
// an acquire of kind (a leader's term, whose end may come before its engine
// lease's).
func (e *Engine) ObserveEnd(kind string, x Ended) {
	if e.hooks != nil && e.hooks.LeaseEnd != nil {
		e.observeEnd(x, session.Recipe{Kind: kind, Name: e.cfg.userName, Path: e.userPath})
	}
}

// noticed records the deletion notice of the node an acquire waits on.
func (o *Observation) noticed() {
	if o != nil {
		o.woken = time.Now()
	}
}

// ObserveEnd is the Engine's ObserveEnd, for a recipe that has the lease
// at hand.
func (l *Lease) ObserveEnd(kind string, x Ended) { l.e.ObserveEnd(kind, x) }

// observeEnd tells the LeaseEnd hook of x's end, as its context ends.
func (e *Engine) observeEnd(x Ended, r session.Recipe) {
	if e.hooks.LeaseEnd == nil || x == nil {
		return
	}
	start := time.Now()
	context.AfterFunc(x.Context(), func() { e.tellEnd(r, start, x.Err()) })
}

// maxUserName bounds a recipe's WithName.
const maxUserName = 100

// CheckUserName validates the name a recipe package's WithName gives:
// non-empty valid UTF-8 of at most 100 bytes.
func CheckUserName(name string) error {
	if name == "" || len(name) > maxUserName || !utf8.ValidString(name) {
		return fmt.Errorf("%w: name %q: want 1 to %d bytes of UTF-8", ErrBadArgument, name, maxUserName)
	}
	return nil
}
