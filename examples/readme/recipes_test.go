package readme

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/recipes"
	"github.com/zkrecipes/zkrecipes/recipes/barrier"
	"github.com/zkrecipes/zkrecipes/recipes/counter"
	"github.com/zkrecipes/zkrecipes/session"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// nextInvoiceNumber hands out distinct numbers to four sessions at once,
// and also when the answer to a write is lost: the proxy swallows the reply
// to one session's first write, whose number is then skipped, not given
// again.
func TestTourInvoiceNumbersRun(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ns := zktest.NewNamespace(t)
	p := ns.Proxy(t)
	var swallowed atomic.Int32
	full := ns.Path("/ids/invoices")
	p.OnRequest(func(r zktest.Request) zktest.Action {
		if zktest.OpName(r.Op) == "setData" && r.Path == full && swallowed.Add(1) == 1 {
			return zktest.SwallowReply
		}
		return zktest.Forward
	})
	const sessions, each = 4, 25
	var mu sync.Mutex
	seen := map[int64]bool{}
	var wg sync.WaitGroup
	errs := make(chan error, sessions)
	for i := 0; i < sessions; i++ {
		servers := ns.Servers()
		if i == 0 {
			servers = p.Servers()
		}
		s, err := session.Connect(ctx, servers, session.WithNamespace(ns.Root))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		ids, err := counter.New(s, "/ids/invoices")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ids.Close() })
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := 0; k < each; k++ {
				n, err := nextInvoiceNumber(ctx, ids)
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				dup := seen[n]
				seen[n] = true
				mu.Unlock()
				if dup {
					errs <- fmt.Errorf("number %d handed out twice", n)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if swallowed.Load() == 0 {
		t.Fatal("no write went through the proxy")
	}
	if len(seen) != sessions*each {
		t.Fatalf("%d numbers, want %d", len(seen), sessions*each)
	}
}

// runBatchStep runs each worker's step only once all three have entered
// (the barrier's "ready" node exists when a step starts) and returns only
// once all three steps have finished.
func TestTourBatchStepRuns(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ns := zktest.NewNamespace(t)
	conn := ns.Conn(t)
	const workers = 3
	var finished atomic.Int32
	res := make(chan error, workers)
	for i := 0; i < workers; i++ {
		d, err := barrier.NewDouble(snippetSession(t, ctx, ns), "/batches/nightly", workers)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { d.Close() })
		go func() {
			err := runBatchStep(ctx, d, func(ctx context.Context) error {
				ok, _, err := conn.Exists(ns.Path("/batches/nightly/ready"))
				if err == nil && !ok {
					err = errors.New("a step started before every worker entered")
				}
				finished.Add(1)
				return err
			})
			if err == nil && finished.Load() != workers {
				err = fmt.Errorf("runBatchStep returned after %d of %d steps", finished.Load(), workers)
			}
			res <- err
		}()
	}
	for i := 0; i < workers; i++ {
		select {
		case err := <-res:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(snippetWait):
			t.Fatal("runBatchStep did not return")
		}
	}
	snippetNoChildren(t, conn, ns.Path("/batches/nightly"))
}

// runBatchStep runs step once every worker of the batch has entered d, such
// as barrier.NewDouble(sess, "/batches/nightly", 3), and returns once every
// worker has finished its step and left.
func runBatchStep(ctx context.Context, d *barrier.DoubleBarrier, step func(ctx context.Context) error) error {
	if err := d.Enter(ctx); err != nil {
		return err
	}
	return errors.Join(step(ctx), d.Leave(ctx))
}

// nextInvoiceNumber (the pattern of recipes/counter's package doc) returns a number that no other process (Go, or Java on
// Curator's DistributedAtomicLong) gets from ids, such as
// counter.New(sess, "/ids/invoices"). After a lost answer it writes again
// only if nothing was written since, so no number is handed out twice (one
// may be skipped).
func nextInvoiceNumber(ctx context.Context, ids *counter.Counter[int64]) (int64, error) {
	v, err := ids.Increment(ctx)
	for errors.Is(err, recipes.ErrUnknownOutcome) {
		var ok bool
		if v, ok, err = ids.TrySet(ctx, v, v.Value+1); err == nil && !ok {
			v, err = ids.Increment(ctx) // someone wrote since, perhaps this call: take another
		}
	}
	return v.Value, err
}
