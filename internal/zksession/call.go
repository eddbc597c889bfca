package zksession

import (
	"context"
	"fmt"
	"sync"

	"github.com/go-zookeeper/zk"
)

// go-zookeeper v1.0.4 has no per-request context: a call returns when the
// server answers, when go-zookeeper notices that the connection is dead
// (about ⅔ of the session timeout after the server went silent) or, for a
// request queued while disconnected, much later. A caller's ctx must bound
// every blocking call of this library, so each request runs on a goroutine
// of the Session and the caller waits for it only within its ctx (call).
// When the caller leaves first, the request still completes (or fails) on
// that goroutine, and its late result goes to a cleanup function: a create
// that lands after its caller gave up is deleted or swept by the caller's
// choice (see CreateEphemeral and the recipes engine), never left behind.

// pending is one request in flight: its result, or the news that the
// caller has left and the result goes to the late function.
type pending[T any] struct {
	mu        sync.Mutex
	done      bool // v and err are set
	abandoned bool // the caller left; the goroutine hands the result to late
	v         T
	err       error
	ready     chan struct{} // closed when done is set

	// What run does, on a worker; cleared once it has run.
	s     *Session
	op    func(*zk.Conn) (T, error)
	opErr func(*zk.Conn) error // instead of op (callErrEnded)
	late  func(T, error)
}

// call runs op once on the connection and returns its result, or returns
// early when ctx ends (ctx's error) or the Session closes (ErrClosed). op runs
// on a goroutine of the Session, which Close waits for; when call has
// returned early, op's result is passed to late (if not nil) on that
// goroutine, once it is known. op must not write to memory that the caller
// reads after call returned an error: return values instead.
func call[T any](ctx context.Context, s *Session, op func(*zk.Conn) (T, error), late func(T, error)) (T, error) {
	v, err, _ := callEnded(ctx, s, op, late)
	return v, err
}

// callEnd says how callEnded returned.
type callEnd int

const (
	callDone       callEnd = iota // op ran to its end: its result is returned
	callNotStarted                // ctx had ended or Close had begun: op never ran
	callAbandoned                 // ctx ended or Close began while op ran: it goes on, its result goes to late
)

// callEnded is call, and says whether op ran to its end, never ran, or was
// left running (the difference between a write not sent and one whose
// answer is lost).
func callEnded[T any](ctx context.Context, s *Session, op func(*zk.Conn) (T, error), late func(T, error)) (T, error, callEnd) {
	var zero T
	if err := ctx.Err(); err != nil {
		return zero, err, callNotStarted
	}
	p, err := start(s, op, late)
	if err != nil {
		return zero, err, callNotStarted
	}
	return p.await(ctx, s)
}

// callErrEnded is callEnded for an op with only an error and no late
// function, without wrapping op in a closure of callEnded's shape.
func callErrEnded(ctx context.Context, s *Session, op func(*zk.Conn) error) (error, callEnd) {
	if err := ctx.Err(); err != nil {
		return err, callNotStarted
	}
	p, err := launch(s, &pending[struct{}]{ready: make(chan struct{}), opErr: op})
	if err != nil {
		return err, callNotStarted
	}
	_, err, end := p.await(ctx, s)
	return err, end
}

// await waits for p's result within ctx and s's life (see callEnded).
func (p *pending[T]) await(ctx context.Context, s *Session) (T, error, callEnd) {
	var zero T
	var why error
	select {
	case <-p.ready:
		return p.v, p.err, callDone
	case <-ctx.Done():
		why = ctx.Err()
	case <-s.done:
		why = ErrClosed
	}
	if v, err, ok := p.abandon(); ok { // the result came at the same moment: take it
		return v, err, callDone
	}
	return zero, why, callAbandoned
}

// start runs op once on a worker of the Session and returns at once; the
// result is in p once p.ready is closed, unless the caller abandons it.
func start[T any](s *Session, op func(*zk.Conn) (T, error), late func(T, error)) (*pending[T], error) {
	return launch(s, &pending[T]{ready: make(chan struct{}), op: op, late: late})
}

// launch is start for a pending request made by the caller.
func launch[T any](s *Session, p *pending[T]) (*pending[T], error) {
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		return nil, ErrClosed
	}
	s.wg.Add(1)
	s.mu.Unlock()
	p.s = s
	s.runJob(p)
	return p, nil
}

// run runs the request on a worker (see start) and keeps nothing of op and
// late afterwards: a caller may hold p long after.
func (p *pending[T]) run() {
	s, op, opErr, late := p.s, p.op, p.opErr, p.late
	p.s, p.op, p.opErr, p.late = nil, nil, nil, nil
	defer s.wg.Done()
	var v T
	var err error
	if opErr != nil {
		err = opErr(s.conn)
	} else {
		v, err = op(s.conn)
	}
	p.mu.Lock()
	if p.abandoned {
		p.mu.Unlock()
		if late != nil {
			late(v, err)
		}
		return
	}
	p.v, p.err, p.done = v, err, true
	p.mu.Unlock()
	close(p.ready)
}

// abandon hands the result, when it comes, to the late function; if it has
// come already, it returns it instead (ok).
func (p *pending[T]) abandon() (v T, err error, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done {
		return p.v, p.err, true
	}
	p.abandoned = true
	return v, nil, false
}

// Pending is a request started with Start.
type Pending[T any] struct{ p *pending[T] }

// Start runs op once on the Session's connection, as Call does, without
// waiting: the caller picks the result up from the Pending, within its own
// bound, or abandons it, and late (if not nil) then gets it on a goroutine
// of the Session (Close waits for that goroutine). It lets one goroutine
// send a request and go on with another (go-zookeeper sends them in order
// on the connection). It returns ErrClosed once Close has begun. The same
// rules as Call's apply to op.
func Start[T any](s *Session, op func(*zk.Conn) (T, error), late func(T, error)) (*Pending[T], error) {
	if s == nil {
		return nil, fmt.Errorf("%w: nil session", ErrBadArgument)
	}
	if op == nil {
		return nil, fmt.Errorf("%w: nil op", ErrBadArgument)
	}
	p, err := start(s, op, late)
	if err != nil {
		return nil, err
	}
	return &Pending[T]{p}, nil
}

// Done returns a channel closed when the result is in.
func (p *Pending[T]) Done() <-chan struct{} { return p.p.ready }

// Result returns op's result. Call it only after Done is closed.
func (p *Pending[T]) Result() (T, error) { return p.p.v, p.p.err }

// Abandon leaves the result to the late function, or returns it (ok) if it
// is in already.
func (p *Pending[T]) Abandon() (v T, err error, ok bool) { return p.p.abandon() }

// Call runs op once on the Session's connection and waits for its result
// within ctx, the only bound: it returns ctx's error as soon as ctx ends, and
// ErrClosed once Close begins, whatever the network does. op then goes on on
// a goroutine of the Session (Close waits for it) until go-zookeeper answers
// or fails it, and its late result is handed to late (if not nil), on that
// goroutine: use late to undo a write the caller no longer wants (a create).
// op must not write to memory that the caller reads after Call returned an
// error: return values instead. Call neither waits for the connection nor
// retries; see Retry. Safe for concurrent use.
func Call[T any](ctx context.Context, s *Session, op func(*zk.Conn) (T, error), late func(T, error)) (T, error) {
	var zero T
	if s == nil {
		return zero, fmt.Errorf("%w: nil session", ErrBadArgument)
	}
	if ctx == nil {
		return zero, fmt.Errorf("%w: nil context", ErrBadArgument)
	}
	if op == nil {
		return zero, fmt.Errorf("%w: nil op", ErrBadArgument)
	}
	return call(ctx, s, op, late)
}
