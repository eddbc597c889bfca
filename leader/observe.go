package leader

import (
	"context"
	"errors"
	"time"

	"github.com/go-zookeeper/zk"
	"go.uber.org/zap"

	"github.com/zkrecipes/zkrecipes/internal/engine"
	"github.com/zkrecipes/zkrecipes/internal/zksession"
	"github.com/zkrecipes/zkrecipes/recipes"
	"github.com/zkrecipes/zkrecipes/session"
)

// observerDriver lists the contenders of either layout (latch- for
// LeaderLatch, Latch and Run; lock- for LeaderSelector and Selector). It is
// only used to read participants, never to acquire.
var observerDriver = func() *engine.Driver {
	d := engine.Standard(latchMarker, 1)
	d.Markers = []string{latchMarker, lockMarker}
	return d
}()

// Participants reads the participants of the election at path, in election
// order; the first one leads. It recognises the nodes of Latch, Run and
// Curator's LeaderLatch (latch-) and of Selector and Curator's LeaderSelector
// (lock-). A path that does not exist has no participants. ctx bounds the
// reads. It is for processes that watch an election without taking part.
func Participants(ctx context.Context, sess *session.Session, path string) ([]recipes.Participant, error) {
	if ctx == nil {
		return nil, engine.NewError("leader", path, errNilContext)
	}
	in, err := observerInternals(sess, path)
	if err != nil {
		return nil, err
	}
	defer in.Close()
	ps, err := participants(ctx, in, observerDriver)
	if err != nil {
		return nil, engine.NewError("leader", path, err)
	}
	return ps, nil
}

// Leader reads the current leader of the election at path: the participant
// whose node sorts first. ok is false when nobody leads (no participant, or
// no election path). ctx bounds the reads.
func Leader(ctx context.Context, sess *session.Session, path string) (p recipes.Participant, ok bool, err error) {
	if ctx == nil {
		return recipes.Participant{}, false, engine.NewError("leader", path, errNilContext)
	}
	ps, err := Participants(ctx, sess, path)
	if err != nil || len(ps) == 0 {
		return recipes.Participant{}, false, err
	}
	return ps[0], true, nil
}

func observerInternals(sess *session.Session, path string) (*engine.Engine, error) {
	in, err := engine.New(sess, path, engine.WithName("leader"))
	if err != nil {
		return nil, engine.NewError("leader", path, err)
	}
	return in, nil
}

// Observe follows the leader of the election at path without taking part in
// it. The returned channel first receives the current leader, then the new
// leader each time it changes; the zero recipes.Participant (empty Node) means nobody
// leads. It holds only the latest value, so a slow receiver never stalls the
// observer. The channel is closed when ctx ends or the session is closed.
//
// Observe watches the children of the election path (an observer is not a
// contender, so the herd effect does not apply). While the election path does
// not exist, Observe reports that nobody leads and polls for the path, every
// 50 ms at first and backing off to once a second, without setting a watch:
// an observer never creates the path, and an exists-watch on a missing node
// would stay registered in the client and on the server until the node
// appears, however long after ctx has ended. While the connection is down
// it keeps the last value and catches up when it is back. Like Leader, it
// reports whose node is first: under the standard policy a participant whose
// connection is suspended has already stopped leading while its node is still
// first.
//
// Observe returns an error only for bad arguments (a nil ctx or session:
// session.ErrBadArgument; a bad path), and then starts nothing; it does no I/O
// before it returns.
func Observe(ctx context.Context, sess *session.Session, path string) (<-chan recipes.Participant, error) {
	if ctx == nil {
		return nil, engine.NewError("leader", path, errNilContext)
	}
	zs, err := zksession.Of(sess)
	if err != nil {
		return nil, engine.NewError("leader", path, err)
	}
	full, err := zs.Path(path)
	if err != nil {
		return nil, engine.NewError("leader", path, err)
	}
	o := &observer{
		sess: sess,
		zs:   zs,
		full: full,
		ch:   make(chan recipes.Participant, 1),
		lg:   zs.Logger().Named("leader").With(zap.String("path", full)),
	}
	go o.run(ctx)
	return o.ch, nil
}

// errRescan asks the observer to read again at once: the children changed
// between two reads.
var errRescan = errors.New("leader: rescan")

// Polling bounds while the election path does not exist: the first poll
// comes after absentPollMin, and each further one after twice the previous
// wait, up to absentPollMax.
const (
	absentPollMin = 50 * time.Millisecond
	absentPollMax = time.Second
)

type observer struct {
	sess *session.Session
	zs   *zksession.Session
	full string
	ch   chan recipes.Participant
	lg   *zap.Logger
}

// run is owned by the caller's ctx; closing o.ch is its last act, so a
// receiver that sees the channel closed knows the goroutine is finishing.
func (o *observer) run(ctx context.Context) {
	defer close(o.ch)
	var (
		last  recipes.Participant
		first = true
		poll  time.Duration // the next wait while the path is absent; 0 when present
	)
	for {
		if _, err := o.zs.WaitConnected(ctx); err != nil {
			return
		}
		cur, w, err := o.read(ctx)
		if errors.Is(err, errRescan) {
			continue
		}
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			if ce := o.lg.Check(zap.DebugLevel, "observe: read failed"); ce != nil {
				ce.Write(zap.Error(err))
			}
			if sleep(ctx, o.sess, 50*time.Millisecond) != nil {
				return
			}
			continue
		}
		if first || cur != last {
			o.deliver(cur)
			last, first = cur, false
		}
		if w == nil { // the path does not exist: poll for it, without a watch
			if poll == 0 {
				poll = absentPollMin
			}
			if sleep(ctx, o.sess, poll) != nil {
				return
			}
			poll = min(2*poll, absentPollMax)
			continue
		}
		poll = 0
		select {
		case ev, ok := <-w.Events():
			w.Event(ev, ok)
		case <-ctx.Done():
			return
		case <-o.sess.Done():
			return
		}
	}
}

// read returns the current leader and a watch that fires at the next change
// of the election's children. When the election path does not exist it
// returns the zero recipes.Participant and a nil watch: neither the client nor the
// server keeps a children watch for a getChildren that failed with NoNode,
// so nothing stays registered. ctx bounds the reads (session.Call); the
// children watch is the session's shared one, so observers that come and go
// leave at most one registration on the path.
func (o *observer) read(ctx context.Context) (recipes.Participant, *zksession.Watch, error) {
	type result struct {
		p recipes.Participant
		w *zksession.Watch
	}
	r, err := zksession.Call(ctx, o.zs, func(conn *zk.Conn) (result, error) {
		names, _, w, err := o.zs.ChildrenW(o.full)
		if errors.Is(err, zk.ErrNoNode) {
			return result{}, nil
		}
		if err != nil {
			return result{}, err
		}
		sorted := engine.SortChildren(names, observerDriver.Markers)
		if len(sorted) == 0 {
			return result{w: w}, nil
		}
		first := sorted[0]
		data, st, err := conn.Get(o.full + "/" + first.Name)
		if errors.Is(err, zk.ErrNoNode) {
			return result{}, errRescan // the first node went between the reads
		}
		if err != nil {
			return result{}, err
		}
		return result{recipes.Participant{ID: string(data), Node: first.Name, Kind: engine.KindOf(first.Marker),
			SessionID: st.EphemeralOwner, Token: st.Czxid, Holds: true}, w}, nil
	}, nil)
	return r.p, r.w, err
}

// deliver replaces any value the receiver has not taken with p.
func (o *observer) deliver(p recipes.Participant) {
	select {
	case <-o.ch:
	default:
	}
	o.ch <- p
}
