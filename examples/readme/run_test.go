package readme

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"go.uber.org/zap/zaptest"

	"github.com/zkrecipes/zkrecipes/mutex"
	"github.com/zkrecipes/zkrecipes/recipes"
	"github.com/zkrecipes/zkrecipes/rwlock"
	"github.com/zkrecipes/zkrecipes/semaphore"
	"github.com/zkrecipes/zkrecipes/session"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// The tour's snippets run as README shows them, against a real server: serve
// connects and closes the session; withBillingLock holds the lock while the
// job runs and only then, hands the job a live context and a fencing token,
// and returns the job's error; runScheduler leads and returns once ctx ends.
// (TestBillingLockEndsOnPartition, README's own test snippet, covers a lease
// that ends.)
func TestTourSnippetsRun(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var served *session.Session
	err := serve(ctx, zktest.NewNamespace(t).Servers(), zaptest.NewLogger(t), func(ctx context.Context, sess *session.Session) (err error) {
		served = sess
		probe, err := mutex.New(sess, "/locks/billing")
		if err != nil {
			return err
		}
		defer func() { err = errors.Join(err, probe.Close()) }()

		var token int64
		err = withBillingLock(ctx, sess, func(ctx context.Context, tok int64) error {
			token = tok
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("the job's context has ended already: %w", context.Cause(ctx))
			}
			_, held, err := probe.Holder(ctx)
			if err != nil {
				return err
			}
			if !held {
				return errors.New("the lock is free while the job runs")
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("withBillingLock: %w", err)
		}
		if token <= 0 {
			return fmt.Errorf("withBillingLock gave the job token %d, want a positive czxid", token)
		}
		if _, held, err := probe.Holder(ctx); err != nil || held {
			return fmt.Errorf("after withBillingLock returned: held %v (%v), want a free lock", held, err)
		}
		boom := errors.New("boom")
		if err := withBillingLock(ctx, sess, func(context.Context, int64) error { return boom }); !errors.Is(err, boom) {
			return fmt.Errorf("withBillingLock returned %v, want the job's error", err)
		}

		rctx, stop := context.WithCancel(ctx)
		defer stop()
		var led atomic.Bool
		err = runScheduler(rctx, sess, func(ctx context.Context) error {
			led.Store(true)
			stop() // for the test: shut down during the first term
			<-ctx.Done()
			return ctx.Err()
		})
		if !led.Load() {
			return fmt.Errorf("runScheduler returned %v without leading", err)
		}
		if !errors.Is(err, context.Canceled) {
			return fmt.Errorf("runScheduler returned %v, want an error matching context.Canceled", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if served == nil {
		t.Fatal("serve did not run the service")
	}
	if st := served.State(); st != session.Closed {
		t.Errorf("after serve the session is %v, want Closed", st)
	}
}

// snippetWait bounds every wait on something that should happen soon.
const snippetWait = 15 * time.Second

// snippetSession connects a session to the test's namespace, closed in
// t.Cleanup.
func snippetSession(t *testing.T, ctx context.Context, ns *zktest.Namespace) *session.Session {
	t.Helper()
	s, err := session.Connect(ctx, ns.Servers(), session.WithNamespace(ns.Root))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	})
	return s
}

// snippetClosed waits until ch is closed, failing the test after snippetWait.
func snippetClosed(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(snippetWait):
		t.Fatalf("%s: not within %v", what, snippetWait)
	}
}

// snippetNoChildren waits until the node at the full path p has no children
// (or does not exist).
func snippetNoChildren(t *testing.T, conn *zk.Conn, p string) {
	t.Helper()
	var kids []string
	zktest.Eventually(t, snippetWait, func() bool {
		var err error
		kids, _, err = conn.Children(p)
		return errors.Is(err, zk.ErrNoNode) || (err == nil && len(kids) == 0)
	}, "no node left under %s (last seen %v)", p, &kids)
}

// readCatalog runs read under a read lease: with a live context, while a
// writer (another session's RWMutex) is refused; two calls read at once,
// each waiting for the other to start; it returns read's error and leaves no
// node; read's context is the lease's (it ends when the node is deleted).
func TestTourReadCatalogRuns(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ns := zktest.NewNamespace(t)
	conn := ns.Conn(t)
	const catalog = "/catalog"
	rw, err := rwlock.New(snippetSession(t, ctx, ns), catalog)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rw.Close() })
	writer, err := rwlock.New(snippetSession(t, ctx, ns), catalog)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { writer.Close() })

	// One reader: the test checks the lock while read waits for it.
	inside, proceed := make(chan struct{}), make(chan struct{})
	boom := errors.New("boom")
	var readCtxErr error
	res := make(chan error, 1)
	go func() {
		res <- readCatalog(ctx, rw, func(ctx context.Context) error {
			readCtxErr = context.Cause(ctx) // read by the test after res
			close(inside)
			select {
			case <-proceed:
			case <-ctx.Done():
				return fmt.Errorf("the read lease ended while reading: %w", context.Cause(ctx))
			}
			return boom
		})
	}()
	snippetClosed(t, inside, "read runs")
	ps, err := rw.Participants(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(ps) != 1 || ps[0].Kind != "read" || !ps[0].Holds {
		t.Errorf("participants while read runs: %+v, want one read holder", ps)
	}
	if wl, err := writer.TryLock(ctx); !errors.Is(err, recipes.ErrBusy) {
		if err == nil {
			wl.Release(ctx)
		}
		t.Errorf("a writer's TryLock while read runs = %v, want ErrBusy", err)
	}
	close(proceed)
	if err := <-res; !errors.Is(err, boom) {
		t.Fatalf("readCatalog returned %v, want read's error", err)
	}
	if readCtxErr != nil {
		t.Errorf("read's context had ended when read began: %v", readCtxErr)
	}
	snippetNoChildren(t, conn, ns.Path(catalog))

	// Two readers at once: each read waits until the other has begun, so
	// both return nil only if they held read leases together.
	aIn, bIn, done := make(chan struct{}), make(chan struct{}), make(chan struct{})
	stop, cancelStop := context.WithTimeout(ctx, snippetWait)
	defer cancelStop()
	read := func(mine, other chan struct{}) func(context.Context) error {
		return func(ctx context.Context) error {
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("read's context has ended already: %w", context.Cause(ctx))
			}
			close(mine)
			select {
			case <-other:
			case <-stop.Done():
				return errors.New("the other reader did not begin while this one read")
			}
			select {
			case <-done:
			case <-ctx.Done():
				return fmt.Errorf("the read lease ended while reading: %w", context.Cause(ctx))
			case <-stop.Done():
				return errors.New("not told to finish")
			}
			return nil
		}
	}
	results := make(chan error, 2)
	go func() { results <- readCatalog(ctx, rw, read(aIn, bIn)) }()
	go func() { results <- readCatalog(ctx, rw, read(bIn, aIn)) }()
	select {
	case <-aIn:
	case <-stop.Done():
	}
	select {
	case <-bIn:
	case <-stop.Done():
	}
	if stop.Err() == nil {
		ps, err := rw.Participants(ctx)
		if err != nil {
			t.Error(err)
		} else if len(ps) != 2 || ps[0].Kind != "read" || !ps[0].Holds || ps[1].Kind != "read" || !ps[1].Holds {
			t.Errorf("participants while two reads run: %+v, want two read holders", ps)
		}
		if wl, err := writer.TryLock(ctx); !errors.Is(err, recipes.ErrBusy) {
			if err == nil {
				wl.Release(ctx)
			}
			t.Errorf("a writer's TryLock while two reads run = %v, want ErrBusy", err)
		}
	}
	close(done)
	for i := 0; i < 2; i++ {
		if err := <-results; err != nil {
			t.Errorf("concurrent readCatalog: %v", err)
		}
	}
	snippetNoChildren(t, conn, ns.Path(catalog))
	// The lock is free: a writer gets it at once.
	wl, err := writer.TryLock(ctx)
	if err != nil {
		t.Fatalf("a writer's TryLock after the reads: %v", err)
	}
	if err := wl.Release(ctx); err != nil {
		t.Fatal(err)
	}

	// read runs under the lease's context: a third party deletes the read
	// node, and read's context ends with that cause.
	cause := snippetLeaseLoss(t, conn, ns.Path(catalog), func(ctx context.Context, read func(context.Context) error) error {
		return readCatalog(ctx, rw, read)
	}, rw.Participants)
	if !errors.Is(cause, recipes.ErrNodeDeleted) {
		t.Errorf("read's context ended with %v, want ErrNodeDeleted", cause)
	}
	snippetNoChildren(t, conn, ns.Path(catalog))
}

// snippetLeaseLoss runs a snippet whose callback blocks until its context
// ends; once the callback runs, it deletes the node of the one participant
// (under the full path dir) through conn, as a third party, and returns what
// the snippet returned (the callback returns context.Cause of its ctx).
func snippetLeaseLoss(t *testing.T, conn *zk.Conn, dir string,
	snippet func(ctx context.Context, work func(context.Context) error) error,
	participants func(context.Context) ([]recipes.Participant, error)) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), snippetWait)
	defer cancel()
	inside := make(chan struct{})
	res := make(chan error, 1)
	go func() {
		res <- snippet(ctx, func(lctx context.Context) error {
			close(inside)
			select {
			case <-lctx.Done():
				return context.Cause(lctx)
			case <-ctx.Done():
				return fmt.Errorf("the callback's context did not end: %w", ctx.Err())
			}
		})
	}()
	select {
	case <-inside:
	case err := <-res:
		t.Fatalf("the snippet returned %v without running its callback", err)
	}
	ps, err := participants(ctx)
	if err != nil || len(ps) != 1 || !ps[0].Holds {
		cancel()
		<-res
		t.Fatalf("participants %+v, %v; want one holder", ps, err)
	}
	if err := conn.Delete(dir+"/"+ps[0].Node, -1); err != nil {
		cancel()
		<-res
		t.Fatal(err)
	}
	return <-res
}

// export runs job under one of the semaphore's leases, with a live context:
// one holder while one job runs; with four jobs at once, three run and the
// fourth waits until one returns; it returns job's error and leaves no lease
// node; job's context is the lease's (it ends when the node is deleted).
func TestTourExportRuns(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ns := zktest.NewNamespace(t)
	conn := ns.Conn(t)
	const exports, max = "/limits/exports", 3
	sem, err := semaphore.New(snippetSession(t, ctx, ns), exports, max)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sem.Close() })

	// One job: the test checks the semaphore while the job waits for it.
	inside, proceed := make(chan struct{}), make(chan struct{})
	boom := errors.New("boom")
	var jobCtxErr error
	res := make(chan error, 1)
	go func() {
		res <- export(ctx, sem, func(ctx context.Context) error {
			jobCtxErr = context.Cause(ctx) // read by the test after res
			close(inside)
			select {
			case <-proceed:
			case <-ctx.Done():
				return fmt.Errorf("the lease ended while the job ran: %w", context.Cause(ctx))
			}
			return boom
		})
	}()
	snippetClosed(t, inside, "the job runs")
	ps, err := sem.Participants(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(ps) != 1 || !ps[0].Holds || ps[0].Kind != "lease" {
		t.Errorf("participants while the job runs: %+v, want one lease holder", ps)
	}
	close(proceed)
	if err := <-res; !errors.Is(err, boom) {
		t.Fatalf("export returned %v, want the job's error", err)
	}
	if jobCtxErr != nil {
		t.Errorf("the job's context had ended when the job began: %v", jobCtxErr)
	}
	snippetNoChildren(t, conn, ns.Path(exports+"/leases"))

	// Four jobs at once: each counts the jobs running and blocks until the
	// test releases it.
	const jobs = max + 1
	var running, most atomic.Int32
	entered := make(chan int, jobs)
	release := make([]chan struct{}, jobs)
	for i := range release {
		release[i] = make(chan struct{})
	}
	stop, cancelStop := context.WithTimeout(ctx, snippetWait)
	defer cancelStop()
	results := make(chan error, jobs)
	for i := 0; i < jobs; i++ {
		go func() {
			results <- export(ctx, sem, func(ctx context.Context) error {
				n := running.Add(1)
				defer running.Add(-1)
				for m := most.Load(); n > m; m = most.Load() {
					if most.CompareAndSwap(m, n) {
						break
					}
				}
				if err := ctx.Err(); err != nil {
					return fmt.Errorf("job %d: the lease has ended already: %w", i, context.Cause(ctx))
				}
				entered <- i
				select {
				case <-release[i]:
					return nil
				case <-ctx.Done():
					return fmt.Errorf("job %d: the lease ended while the job ran: %w", i, context.Cause(ctx))
				case <-stop.Done():
					return fmt.Errorf("job %d: not released", i)
				}
			})
		}()
	}
	var in []int
	for len(in) < max {
		select {
		case i := <-entered:
			in = append(in, i)
		case <-stop.Done():
			t.Fatalf("jobs running: %v, want %d", in, max)
		}
	}
	// The fourth waits in Acquire, with its node in the acquirers' mutex
	// (locks/), and its job does not run (the wait for its node ends early
	// if the job runs, so that the check below says so).
	var lockers []string
	zktest.Eventually(t, snippetWait, func() bool {
		lockers, _, err = conn.Children(ns.Path(exports + "/locks"))
		return (err == nil && len(lockers) == 1) || len(entered) > 0
	}, "one acquirer waiting in %s/locks (last seen %v)", exports, &lockers)
	notYet := time.NewTimer(300 * time.Millisecond)
	select {
	case i := <-entered:
		notYet.Stop()
		t.Fatalf("job %d ran while jobs %v held all %d leases", i, in, max)
	case <-notYet.C:
	}
	ps, err = sem.Participants(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(ps) != max {
		t.Errorf("participants while %d jobs run: %+v, want %d lease nodes", max, ps, max)
	}
	for _, p := range ps {
		if p.Kind != "lease" || !p.Holds {
			t.Errorf("participant %+v: Kind %q, Holds %v, want a holding lease", p, p.Kind, p.Holds)
		}
	}
	// One job returns: the fourth runs.
	close(release[in[0]])
	select {
	case i := <-entered:
		in = append(in, i)
	case <-stop.Done():
		t.Fatal("the fourth job did not run after one returned")
	}
	for _, i := range in[1:] {
		close(release[i])
	}
	for i := 0; i < jobs; i++ {
		if err := <-results; err != nil {
			t.Errorf("export: %v", err)
		}
	}
	if m := most.Load(); m != max {
		t.Errorf("at most %d jobs ran at once, want %d", m, max)
	}
	snippetNoChildren(t, conn, ns.Path(exports+"/leases"))

	// The job runs under the lease's context: a third party deletes the
	// lease node, and the job's context ends with that cause.
	cause := snippetLeaseLoss(t, conn, ns.Path(exports+"/leases"), func(ctx context.Context, job func(context.Context) error) error {
		return export(ctx, sem, job)
	}, sem.Participants)
	if !errors.Is(cause, recipes.ErrNodeDeleted) {
		t.Errorf("the job's context ended with %v, want ErrNodeDeleted", cause)
	}
	snippetNoChildren(t, conn, ns.Path(exports+"/leases"))
}

// readCatalog runs read while this process holds the catalog's read lock,
// which any number of readers share.
func readCatalog(ctx context.Context, rw *rwlock.RWMutex, read func(ctx context.Context) error) error {
	lease, err := rw.RLock(ctx)
	if err != nil {
		return err
	}
	defer lease.Release(context.WithoutCancel(ctx))
	return read(lease.Context())
}

// export runs job while this process holds one of the leases of sem, such
// as semaphore.New(sess, "/limits/exports", 3): at most 3 across all processes.
func export(ctx context.Context, sem *semaphore.Semaphore, job func(ctx context.Context) error) error {
	lease, err := sem.Acquire(ctx)
	if err != nil {
		return err
	}
	defer lease.Release(context.WithoutCancel(ctx))
	return job(lease.Context())
}
