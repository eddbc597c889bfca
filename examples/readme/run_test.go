package readme

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/zkrecipes/zkrecipes/mutex"
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
