package leader

import (
	"context"
	"fmt"
	"sync"

	"go.uber.org/zap"

	"github.com/zkrecipes/zkrecipes/recipes"
	"github.com/zkrecipes/zkrecipes/session"
)

// Selector runs a callback while this participant leads, with Curator's
// LeaderSelector layout: a fair mutex on the election path
// (<path>/_c_<uuid>-lock-<seq>, data = participant id), so Go and Java
// selectors on one path take turns.
//
// The callback's context is canceled when leadership is lost (under the
// standard policy already when the connection is suspended) or on Close; the
// participant's node is deleted only after the callback has returned (even
// when the connection came back long before), so no other participant leads
// before then, and the callback should return promptly once its context is
// done. The one exception is a session that really expires: the server
// deletes the node with the session, and another participant may lead while
// a callback slow to stop still runs (see Run). When the callback
// returns, leadership is given up; with WithRequeue(true) the selector then
// campaigns again, otherwise it waits for Requeue.
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
// term's context (TermFromContext gives the *Term, with its fencing token).
// An error it returns is logged; it does not stop the selector.
func NewSelector(sess *session.Session, path string, lead func(ctx context.Context) error, opts ...Option) (*Selector, error) {
	if lead == nil {
		return nil, recipes.NewError("leader", path, fmt.Errorf("%w: nil callback", ErrBadArgument))
	}
	cfg, err := buildConfig(opts)
	if err != nil {
		return nil, recipes.NewError("leader", path, err)
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
// when called twice and ErrClosed after Close.
func (s *Selector) Start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch s.state {
	case started:
		return s.e.errf(ErrStarted)
	case closed:
		return s.e.errf(recipes.Closed())
	}
	s.state = started
	s.queued = true
	s.wg.Add(1)
	go s.run()
	return nil
}

// Requeue enters the election again after the callback has returned. It
// returns true if it queued this participant, false if it was already queued
// or leading (then nothing happens), as Curator's requeue. It returns
// ErrNotStarted before Start, ErrClosed after Close, and the error that
// stopped the election (see Err) once it has stopped.
func (s *Selector) Requeue() (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch s.state {
	case latent:
		return false, s.e.errf(ErrNotStarted)
	case closed:
		return false, s.e.errf(recipes.Closed())
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
	for {
		s.mu.Lock()
		q := s.queued
		s.mu.Unlock()
		if !q {
			select {
			case <-s.wake:
				continue
			case <-s.ctx.Done():
				return
			}
		}
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
		t := newTerm(lease)
		s.e.lg.Info("leadership gained", zap.String("node", t.Node()), zap.Int64("token", t.Token()))
		s.mu.Lock()
		s.term = t
		s.mu.Unlock()
		stop := context.AfterFunc(s.ctx, func() {
			t.end(s.e.errf(recipes.Closed()))
		})
		err = s.lead(t.Context())
		stop()
		// Decide about the next round before the term visibly ends, so that
		// a Requeue made once IsLeader is false is never lost.
		s.mu.Lock()
		s.queued = s.cfg.requeue && s.ctx.Err() == nil
		s.mu.Unlock()
		lost := t.Err() != nil
		t.end(s.e.errf(ErrResigned))
		switch {
		case err != nil && !lost:
			s.e.lg.Error("leadership callback failed", zap.String("node", t.Node()), zap.Error(err))
		default:
			s.e.lg.Info("leadership ended", zap.String("node", t.Node()), zap.NamedError("cause", t.Err()), zap.Error(err))
		}
		s.e.release(context.Background(), lease)
		s.mu.Lock()
		s.term = nil
		s.mu.Unlock()
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
// zk.ErrNoChildrenForEphemerals, ...); otherwise ErrClosed after Close.
// Requeue returns the same error. Close is still needed after such an error;
// it does not return it. It does no I/O.
func (s *Selector) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// IsLeader reports whether the callback is running under a live term. It
// does no I/O.
func (s *Selector) IsLeader() bool {
	s.mu.Lock()
	t := s.term
	s.mu.Unlock()
	return t != nil && t.Err() == nil
}

// ID returns this participant's id.
func (s *Selector) ID() string { return s.e.id }

// Participants reads the election's participants from ZooKeeper, in election
// order; the first one leads. ctx bounds the reads.
func (s *Selector) Participants(ctx context.Context) ([]Participant, error) {
	if ctx == nil {
		return nil, s.e.errf(errNilContext)
	}
	if err := s.checkOpen(); err != nil {
		return nil, err
	}
	return s.e.participants(ctx)
}

// Leader reads the current leader from ZooKeeper: the participant whose node
// sorts first. It returns ErrNoLeader when there is none.
func (s *Selector) Leader(ctx context.Context) (p Participant, ok bool, err error) {
	if ctx == nil {
		return Participant{}, false, s.e.errf(errNilContext)
	}
	if err := s.checkOpen(); err != nil {
		return Participant{}, false, err
	}
	return s.e.leader(ctx)
}

func (s *Selector) checkOpen() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state == closed {
		return s.e.errf(recipes.Closed())
	}
	return nil
}

// Close leaves the election: it cancels a running callback's context (cause
// ErrClosed), waits for the callback to return, deletes this participant's
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
		s.cancel(ErrClosed)
		s.wg.Wait()
		if err := s.e.in.Close(); err != nil {
			s.closeErr = s.e.errf(err)
		}
		s.stop(s.e.errf(recipes.Closed()))
	})
	return s.closeErr
}
