package mutex_test

import (
	"errors"
	"sync"
	"testing"

	"github.com/zkrecipes/zkrecipes/internal/testkit/sessiontest"
	"github.com/zkrecipes/zkrecipes/mutex"
	"github.com/zkrecipes/zkrecipes/recipes"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// Every lock kind works over TLS (sessions on the secure port of the
// package's shared TLS server): one session holds, another's TryLock fails
// with ErrBusy and its Lock waits, and gets the lock with a greater token
// once the first unlocks; nothing is left behind.
func TestTLSLockHandover(t *testing.T) {
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			ns := sessiontest.NamespaceTLS(t)
			raw := ns.Conn(t)
			ctx := ctxT(t)
			a := k.make(t, sessiontest.ConnectTLS(t, ns), mutex.WithID("a"))
			sb := sessiontest.ConnectTLS(t, ns)
			b := k.make(t, sb, mutex.WithID("b"))

			la, err := a.Lock(ctx)
			if err != nil {
				t.Fatalf("Lock over TLS: %v", err)
			}
			if _, err := b.TryLock(ctx); !errors.Is(err, recipes.ErrBusy) {
				t.Fatalf("TryLock while held: %v, want ErrBusy", err)
			}
			// b locks on a goroutine of its own, which also unlocks (a
			// reentrant lease must be unlocked by its goroutine).
			type res struct {
				l   *mutex.Lease
				err error
			}
			got := make(chan res, 1)
			release := make(chan struct{})
			var releaseOnce sync.Once
			letGo := func() { releaseOnce.Do(func() { close(release) }) }
			t.Cleanup(letGo) // a failed test lets the goroutine end too
			unlocked := make(chan error, 1)
			go func() {
				l, err := b.Lock(ctx)
				got <- res{l, err}
				if err != nil {
					return
				}
				<-release
				unlocked <- l.Release(ctx)
			}()
			waitQueued(t, ns, k, sb)
			select {
			case r := <-got:
				t.Fatalf("second Lock returned while the first held: %v, %v", r.l, r.err)
			default:
			}
			if err := la.Release(ctx); err != nil {
				t.Fatalf("Release: %v", err)
			}
			r := sessiontest.Recv(t, got, wait, "second Lock")
			if r.err != nil {
				t.Fatalf("second Lock: %v", r.err)
			}
			if r.l.Token() <= la.Token() {
				t.Errorf("tokens %d then %d: not growing", la.Token(), r.l.Token())
			}
			letGo()
			if err := sessiontest.Recv(t, unlocked, wait, "second Release"); err != nil {
				t.Fatalf("second Release: %v", err)
			}
			zktest.Eventually(t, wait, func() bool { return len(kids(t, raw, ns)) == 0 }, "lock nodes left")
		})
	}
}
