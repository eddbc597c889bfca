package mutex_test

import (
	"context"
	"errors"
	"regexp"
	"testing"

	"github.com/zkrecipes/zkrecipes/internal/testkit/sessiontest"
	"github.com/zkrecipes/zkrecipes/mutex"
	"github.com/zkrecipes/zkrecipes/recipes"
	"github.com/zkrecipes/zkrecipes/zktest"
)

var nodeRE = regexp.MustCompile(`^_c_[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}-lock-[0-9]{10}$`)

func TestLockUnlock(t *testing.T) {
	for _, watch := range []bool{true, false} {
		t.Run(map[bool]string{true: "nodewatch", false: "nowatch"}[watch], func(t *testing.T) {
			ns := zktest.NewNamespace(t)
			s := connect(t, ns)
			raw := ns.Conn(t)
			m := newMutex(t, s, mutex.WithID("worker-1"), mutex.WithNodeWatch(watch))
			ctx := ctxT(t)

			l, err := m.Lock(ctx)
			if err != nil {
				t.Fatalf("Lock: %v", err)
			}
			k := kids(t, raw, ns)
			if len(k) != 1 || !nodeRE.MatchString(k[0]) || l.Node() != k[0] {
				t.Fatalf("nodes %q, lease node %q", k, l.Node())
			}
			data, st, err := raw.Get(ns.Path(lockPath) + "/" + k[0])
			if err != nil {
				t.Fatal(err)
			}
			if string(data) != "worker-1" || mutex.NodeID(l) != "worker-1" {
				t.Fatalf("data %q id %q", data, mutex.NodeID(l))
			}
			if l.Token() != st.Czxid {
				t.Fatalf("Token %d, czxid %d", l.Token(), st.Czxid)
			}
			if st.EphemeralOwner != s.SessionID() {
				t.Fatalf("owner %x, session %x", st.EphemeralOwner, s.SessionID())
			}
			if mutex.NodePath(l) != ns.Path(lockPath)+"/"+k[0] {
				t.Fatalf("Path %q", mutex.NodePath(l))
			}
			h, ok, err := m.Holder(ctx)
			if err != nil || !ok || !h.Holds || h.ID != "worker-1" || h.Node != k[0] || h.Token != l.Token() {
				t.Fatalf("Holder = %+v, %v", h, err)
			}
			if l.Err() != nil {
				t.Fatalf("Err while held: %v", l.Err())
			}
			if err := l.Release(ctx); err != nil {
				t.Fatalf("Release: %v", err)
			}
			if err := sessiontest.WaitDone(t, l, wait); !errors.Is(err, recipes.ErrReleased) {
				t.Fatalf("Err after Release = %v", err)
			}
			if !errors.Is(context.Cause(l.Context()), recipes.ErrReleased) {
				t.Fatalf("Context cause = %v", context.Cause(l.Context()))
			}
			if k := kids(t, raw, ns); len(k) != 0 {
				t.Fatalf("nodes left: %q", k)
			}
			if err := l.Release(ctx); err != nil {
				t.Fatalf("second Release: %v", err)
			}
			h, ok, err = m.Holder(ctx)
			if err != nil || ok {
				t.Fatalf("Holder after Release = %+v, %v", h, err)
			}

			// A second cycle gets a greater token.
			l2, err := m.Lock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if l2.Token() <= l.Token() {
				t.Fatalf("token %d after %d", l2.Token(), l.Token())
			}
			if err := l2.Release(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}
