package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"net"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/zkrecipes/zkrecipes/internal/testkit/sessiontest"
	"github.com/zkrecipes/zkrecipes/internal/zksession"
	"github.com/zkrecipes/zkrecipes/leader"
	"github.com/zkrecipes/zkrecipes/mutex"
	"github.com/zkrecipes/zkrecipes/recipes"
	"github.com/zkrecipes/zkrecipes/rwlock"
	"github.com/zkrecipes/zkrecipes/semaphore"
	"github.com/zkrecipes/zkrecipes/session"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// client is one session of the run and the proxies it connects through (one
// per ensemble member).
type client struct {
	idx    int
	sess   *session.Session
	policy session.LossPolicy

	mu      sync.Mutex
	proxies []*zktest.Proxy          // the current ones, by member
	via     map[string]*zktest.Proxy // member's address -> its current proxy
	retired []*zktest.Proxy          // replaced by a move (their records stay)
}

// current returns the proxies in front of the members as they are now.
func (c *client) current() []*zktest.Proxy {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*zktest.Proxy(nil), c.proxies...)
}

// allProxies returns every proxy the client has had: the sessions they
// recorded (credentials, owners) outlive a move.
func (c *client) allProxies() []*zktest.Proxy {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append(append([]*zktest.Proxy(nil), c.proxies...), c.retired...)
}

// setProxy puts px, in front of the member m now at addr, in place of the
// proxy in front of m's previous address, and returns that one.
func (c *client) setProxy(m int, addr string, px *zktest.Proxy) (old *zktest.Proxy) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.via == nil {
		c.via = make(map[string]*zktest.Proxy)
	}
	if m < len(c.proxies) {
		old = c.proxies[m]
		c.retired = append(c.retired, old)
		for a, p := range c.via {
			if p == old {
				delete(c.via, a)
			}
		}
		c.proxies[m] = px
	} else {
		c.proxies = append(c.proxies, px)
	}
	c.via[addr] = px
	return old
}

// dial is the session's dialer: the session resolves a member's name to the
// member's address, and the connection goes through the client's proxy in
// front of it. An address no member serves on any more (a moved member's
// old one, dialed under a name not yet updated) is refused, as it would be
// without the proxy.
func (c *client) dial(network, addr string, timeout time.Duration) (net.Conn, error) {
	c.mu.Lock()
	px := c.via[addr]
	c.mu.Unlock()
	if px == nil {
		return nil, &net.OpError{Op: "dial", Net: network, Err: fmt.Errorf("no member at %s: %w", addr, syscall.ECONNREFUSED)}
	}
	return net.DialTimeout(network, px.Addr(), timeout)
}

// lease is what every recipe's handle (and a leader's Term) offers.
type lease interface {
	Done() <-chan struct{}
	Err() error
	Context() context.Context
	Token() int64
	Node() string // the name of the holder's node
}

// workers runs the recipe workers of a run.
type workers struct {
	cfg  Config
	rec  *recorder
	stop context.Context // canceled when the run stops its workers
}

func (w *workers) path(recipe string) string { return w.cfg.Root + "/" + recipe }

func (w *workers) guardPath(recipe string) string { return w.cfg.Root + "-guard/" + recipe }

// nodeDir is the directory of recipe's holder nodes, as thirdPartyDelete
// names it (the sessions have no namespace, so it is the server path).
func (w *workers) nodeDir(recipe string) string {
	if recipe == RecipeSemaphore {
		return w.path(recipe) + "/leases"
	}
	return w.path(recipe)
}

// waitTimeout draws an acquire's ctx timeout: from a fifth of the session
// timeout to twice it, so that some acquires time out while queued.
func (w *workers) waitTimeout(rng *rand.Rand) time.Duration {
	lo := w.cfg.SessionTimeout / 5
	return lo + time.Duration(rng.Int63n(int64(2*w.cfg.SessionTimeout-lo)))
}

// holdTime draws how long a holder works: 10 to 150 ms.
func holdTime(rng *rand.Rand) time.Duration {
	return 10*time.Millisecond + time.Duration(rng.Int63n(int64(140*time.Millisecond)))
}

// pause waits 0 to 30 ms between attempts (pacing, not synchronisation).
func (w *workers) pause(rng *rand.Rand) {
	t := time.NewTimer(time.Duration(rng.Int63n(int64(30 * time.Millisecond))))
	defer t.Stop()
	select {
	case <-t.C:
	case <-w.stop.Done():
	}
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// acquired is what acquire returns besides the lease: when the acquire
// returned, and the epoch the lease was taken under.
type acquired struct {
	at    time.Duration
	epoch *zksession.Epoch
}

// acquire runs one bounded acquire on c's session and records its return
// against its ctx.
func acquire[L any](w *workers, c *client, rng *rand.Rand, op, worker string, fn func(context.Context) (L, error)) (L, acquired, error) {
	ctx, cancel := context.WithTimeout(w.stop, w.waitTimeout(rng))
	defer cancel()
	dl, _ := ctx.Deadline()
	start := w.rec.now()
	probe := w.rec.probeEnd(ctx)
	l, err := fn(ctx)
	ret := w.rec.now()
	w.rec.call(Call{Op: op, Worker: worker, Start: start, Return: ret, Bound: w.rec.bound(dl), Ended: probe.ended(ret), Err: errText(err)})
	// A lease does not tell its session: a lease returned now was
	// taken under the current epoch, unless a session ended after its node
	// was created, and then the lease has ended as well (under either
	// policy a new epoch ends every lease of the old one).
	return l, acquired{at: ret, epoch: sessiontest.Core(c.sess).Epoch()}, err
}

// release runs a release under its own 2 s ctx and records it.
func (w *workers) release(op, worker string, fn func(context.Context) error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	dl, _ := ctx.Deadline()
	start := w.rec.now()
	probe := w.rec.probeEnd(ctx)
	err := fn(ctx)
	ret := w.rec.now()
	w.rec.call(Call{Op: op, Worker: worker, Start: start, Return: ret, Bound: dl.Sub(w.rec.base), Ended: probe.ended(ret), Err: errText(err)})
}

// hold does one holder's guarded work and ends its interval: a fenced write at
// the start and at the end of the work (for recipes that fence), extra (if not
// nil) in between. It returns whether the lease was lost; the caller releases
// it either way.
func (w *workers) hold(c *client, rng *rand.Rand, iv *Interval, l lease, extra func()) (lost bool) {
	t := time.NewTimer(holdTime(rng))
	defer t.Stop()
	fenced := guarded(iv.Recipe) && iv.Write
	if fenced {
		w.guardWrite(c, iv, l)
		w.commitWrite(iv, l)
	}
	if extra != nil {
		extra()
	}
	shutdown := false
	select {
	case <-l.Done():
		w.rec.end(iv, w.rec.now(), true, context.Cause(l.Context()), false)
		return true
	case <-w.stop.Done():
		shutdown = true
	case <-t.C:
	}
	if fenced && !shutdown {
		w.guardWrite(c, iv, l)
		w.commitWrite(iv, l)
	}
	select {
	case <-l.Done():
		w.rec.end(iv, w.rec.now(), true, context.Cause(l.Context()), false)
		return true
	default:
	}
	w.rec.end(iv, w.rec.now(), false, nil, shutdown)
	return false
}

// guardWrite writes the holder's token to the fenced resource, a conditional
// write: read the stored token and version, refuse if the stored token is
// higher than ours, else set with the version read (retrying if another
// write came between). It runs on the holder's session under the lease's ctx.
func (w *workers) guardWrite(c *client, iv *Interval, l lease) {
	type got struct {
		data    []byte
		version int32
	}
	ctx := l.Context()
	path := w.guardPath(iv.Recipe)
	rec := Write{Interval: iv.ID, Recipe: iv.Recipe, Token: iv.Token, At: w.rec.now()}
	for attempt := 0; ; attempt++ {
		g, err := zksession.Call(ctx, sessiontest.Core(c.sess), func(zc *zk.Conn) (got, error) {
			d, st, err := zc.Get(path)
			if err != nil {
				return got{}, err
			}
			return got{d, st.Version}, nil
		}, nil)
		if err != nil {
			rec.Err = err.Error()
			break
		}
		stored, _ := strconv.ParseInt(string(g.data), 10, 64)
		if stored > iv.Token {
			rec.Refused, rec.Stored = true, stored
			break
		}
		st, err := zksession.Call(ctx, sessiontest.Core(c.sess), func(zc *zk.Conn) (*zk.Stat, error) {
			return zc.Set(path, []byte(strconv.FormatInt(iv.Token, 10)), g.version)
		}, nil)
		if errors.Is(err, zk.ErrBadVersion) && attempt < 5 {
			continue
		}
		if err != nil {
			rec.Err = err.Error()
			break
		}
		rec.Accepted, rec.Version = true, st.Version
		break
	}
	rec.LeaseLive = ctx.Err() == nil
	w.rec.write(rec)
}

// committer is a lease that can commit writes guarded by its node.
type committer interface {
	Commit(ctx context.Context, ops ...any) ([]zk.MultiResponse, error)
}

// commitWrite writes the holder's token with the lease's Commit: an
// unconditional setData of the commit resource, guarded only by the server's
// check of the lease's node. checkWrites then finds a stale commit as a
// token lower than one committed before it. The ctx is not the lease's: a
// holder that believes it holds after its node is gone (node watch not yet
// set, a session expired while cut off) must be stopped by the server, and
// a commit is not retried (its outcome may be unknown).
func (w *workers) commitWrite(iv *Interval, l lease) {
	cl, ok := l.(committer)
	if !ok || !commits(iv.Recipe) {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	rec := Write{Interval: iv.ID, Recipe: iv.Recipe + commitSuffix, Token: iv.Token, At: w.rec.now()}
	res, err := cl.Commit(ctx, &zk.SetDataRequest{Path: w.guardPath(iv.Recipe) + commitSuffix, Data: []byte(strconv.FormatInt(iv.Token, 10)), Version: -1})
	switch {
	case err == nil:
		rec.Accepted, rec.Version = true, res[0].Stat.Version
	case errors.Is(err, recipes.ErrNotHeld):
		rec.Refused = true
	default:
		rec.Err = err.Error()
	}
	rec.LeaseLive = l.Err() == nil
	w.rec.write(rec)
}

func (w *workers) begin(c *client, recipe, worker string, write bool, l lease, a acquired) *Interval {
	return w.rec.begin(Interval{Recipe: recipe, Write: write, Worker: worker, Session: c.idx, Policy: c.policy,
		SessionID: a.epoch.SessionID(), Node: w.nodeDir(recipe) + "/" + l.Node(), Token: l.Token(), Start: a.at})
}

// runMutex is the worker of the fair mutex, the reentrant mutex and the
// non-fair lock.
func (w *workers) runMutex(c *client, recipe string, seed int64) error {
	rng := rand.New(rand.NewSource(seed))
	name := fmt.Sprintf("s%d/%s", c.idx, recipe)
	var (
		lock   func(context.Context) (*mutex.Lease, error)
		closer func() error
		nested func(context.Context) (*mutex.Lease, error)
	)
	switch recipe {
	case RecipeMutex:
		m, err := mutex.New(c.sess, w.path(recipe), mutex.WithID(name))
		if err != nil {
			return err
		}
		lock, closer = m.Lock, m.Close
	case RecipeReentrant:
		m, err := mutex.NewReentrant(c.sess, w.path(recipe), mutex.WithID(name))
		if err != nil {
			return err
		}
		lock, closer, nested = m.Lock, m.Close, m.Lock
	case RecipeNonFair:
		m, err := mutex.NewNonFair(c.sess, w.path(recipe), mutex.WithID(name))
		if err != nil {
			return err
		}
		lock, closer = m.Lock, m.Close
	default:
		return fmt.Errorf("chaos: no mutex recipe %q", recipe)
	}
	defer closer()
	for w.stop.Err() == nil {
		l, a, err := acquire(w, c, rng, recipe+".Lock", name, lock)
		if err != nil {
			w.pause(rng)
			continue
		}
		iv := w.begin(c, recipe, name, true, l, a)
		var extra func()
		if nested != nil && rng.Intn(3) == 0 {
			// Re-enter on the holding goroutine: it must return at once,
			// sharing the node, and its Release must not release the lock.
			extra = func() {
				l2, _, err := acquire(w, c, rng, recipe+".Lock(nested)", name, nested)
				if err == nil {
					w.release(recipe+".Release(nested)", name, l2.Release)
				}
			}
		}
		// Release also after a loss: it returns nil then, and a Reentrant
		// counts the goroutine's hold until it is called.
		w.hold(c, rng, iv, l, extra)
		w.release(recipe+".Release", name, l.Release)
		w.pause(rng)
	}
	return nil
}

// runRWLock is the read-write lock's worker: about a third of its holds
// write, and a quarter of those downgrade to a read hold.
func (w *workers) runRWLock(c *client, seed int64) error {
	rng := rand.New(rand.NewSource(seed))
	recipe := RecipeRWLock
	name := fmt.Sprintf("s%d/%s", c.idx, recipe)
	m, err := rwlock.New(c.sess, w.path(recipe), rwlock.WithID(name))
	if err != nil {
		return err
	}
	defer m.Close()
	for w.stop.Err() == nil {
		if rng.Intn(3) != 0 {
			rl, a, err := acquire(w, c, rng, "rwlock.RLock", name, m.RLock)
			if err != nil {
				w.pause(rng)
				continue
			}
			w.hold(c, rng, w.begin(c, recipe, name, false, rl, a), rl, nil)
			w.release("rwlock.Release(read)", name, rl.Release)
			w.pause(rng)
			continue
		}
		wl, a, err := acquire(w, c, rng, "rwlock.Lock", name, m.Lock)
		if err != nil {
			w.pause(rng)
			continue
		}
		lost := w.hold(c, rng, w.begin(c, recipe, name, true, wl, a), wl, nil)
		if lost || rng.Intn(4) != 0 || w.stop.Err() != nil {
			w.release("rwlock.Release(write)", name, wl.Release)
			w.pause(rng)
			continue
		}
		// Downgrade: the write interval ended above; the read interval
		// begins once Downgrade returned.
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		dl, _ := ctx.Deadline()
		start := w.rec.now()
		probe := w.rec.probeEnd(ctx)
		rl, err := wl.Downgrade(ctx)
		ret := w.rec.now()
		ended := probe.ended(ret)
		cancel()
		w.rec.call(Call{Op: "rwlock.Downgrade", Worker: name, Start: start, Return: ret, Bound: dl.Sub(w.rec.base), Ended: ended, Err: errText(err)})
		if err != nil {
			w.release("rwlock.Release(write)", name, wl.Release)
			w.pause(rng)
			continue
		}
		// The read lease is the write lease's session's (Downgrade keeps the
		// write node's session).
		w.hold(c, rng, w.begin(c, recipe, name, false, rl, acquired{at: ret, epoch: a.epoch}), rl, nil)
		w.release("rwlock.Release(read)", name, rl.Release)
		w.pause(rng)
	}
	return nil
}

// runSemaphore is the semaphore's worker.
func (w *workers) runSemaphore(c *client, seed int64) error {
	rng := rand.New(rand.NewSource(seed))
	recipe := RecipeSemaphore
	name := fmt.Sprintf("s%d/%s", c.idx, recipe)
	s, err := semaphore.New(c.sess, w.path(recipe), SemaphoreMax, semaphore.WithID(name))
	if err != nil {
		return err
	}
	defer s.Close()
	for w.stop.Err() == nil {
		l, a, err := acquire(w, c, rng, "semaphore.Acquire", name, s.Acquire)
		if err != nil {
			w.pause(rng)
			continue
		}
		w.hold(c, rng, w.begin(c, recipe, name, false, l, a), l, nil)
		w.release("semaphore.Release", name, l.Release)
		w.pause(rng)
	}
	return nil
}

// runLeader is the leader election's worker: leader.Run, whose work writes
// the fenced resource every 200 ms and gives leadership up after 1 to 1.6 s
// (terms of a second or more do not make Run pause before campaigning again).
func (w *workers) runLeader(c *client, seed int64) error {
	rng := rand.New(rand.NewSource(seed))
	recipe := RecipeLeader
	name := fmt.Sprintf("s%d/%s", c.idx, recipe)
	start := w.rec.now()
	probe := w.rec.probeEnd(w.stop)
	err := leader.Run(w.stop, c.sess, w.path(recipe), func(ctx context.Context) error {
		return w.leaderWork(ctx, c, name, rng)
	}, leader.WithID(name))
	ret := w.rec.now()
	ended := probe.ended(ret)
	bound := ret
	if at, ok := w.rec.stopTime(); ok {
		bound = at
	}
	w.rec.call(Call{Op: "leader.Run", Worker: name, Start: start, Return: ret, Bound: bound, Ended: ended, Err: errText(err)})
	if err != nil && w.stop.Err() == nil {
		return fmt.Errorf("chaos: %s: leader.Run returned before the run stopped: %w", name, err)
	}
	return nil
}

func (w *workers) leaderWork(ctx context.Context, c *client, name string, rng *rand.Rand) error {
	term, ok := leader.TermFromContext(ctx)
	if !ok {
		return errors.New("chaos: leader work without a term")
	}
	// The term was won under the current epoch, or has ended already.
	iv := w.begin(c, RecipeLeader, name, true, term, acquired{at: w.rec.now(), epoch: sessiontest.Core(c.sess).Epoch()})
	length := time.Second + time.Duration(rng.Int63n(int64(600*time.Millisecond)))
	deadline := time.NewTimer(length)
	defer deadline.Stop()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		w.guardWrite(c, iv, term)
		w.commitWrite(iv, term)
		select {
		case <-ctx.Done():
			// The term ended: lost, unless the run is stopping.
			shutdown := w.stop.Err() != nil
			w.rec.end(iv, w.rec.now(), !shutdown, context.Cause(ctx), shutdown)
			return ctx.Err()
		case <-deadline.C:
			w.rec.end(iv, w.rec.now(), false, nil, false)
			return nil
		case <-tick.C:
		}
	}
}
