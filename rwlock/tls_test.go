package rwlock_test

import (
	"errors"
	"sync/atomic"
	"testing"

	"github.com/zkrecipes/zkrecipes/internal/testkit/sessiontest"
	"github.com/zkrecipes/zkrecipes/recipes"
	"github.com/zkrecipes/zkrecipes/rwlock"
)

// Both kinds work over TLS (sessions on the secure port of the package's
// shared TLS server): two readers hold together, a writer's TryLock fails
// with ErrBusy and its Lock waits until both readers unlock, then holds
// with a greater token; nothing is left behind.
func TestTLSReadersThenWriter(t *testing.T) {
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			ns := sessiontest.NamespaceTLS(t)
			raw := ns.Conn(t)
			ctx := ctxT(t)
			r1 := k.make(t, sessiontest.ConnectTLS(t, ns), rwlock.WithID("r1"))
			r2 := k.make(t, sessiontest.ConnectTLS(t, ns), rwlock.WithID("r2"))
			w := k.make(t, sessiontest.ConnectTLS(t, ns), rwlock.WithID("w"))

			var clock atomic.Int64
			ra1 := lockAsync(t, ctx, r1, Read, &clock)
			l1 := ra1.held(t)
			ra2 := lockAsync(t, ctx, r2, Read, &clock)
			l2 := ra2.held(t)
			if _, err := w.TryLock(ctx); !errors.Is(err, recipes.ErrBusy) {
				t.Fatalf("TryLock while read-locked: %v, want ErrBusy", err)
			}
			wa := lockAsync(t, ctx, w, Write, &clock)
			waitNodes(t, raw, ns, 3) // the writer queued behind both readers
			wa.pending(t, "writer behind two readers")
			u1 := ra1.unlock(t)
			wa.pending(t, "writer behind one reader")
			u2 := ra2.unlock(t)
			wr := wa.held(t)
			if wr.n < u1 || wr.n < u2 {
				t.Errorf("writer held at %d, readers unlocked at %d and %d", wr.n, u1, u2)
			}
			if wr.l.Token() <= l1.l.Token() || wr.l.Token() <= l2.l.Token() {
				t.Errorf("writer token %d, reader tokens %d and %d: not growing", wr.l.Token(), l1.l.Token(), l2.l.Token())
			}
			wa.unlock(t)
			waitEmpty(t, raw, ns)
		})
	}
}
