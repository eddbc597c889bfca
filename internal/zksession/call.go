package zksession

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

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
//
// The hand-off takes no lock: state moves once, from pendRunning to
// pendDone (the worker, with v and err set) or to pendAbandoned (the
// caller, leaving early), whichever comes first. A pending made by call,
// CallOp, StartOp or a retry (pooled) signals pendDone with one token on its
// ready channel (buffered, so the send never blocks) and goes back to a pool
// with that channel once its last user is done with it: the caller that took
// the token, or the worker that found it abandoned (a caller that finds the
// result in as it leaves, or drops a StartOp's, leaves it to the garbage
// collector). A pending made by Start closes ready instead (Done may be read
// more than once) and is never pooled.
type pending[T any] struct {
	state  atomic.Int32
	pooled bool // ready gets a token (not closed), and p goes back to a pool
	v      T
	err    error
	ready  chan struct{} // see pooled

	// What run does, on a worker; cleared once it has run.
	s     *Session
	op    func(*zk.Conn) (T, error)
	opErr func(*zk.Conn) error // instead of op (callErrEnded)
	iop   Op                   // instead of op (CallOp)
	late  func(T, error)
}

// The states of a pending.
const (
	pendRunning   int32 = iota
	pendDone            // v and err are set; ready is signalled
	pendAbandoned       // the caller left; the worker hands the result to late
)

// readyChans holds the ready channels of pooled pendings (buffered, empty):
// a channel goes back only when nobody can send on it or receive from it any
// more, and it is empty then (its one token was taken, or never sent).
var readyChans = sync.Pool{New: func() any { return make(chan struct{}, 1) }}

// errPendings holds whole pendings of a struct{} result (callErrEnded,
// CallOp, StartOp, a call of struct{}), with their ready channels.
var errPendings = sync.Pool{New: func() any {
	return &pending[struct{}]{pooled: true, ready: make(chan struct{}, 1)}
}}

// newPooled returns a pooled pending for op and late, on a pooled channel:
// for a T of struct{}, a whole one from errPendings, where recycle puts it.
func newPooled[T any](op func(*zk.Conn) (T, error), late func(T, error)) *pending[T] {
	if _, ok := any((*pending[T])(nil)).(*pending[struct{}]); ok {
		p := any(errPendings.Get()).(*pending[T])
		p.op, p.late = op, late
		return p
	}
	return &pending[T]{pooled: true, ready: readyChans.Get().(chan struct{}), op: op, late: late}
}

// recycle gives a pooled p (and its channel) back once nobody can touch it:
// its caller took its result (the token was received), or its worker found
// it abandoned. Only pendings of a struct{} result are kept whole; the
// others keep their channel only (a pool cannot be declared per type
// argument).
func (p *pending[T]) recycle() {
	if !p.pooled {
		return
	}
	if ep, ok := any(p).(*pending[struct{}]); ok {
		ep.state.Store(pendRunning)
		ep.err = nil
		ep.s, ep.op, ep.opErr, ep.iop, ep.late = nil, nil, nil, nil, nil
		errPendings.Put(ep)
		return
	}
	var zero T
	p.v, p.err = zero, nil
	p.s, p.op, p.late = nil, nil, nil
	readyChans.Put(p.ready)
	p.ready = nil
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
	p := newPooled(op, late)
	if err := launch(s, p); err != nil {
		p.recycle()
		return zero, err, callNotStarted
	}
	return p.await(ctx, s.done)
}

// callErrEnded is callEnded for an op with only an error and no late
// function (or for iop, when op is nil), without wrapping op in a closure
// of callEnded's shape, on a pending from a pool.
func callErrEnded(ctx context.Context, s *Session, op func(*zk.Conn) error, iop Op) (error, callEnd) {
	if err := ctx.Err(); err != nil {
		return err, callNotStarted
	}
	p := errPendings.Get().(*pending[struct{}])
	p.opErr, p.iop = op, iop
	if err := launch(s, p); err != nil {
		p.recycle()
		return err, callNotStarted
	}
	_, err, end := p.await(ctx, s.done)
	return err, end
}

// Op is a request for CallOp, made by its caller without a closure: Run
// runs once on a goroutine of the Session; once CallOp has returned early,
// Late gets Run's error on that goroutine, or, if Run never started, CallOp's
// own error before CallOp returns. Run returns results by writing
// them to the Op, which the caller reads only after a CallOp that did not
// return early: CallOp's ended result.
type Op interface {
	Run(c *zk.Conn) error
	Late(err error)
}

// CallOp is Call for an Op: it runs op.Run once on the Session's connection
// and waits for it within ctx and until Close begins, the same bounds; when
// it returns early (ctx's error or ErrClosed, and ended false), Run goes on
// and its error goes to op.Late; if ctx had ended or Close had begun before
// Run started, Run never runs and op.Late gets that error before CallOp
// returns. So, its arguments valid, Late is called exactly once whenever
// ended is false, and never when it is true. ended reports that Run ran to its end and
// err is its error (its results are in op). It costs no allocation of its
// own. Safe for concurrent use (each call with an Op of its own).
func CallOp(ctx context.Context, s *Session, op Op) (err error, ended bool) {
	if s == nil {
		return fmt.Errorf("%w: nil session", ErrBadArgument), false
	}
	if ctx == nil {
		return fmt.Errorf("%w: nil context", ErrBadArgument), false
	}
	if op == nil {
		return fmt.Errorf("%w: nil op", ErrBadArgument), false
	}
	err, end := callErrEnded(ctx, s, nil, op)
	if end == callNotStarted {
		op.Late(err)
	}
	return err, end == callDone
}

// Started is a request started with StartOp, for its caller to wait for
// once (Wait). Do not copy it: its request goes back to a pool once waited
// for.
type Started struct{ p *pending[struct{}] }

// StartOp runs op.Run once on the Session's connection, as CallOp does,
// without waiting: the caller then waits for it with Wait, exactly once, or
// drops it (Run still runs to its end, and op.Late is not called). It lets
// one goroutine send a request and go on with another (go-zookeeper sends
// them in order on the connection). It returns ErrClosed once Close has
// begun. It costs no allocation of its own.
func StartOp(s *Session, op Op) (Started, error) {
	if s == nil {
		return Started{}, fmt.Errorf("%w: nil session", ErrBadArgument)
	}
	if op == nil {
		return Started{}, fmt.Errorf("%w: nil op", ErrBadArgument)
	}
	p := errPendings.Get().(*pending[struct{}])
	p.iop = op
	if err := launch(s, p); err != nil {
		p.recycle()
		return Started{}, err
	}
	return Started{p}, nil
}

// Wait waits for a request of StartOp within ctx alone (Close fails the
// request itself): ended reports that Run ran to its end and err is its
// error (its results are in the Op); otherwise err is ctx's error, Run goes
// on and its error goes to the Op's Late. Call it once; the Started is
// spent then, and a second Wait (or one on a zero Started) returns an error
// matching ErrBadArgument.
func (h *Started) Wait(ctx context.Context) (err error, ended bool) {
	p := h.p
	if p == nil {
		return fmt.Errorf("%w: Wait on a spent or zero Started", ErrBadArgument), false
	}
	h.p = nil
	_, err, end := p.await(ctx, nil)
	return err, end == callDone
}

// await waits for the result of a pooled p within ctx and until closed is
// closed (the Session's done; nil: ctx alone), see callEnded. p is not to be
// touched after it returns.
func (p *pending[T]) await(ctx context.Context, closed <-chan struct{}) (T, error, callEnd) {
	var zero T
	var why error
	select {
	case <-p.ready:
		v, err := p.v, p.err
		p.recycle()
		return v, err, callDone
	case <-ctx.Done():
		why = ctx.Err()
	case <-closed:
		why = ErrClosed
	}
	if v, err, ok := p.abandon(); ok {
		// The result came at the same moment: take it. Its token may not be
		// on ready yet, so p is left to the garbage collector.
		return v, err, callDone
	}
	return zero, why, callAbandoned
}

// launch runs p on a worker of the Session and returns at once (ErrClosed
// once Close has begun): the result is in p once p.ready is signalled,
// unless the caller abandons it.
func launch[T any](s *Session, p *pending[T]) error {
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		return ErrClosed
	}
	s.wg.Add(1)
	s.mu.Unlock()
	p.s = s
	s.runJob(p)
	return nil
}

// run runs the request on a worker (see launch) and keeps nothing of op and
// late afterwards: a caller may hold p long after. Once it has signalled
// pendDone it does not touch p again: the caller may reuse it at once.
func (p *pending[T]) run() {
	s, op, opErr, iop, late := p.s, p.op, p.opErr, p.iop, p.late
	p.s, p.op, p.opErr, p.iop, p.late = nil, nil, nil, nil, nil
	defer s.wg.Done()
	var v T
	var err error
	if iop != nil {
		err = iop.Run(s.conn)
	} else if opErr != nil {
		err = opErr(s.conn)
	} else {
		v, err = op(s.conn)
	}
	p.v, p.err = v, err // read by the caller only once it sees pendDone
	if p.state.CompareAndSwap(pendRunning, pendDone) {
		if p.pooled {
			p.ready <- struct{}{} // buffered and empty: never blocks
		} else {
			close(p.ready)
		}
		return
	}
	// Abandoned: the caller is gone, and p is ours alone.
	var zero T
	p.v, p.err = zero, nil
	if iop != nil {
		iop.Late(err)
	} else if late != nil {
		late(v, err)
	}
	p.recycle()
}

// abandon hands the result, when it comes, to the late function; if it has
// come already, it returns it instead (ok).
func (p *pending[T]) abandon() (v T, err error, ok bool) {
	if p.state.CompareAndSwap(pendRunning, pendAbandoned) {
		return v, nil, false
	}
	return p.v, p.err, true
}

// Pending is a request started with Start.
type Pending[T any] struct{ p pending[T] } // one allocation with its request

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
	pp := &Pending[T]{}
	pp.p.ready, pp.p.op, pp.p.late = make(chan struct{}), op, late
	if err := launch(s, &pp.p); err != nil {
		return nil, err
	}
	return pp, nil
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
