package leader

import (
	"context"
	"fmt"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/zkrecipes/zkrecipes/internal/engine"
	"github.com/zkrecipes/zkrecipes/recipes"
	"github.com/zkrecipes/zkrecipes/session"
)

// Selector runs a callback while this participant leads, with Curator's
// LeaderSelector layout: a fair mutex on the election path
// (<path>/_c_<uuid>-lock-<seq>, data = participant id), so Go and Java
// selectors on one path take turns.
//
// A Selector follows the same rule as Run. A term ends when the callback
// returns (nil or an error), panics, is resigned (Resign, or Term.Resign from
// the callback), or when leadership is lost. The callback's context is
// canceled when leadership is lost (under the standard policy already at the
// lease deadline of a connection still down), at Resign or on Close; the participant's node
// is deleted only after the callback has returned (even when the connection
// came back long before), so no other participant leads before then, and the
// callback should return promptly once its context is done. The one
// exception is a session that really expires: the server deletes the node
// with the session, and another participant may lead while a callback slow
// to stop still runs (see Run).
//
// After a term, with WithRequeue(true) (Curator's autoRequeue) the selector
// campaigns again: at once after a term that lasted at least a second, and
// after a pause after a shorter one (100 ms, doubling after each further
// short term up to 30 s; a term of a second or more resets it), so a
// callback that fails or returns at once does not spin. Without it (the
// default, as in Curator) the selector waits for Requeue, which enters the
// election at once. An error returned by the callback never stops the
// selector: it is logged at error level, unless it only reports the end of
// the term (the context's error after a loss, a resign or Close). A panic in
// the callback is recovered, logged with its stack at error level, and
// handled as the callback returning an error matching ErrPanicked.
//
// The selector stops campaigning before Close only on errors that a new
// attempt cannot cure: the session was closed, or ZooKeeper refuses this
// participant for good (for example zk.ErrNoAuth when the election path's
// ACL does not admit the session's credentials). Then Done is closed and Err
// says why; disconnects, lost sessions and transient errors only make it
// enter the election again.
//
// A Selector is safe for concurrent use.
type Selector struct {
	e    *elector
	lead func(ctx context.Context) error
	cfg  config

	mu     sync.Mutex
	state  runState
	queued bool  // campaigning, leading, or about to
	term   *Term // live or just ended; nil between terms
	err    error // why the election stopped: set once, with done closed
	wake   chan struct{}
	done   chan struct{} // closed when the selector stops for good

	ctx       context.Context
	cancel    context.CancelCauseFunc
	wg        sync.WaitGroup
	closeOnce sync.Once
	closeErr  error
}

// NewSelector returns a selector that calls lead while this participant leads
// the election at path (relative to the session's namespace). It validates its
// arguments and does no I/O; call Start to enter the election. Options:
// WithID, WithRequeue (default false), WithLogger.
//
// lead runs on the selector's goroutine, one call at a time. Its ctx is the
// term's context (TermFromContext gives the *Term, with its fencing token and
// Resign). An error it returns, or a panic, is logged at error level; it does
// not stop the selector (see Selector for when it campaigns again).
func NewSelector(sess *session.Session, path string, lead func(ctx context.Context) error, opts ...Option) (*Selector, error) {
	if lead == nil {
		return nil, engine.NewError("leader", path, fmt.Errorf("%w: nil callback", session.ErrBadArgument))
	}
	cfg, err := buildConfig(opts)
	if err != nil {
		return nil, engine.NewError("leader", path, err)
	}
	e, err := newElector(sess, path, lockMarker, cfg)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	return &Selector{
		e:      e,
		lead:   lead,
		cfg:    cfg,
		wake:   make(chan struct{}, 1),
		done:   make(chan struct{}),
		ctx:    ctx,
		cancel: cancel,
	}, nil
}

// Start enters the election once; it does not block. It returns ErrStarted
// when called twice and session.ErrClosed after Close.
func (s *Selector) Start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch s.state {
	case started:
		return s.e.errf(ErrStarted)
	case closed:
		return s.e.errf(engine.Closed())
	}
	s.state = started
	s.queued = true
	s.wg.Add(1)
	go s.run()
	return nil
}

// Requeue enters the election again after the callback has returned, at
// once (the pause after a short term applies only to WithRequeue(true)). It
// returns true if it queued this participant, false if it was already queued
// (campaigning, or pausing before it campaigns again) or leading (then
// nothing happens), as Curator's requeue. It returns
// ErrNotStarted before Start, session.ErrClosed after Close, and the error that
// stopped the election (see Err) once it has stopped.
func (s *Selector) Requeue() (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch s.state {
	case latent:
		return false, s.e.errf(ErrNotStarted)
	case closed:
		return false, s.e.errf(engine.Closed())
	}
	if s.err != nil {
		return false, s.err
	}
	if s.queued {
		return false, nil
	}
	s.queued = true
	select {
	case s.wake <- struct{}{}:
	default:
	}
	return true, nil
}

func (s *Selector) run() {
	defer s.wg.Done()
	pace := newPacer()
	var pause time.Duration // before the next campaign: set after a short term when requeued automatically
	for {
		s.mu.Lock()
		q := s.queued
		s.mu.Unlock()
		if !q {
			pause = 0 // Requeue enters at once
			select {
			case <-s.wake:
				continue
			case <-s.ctx.Done():
				return
			}
		}
		s.e.waitPause(s.ctx, pause)
		pause = 0
		lease, err := s.e.campaign(s.ctx)
		if err != nil {
			s.mu.Lock()
			s.queued = false
			s.mu.Unlock()
			if s.ctx.Err() == nil {
				// The session was closed under us, or ZooKeeper refuses the
				// election for good (zk.ErrNoAuth, ...).
				s.stop(err)
				s.e.lg.Info("election stopped", zap.Error(err))
			}
			return
		}
		t := newTerm(lease, s.e.errf(recipes.ErrReleased))
		s.e.lg.Info("leadership gained", zap.String("node", t.Node()), zap.Int64("token", t.Token()))
		s.mu.Lock()
		s.term = t
		s.mu.Unlock()
		stop := context.AfterFunc(s.ctx, func() {
			t.end(s.e.errf(engine.Closed()))
		})
		werr, cause := s.e.call(t, s.lead)
		stop()
		// Decide about the next round before the term visibly ends, so that
		// a Requeue made once IsLeader is false is never lost.
		s.mu.Lock()
		s.queued = s.cfg.requeue && s.ctx.Err() == nil
		requeued := s.queued
		s.mu.Unlock()
		t.end(t.resigned)
		if requeued {
			pause = pace.pause(time.Since(t.Started()))
		}
		s.e.ended(t, werr, cause)
		s.e.release(context.Background(), lease)
		t.markReleased()
		s.mu.Lock()
		s.term = nil
		s.mu.Unlock()
	}
}

// Resign gives up the current term without leaving the election for good:
// the callback's context is canceled with a cause matching recipes.ErrReleased, and
// once the callback has returned this participant's node is deleted, so
// another participant can lead. Then the selector campaigns again or not as
// after any other term: with WithRequeue(true) at once after a term of at
// least a second and after a pause after a shorter one (see NewSelector),
// otherwise when Requeue is called. Resign waits until the node is deleted
// (or its deletion queued, when the connection is down), or until ctx ends:
// then it returns an error matching ctx's, and the callback, if it ignores
// its context, still runs and keeps the node. It returns nil at once when the
// selector does not lead, session.ErrClosed after Close and session.ErrBadArgument for a nil
// ctx. Called from the callback itself it would wait for its own return:
// there use Term.Resign (through TermFromContext), which does not wait.
func (s *Selector) Resign(ctx context.Context) error {
	if ctx == nil {
		return s.e.errf(errNilContext)
	}
	s.mu.Lock()
	closed, t := s.state == closed, s.term
	s.mu.Unlock()
	if closed {
		return s.e.errf(engine.Closed())
	}
	if t == nil || t.Err() != nil {
		return nil
	}
	t.Resign()
	select {
	case <-t.released:
		return nil
	case <-ctx.Done():
		return s.e.errf(ctx.Err())
	}
}

// stop records why the selector stopped and closes Done, once.
func (s *Selector) stop(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return
	}
	s.err = err
	close(s.done)
}

// Done returns a channel that is closed when the selector stops for good:
// at Close, or when its election stopped on an error that entering it again
// cannot cure (see Err). It is not closed while the selector merely waits for
// Requeue.
func (s *Selector) Done() <-chan struct{} { return s.done }

// Err returns nil until Done is closed, and then why the selector stopped:
// the error that stopped its election, one matching session.ErrClosed when
// the session was closed, or a permanent ZooKeeper error (zk.ErrNoAuth or
// zk.ErrAuthFailed when the election path's ACL does not admit the session's
// credentials, zk.ErrInvalidACL, zk.ErrBadArguments,
// zk.ErrNoChildrenForEphemerals, ...); otherwise session.ErrClosed after Close.
// Requeue returns the same error. Close is still needed after such an error;
// it does not return it. It does no I/O.
func (s *Selector) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// IsLeader reports whether the callback is running under a live term
// (Curator's hasLeadership). It does no I/O.
func (s *Selector) IsLeader() bool {
	s.mu.Lock()
	t := s.term
	s.mu.Unlock()
	return t != nil && t.Err() == nil
}

// Close leaves the election: it cancels a running callback's context (cause
// session.ErrClosed), waits for the callback to return, deletes this participant's
// node and returns after every goroutine of the selector has exited; Done is
// closed by then. A callback that ignores its context makes Close wait for
// it. Close returns only errors of its own cleanup, not the error that may
// have stopped the election earlier (see Err). Close is idempotent; later
// calls return the first call's result.
func (s *Selector) Close() error {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.state = closed
		s.mu.Unlock()
		s.cancel(session.ErrClosed)
		s.wg.Wait()
		if err := s.e.in.Close(); err != nil {
			s.closeErr = s.e.errf(err)
		}
		s.stop(s.e.errf(engine.Closed()))
	})
	return s.closeErr
}
