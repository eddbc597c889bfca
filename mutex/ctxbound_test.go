package mutex_test

import (
	"context"
	"errors"
	"testing"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/internal/testkit/sessiontest"
	"github.com/zkrecipes/zkrecipes/mutex"
	"github.com/zkrecipes/zkrecipes/recipes"
	"github.com/zkrecipes/zkrecipes/session"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// cbReleasedOrDeadline accepts what Release may return when ctx ends before the
// delete is confirmed: nil (the delete was handed to the session's
// guaranteed-delete queue, as documented) or ctx's error.
func cbReleasedOrDeadline(err error) bool { return err == nil || sessiontest.IsDeadline(err) }

// cbWorker runs functions one after the other on one goroutine, so that a
// reentrant Mutex is locked and unlocked by the same goroutine even when the
// call under test runs on sessiontest.MeasureBound's goroutine.
type cbWorker struct {
	jobs chan func()
	done chan struct{}
}

func newCBWorker(t testing.TB) *cbWorker {
	w := &cbWorker{jobs: make(chan func()), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for f := range w.jobs {
			f()
		}
	}()
	t.Cleanup(func() {
		close(w.jobs)
		<-w.done
	})
	return w
}

// run runs f on the worker and waits for it.
func (w *cbWorker) run(f func()) {
	ran := make(chan struct{})
	w.jobs <- func() {
		defer close(ran)
		f()
	}
	<-ran
}

// cbLockOn locks lk on w (a lease that must not be won under a partition is
// released and reported as an error).
func cbLockOn(w *cbWorker, ctx context.Context, lock func(context.Context) (*mutex.Lease, error)) error {
	var err error
	w.run(func() {
		var l *mutex.Lease
		l, err = lock(ctx)
		if err == nil {
			_ = l.Release(context.Background())
			err = errors.New("locked through a partition")
		}
	})
	return err
}

// cbRig is one ctx-bound case: a session through a proxy (6 s timeout), a
// raw connection to inspect, and a worker goroutine.
type cbRig struct {
	ns  *zktest.Namespace
	raw *zk.Conn
	s   *session.Session
	p   *zktest.Proxy
	rec *sessiontest.Recorder
	w   *cbWorker
}

func newCBRig(t *testing.T) *cbRig {
	ns := zktest.NewNamespace(t)
	s, p := sessiontest.ConnectProxy(t, ns, session.WithSessionTimeout(sessiontest.BoundSession))
	return &cbRig{ns: ns, raw: ns.Conn(t), s: s, p: p, rec: sessiontest.Record(t, s), w: newCBWorker(t)}
}

// heal ends the partition and waits for the session to be back.
func (r *cbRig) heal(t *testing.T) {
	t.Helper()
	r.p.Heal()
	r.rec.Wait(t, wait, session.Reconnected)
}

// noNodes waits until the directories of paths hold no node.
func (r *cbRig) noNodes(t *testing.T, paths ...string) {
	t.Helper()
	for _, p := range paths {
		dir := r.ns.Path(p)
		zktest.Eventually(t, wait, func() bool {
			k, _, err := r.raw.Children(dir)
			return errors.Is(err, zk.ErrNoNode) || (err == nil && len(k) == 0)
		}, "nodes left in %s", dir)
	}
}

// gone waits until node does not exist.
func (r *cbRig) gone(t *testing.T, node string) {
	t.Helper()
	zktest.Eventually(t, wait, func() bool {
		ok, _, err := r.raw.Exists(node)
		return err == nil && !ok
	}, "%s is left behind", node)
}

// TestCtxBoundsMutex: every blocking call of every lock
// kind returns within its ctx plus a few milliseconds while the proxy is
// partitioned (traffic silently dropped; the 6 s session is not even
// suspended meanwhile), and leaves no node of ours behind once the
// partition heals.
func TestCtxBoundsMutex(t *testing.T) {
	for _, k := range kinds {
		// A lock on a fresh rig, warmed up (its directory exists) by one
		// Lock and Release before the partition.
		setup := func(t *testing.T) (*cbRig, mutex.Locker) {
			r := newCBRig(t)
			lk := k.make(t, r.s)
			ctx := ctxT(t)
			var err error
			r.w.run(func() {
				var l *mutex.Lease
				if l, err = lk.Lock(ctx); err == nil {
					err = l.Release(ctx)
				}
			})
			if err != nil {
				t.Fatalf("warm-up: %v", err)
			}
			return r, lk
		}
		t.Run(k.name+"/Lock", func(t *testing.T) {
			r, lk := setup(t)
			r.p.Partition()
			sessiontest.MeasureBound(t, k.name+".Lock", r.p.Heal, func(ctx context.Context) error {
				return cbLockOn(r.w, ctx, lk.Lock)
			}, sessiontest.IsDeadline)
			r.heal(t)
			r.noNodes(t, lockPath)
		})
		t.Run(k.name+"/TryLock", func(t *testing.T) {
			r, lk := setup(t)
			r.p.Partition()
			sessiontest.MeasureBound(t, k.name+".TryLock", r.p.Heal, func(ctx context.Context) error {
				return cbLockOn(r.w, ctx, lk.TryLock)
			}, sessiontest.IsDeadline)
			r.heal(t)
			r.noNodes(t, lockPath)
		})
		t.Run(k.name+"/Release", func(t *testing.T) {
			r, lk := setup(t)
			var l *mutex.Lease
			var err error
			r.w.run(func() { l, err = lk.Lock(ctxT(t)) })
			if err != nil {
				t.Fatal(err)
			}
			r.p.Partition()
			sessiontest.MeasureBound(t, k.name+".Release", r.p.Heal, func(ctx context.Context) error {
				var err error
				r.w.run(func() { err = l.Release(ctx) })
				return err
			}, cbReleasedOrDeadline)
			// The node goes once the connection is back (the session's
			// guaranteed-delete queue).
			r.heal(t)
			r.gone(t, mutex.NodePath(l))
		})
		t.Run(k.name+"/Holder", func(t *testing.T) {
			r, lk := setup(t)
			h := lk.(interface {
				Holder(context.Context) (recipes.Participant, bool, error)
			})
			r.p.Partition()
			sessiontest.MeasureBound(t, k.name+".Holder", r.p.Heal, func(ctx context.Context) error {
				_, _, err := h.Holder(ctx)
				return err
			}, sessiontest.IsDeadline)
			r.p.Heal()
		})
		if !k.fair {
			continue // NonFair has no queue to list
		}
		t.Run(k.name+"/Participants", func(t *testing.T) {
			r, lk := setup(t)
			ps := lk.(interface {
				Participants(context.Context) ([]recipes.Participant, error)
			})
			r.p.Partition()
			sessiontest.MeasureBound(t, k.name+".Participants", r.p.Heal, func(ctx context.Context) error {
				_, err := ps.Participants(ctx)
				return err
			}, sessiontest.IsDeadline)
			r.p.Heal()
		})
	}

	// Multi over two reentrant Mutexes of one session.
	const otherPath = "/locks/b"
	setupMulti := func(t *testing.T) (*cbRig, *mutex.Multi) {
		r := newCBRig(t)
		a := newMutex(t, r.s)
		b, err := mutex.NewReentrant(r.s, otherPath)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		m, err := mutex.NewMulti(a, b)
		if err != nil {
			t.Fatal(err)
		}
		ctx := ctxT(t)
		r.w.run(func() {
			var l *mutex.MultiLease
			if l, err = m.Lock(ctx); err == nil {
				err = l.Release(ctx)
			}
		})
		if err != nil {
			t.Fatalf("warm-up: %v", err)
		}
		return r, m
	}
	multiLock := func(w *cbWorker, ctx context.Context, lock func(context.Context) (*mutex.MultiLease, error)) error {
		var err error
		w.run(func() {
			var l *mutex.MultiLease
			l, err = lock(ctx)
			if err == nil {
				_ = l.Release(context.Background())
				err = errors.New("locked through a partition")
			}
		})
		return err
	}
	t.Run("multi/Lock", func(t *testing.T) {
		r, m := setupMulti(t)
		r.p.Partition()
		sessiontest.MeasureBound(t, "multi.Lock", r.p.Heal, func(ctx context.Context) error {
			return multiLock(r.w, ctx, m.Lock)
		}, sessiontest.IsDeadline)
		r.heal(t)
		r.noNodes(t, lockPath, otherPath)
	})
	t.Run("multi/TryLock", func(t *testing.T) {
		r, m := setupMulti(t)
		r.p.Partition()
		sessiontest.MeasureBound(t, "multi.TryLock", r.p.Heal, func(ctx context.Context) error {
			return multiLock(r.w, ctx, m.TryLock)
		}, sessiontest.IsDeadline)
		r.heal(t)
		r.noNodes(t, lockPath, otherPath)
	})
	t.Run("multi/Release", func(t *testing.T) {
		r, m := setupMulti(t)
		var l *mutex.MultiLease
		var err error
		r.w.run(func() { l, err = m.Lock(ctxT(t)) })
		if err != nil {
			t.Fatal(err)
		}
		r.p.Partition()
		sessiontest.MeasureBound(t, "multi.Release", r.p.Heal, func(ctx context.Context) error {
			var err error
			r.w.run(func() { err = l.Release(ctx) })
			return err
		}, cbReleasedOrDeadline)
		r.heal(t)
		for _, x := range l.Leases() {
			r.gone(t, mutex.NodePath(x))
		}
	})
}
