package readme

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/session"
	"github.com/zkrecipes/zkrecipes/zktest"
)

func TestMain(m *testing.M) { zktest.Main(m) } // one real server per package, plus a leak check

func TestBillingLockEndsOnPartition(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ns := zktest.NewNamespace(t) // a fresh root path, removed after the test
	p := ns.Proxy(t)             // a fault proxy: Cut, Partition, Heal, Refuse, SetLatency
	sess, err := session.Connect(ctx, p.Servers(),
		session.WithNamespace(ns.Root), session.WithSessionTimeout(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := sess.Close(); err != nil {
			t.Error(err)
		}
	})

	err = withBillingLock(ctx, sess, func(ctx context.Context, token int64) error {
		p.Partition() // this process loses ZooKeeper while it holds the lock
		<-ctx.Done()  // the lease ends before the server can expire the session
		return context.Cause(ctx)
	})
	if !errors.Is(err, session.ErrSuspended) {
		t.Fatalf("got %v, want the lease to end with session.ErrSuspended", err)
	}
}
