package rwlock_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/zkrecipes/zkrecipes/internal/testkit/sessiontest"
	"github.com/zkrecipes/zkrecipes/recipes"
	"github.com/zkrecipes/zkrecipes/rwlock"
	"github.com/zkrecipes/zkrecipes/session"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// downgradeWays are the ways to downgrade: WriteLease.Downgrade on both
// kinds, and Curator's (RLock while holding the write lock, then Release the
// write lease) on the Reentrant kind. Each runs in one goroutine, as a
// Reentrant lock requires.
var downgradeWays = []struct {
	name string
	kind string
	down func(ctx context.Context, lk locker, w *rwlock.WriteLease) (*rwlock.Lease, error)
}{
	{"rwmutex/Downgrade", "rwmutex", func(ctx context.Context, _ locker, w *rwlock.WriteLease) (*rwlock.Lease, error) {
		return w.Downgrade(ctx)
	}},
	{"reentrant/Downgrade", "reentrant", func(ctx context.Context, _ locker, w *rwlock.WriteLease) (*rwlock.Lease, error) {
		return w.Downgrade(ctx)
	}},
	{"reentrant/RLock+Release", "reentrant", func(ctx context.Context, lk locker, w *rwlock.WriteLease) (*rwlock.Lease, error) {
		r, err := lk.RLock(ctx)
		if err != nil {
			return nil, err
		}
		return r, w.Release(ctx)
	}},
}

func kindNamed(t testing.TB, name string) kind {
	t.Helper()
	for _, k := range kinds {
		if k.name == name {
			return k
		}
	}
	t.Fatalf("no kind %q", name)
	return kind{}
}

// TestDowngrade: the CURATOR-621 scenario. A writer holds; another writer
// and a reader queue behind it; the holder downgrades. Its read node carries
// the write node's sequence and is EPHEMERAL, so when the write node goes
// the queued writer still waits (for the downgraded reader), and the queued
// reader, behind that writer, waits too. Only when the downgraded reader
// unlocks does the writer get the lock.
func TestDowngrade(t *testing.T) {
	for _, way := range downgradeWays {
		t.Run(way.name, func(t *testing.T) {
			ns := zktest.NewNamespace(t)
			raw := ns.Conn(t)
			ctx := ctxT(t)
			k := kindNamed(t, way.kind)
			hs := connect(t, ns)
			holder := k.make(t, hs, rwlock.WithID("holder"))
			w2s, _, w2rd := connectReads(t, ns)
			w2 := k.make(t, w2s, rwlock.WithID("W2"))
			rs, _, rrd := connectReads(t, ns)
			r := k.make(t, rs, rwlock.WithID("R"))

			// The holder's goroutine: Lock, then downgrade on request, then
			// Release the read lease on request.
			type step struct {
				w, r *rwlock.Lease
				err  error
			}
			steps := make(chan step, 2)
			downReq, unlockReq := make(chan struct{}), make(chan struct{})
			unlocked := make(chan error, 1)
			var clock atomic.Int64
			var downN, unlockN atomic.Int64
			done := make(chan struct{})
			hctx, stop := context.WithCancel(ctx)
			t.Cleanup(func() { stop(); <-done })
			go func() {
				ctx := hctx
				defer close(done)
				wl, err := holder.Lock(ctx)
				steps <- step{w: leaseOf(wl), err: err}
				if err != nil {
					return
				}
				select {
				case <-downReq:
				case <-ctx.Done():
					return
				}
				rl, err := way.down(ctx, holder, wl)
				downN.Store(clock.Add(1))
				steps <- step{w: &wl.Lease, r: rl, err: err}
				if err != nil || rl == nil {
					return
				}
				select {
				case <-unlockReq:
				case <-ctx.Done():
				}
				unlockN.Store(clock.Add(1))
				unlocked <- rl.Release(context.WithoutCancel(ctx))
			}()
			first := sessiontest.Recv(t, steps, wait, "holder's Lock")
			if first.err != nil {
				t.Fatal(first.err)
			}
			wa := lockAsync(t, ctx, w2, Write, &clock)
			waitWaiting(t, ctx, w2, w2rd, 2, func(p recipes.Participant) bool { return p.ID == "W2" })
			ra := lockAsync(t, ctx, r, Read, &clock)
			waitWaiting(t, ctx, r, rrd, 3, func(p recipes.Participant) bool { return p.ID == "R" })

			close(downReq)
			down := sessiontest.Recv(t, steps, wait, "downgrade")
			if down.err != nil {
				t.Fatalf("downgrade: %v", down.err)
			}
			rl := down.r
			if rwlock.LeaseKind(rl) != Read || rl.Err() != nil {
				t.Fatalf("downgraded lease: side %v err %v", rwlock.LeaseKind(rl), rl.Err())
			}
			if !errors.Is(down.w.Err(), recipes.ErrReleased) {
				t.Fatalf("write lease after the downgrade: %v, want ErrReleased", down.w.Err())
			}
			// The read node: EPHEMERAL, named with the writer's sequence.
			wname := first.w.Node()
			wantName := rl.Node()[:len("_c_")+36+1] + rwlock.ReadMarker + wname[len(wname)-10:]
			if rl.Node() != wantName || !nodeName.MatchString(rl.Node()) {
				t.Fatalf("downgraded read node %q, want %q (the writer's sequence)", rl.Node(), wantName)
			}
			data, st, err := raw.Get(rwlock.NodePath(rl))
			if err != nil || string(data) != "holder" || st.EphemeralOwner != hs.SessionID() || st.Czxid != rl.Token() {
				t.Fatalf("read node: data %q stat %+v err %v", data, st, err)
			}
			// The write node is gone; W2 and R still wait.
			zktest.Eventually(t, wait, func() bool {
				ok, _, err := raw.Exists(rwlock.NodePath(first.w))
				return err == nil && !ok
			}, "write node still there after the downgrade")
			ps, err := r.Participants(ctx)
			if err != nil || len(ps) != 3 || ps[0].Node != rl.Node() || !ps[0].Holds || ps[1].ID != "W2" || ps[1].Holds || ps[2].ID != "R" || ps[2].Holds {
				t.Fatalf("after the downgrade: %+v, %v", ps, err)
			}
			// W2 reads the directory again when the write node goes, and
			// then waits for the downgraded reader's node.
			w2rd.waitRead(t, rl.Node())
			wa.pending(t, "W2 after the downgrade")
			ra.pending(t, "R behind W2")

			close(unlockReq)
			if err := sessiontest.Recv(t, unlocked, wait, "read Release"); err != nil {
				t.Fatal(err)
			}
			g := wa.held(t)
			if g.n < unlockN.Load() {
				t.Fatalf("W2 acquired (#%d) before the downgraded reader unlocked (#%d)", g.n, unlockN.Load())
			}
			ra.pending(t, "R behind W2 holding")
			u := wa.unlock(t)
			if gr := ra.held(t); gr.n < u {
				t.Fatalf("R acquired (#%d) before W2 unlocked (#%d)", gr.n, u)
			}
			ra.unlock(t)
			waitEmpty(t, raw, ns)
		})
	}
}

func leaseOf(w *rwlock.WriteLease) *rwlock.Lease {
	if w == nil {
		return nil
	}
	return &w.Lease
}

// TestDowngradeLostWriteNode: when our write node was deleted by someone
// else, Downgrade fails with ErrNodeDeleted and creates nothing, even while the
// lease does not know it yet (no node watch): the read node's create is
// conditional on the write node.
func TestDowngradeLostWriteNode(t *testing.T) {
	for _, watch := range []bool{false, true} {
		t.Run(map[bool]string{false: "nodewatch=false", true: "nodewatch=true"}[watch], func(t *testing.T) {
			ns := zktest.NewNamespace(t)
			raw := ns.Conn(t)
			ctx := ctxT(t)
			m := newRWMutex(t, connect(t, ns), rwlock.WithNodeWatch(watch))
			wl, err := m.Lock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if err := raw.Delete(rwlock.NodePath(&wl.Lease), -1); err != nil {
				t.Fatal(err)
			}
			if watch {
				if err := sessiontest.WaitDone(t, wl, wait); !errors.Is(err, recipes.ErrNodeDeleted) {
					t.Fatalf("lease after the delete: %v", err)
				}
			}
			rl, err := wl.Downgrade(ctx)
			if !errors.Is(err, recipes.ErrNodeDeleted) {
				t.Fatalf("Downgrade after the write node was deleted: %v, %v; want ErrNodeDeleted", rl, err)
			}
			if ks := nodes(t, raw, ns); len(ks) != 0 {
				t.Fatalf("nodes after a failed downgrade: %q", ks)
			}
			if err := wl.Release(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestDowngradeMisuse: a downgrade of an unlocked or already downgraded
// write lease fails; a Reentrant write lease downgrades only in its own
// goroutine; nil ctx is refused.
func TestDowngradeMisuse(t *testing.T) {
	ns := zktest.NewNamespace(t)
	raw := ns.Conn(t)
	ctx := ctxT(t)
	m := newRWMutex(t, connect(t, ns))
	wl, err := m.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var nilCtx context.Context
	if _, err := wl.Downgrade(nilCtx); !errors.Is(err, session.ErrBadArgument) {
		t.Fatalf("Downgrade(nil): %v", err)
	}
	rl, err := wl.Downgrade(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := wl.Downgrade(ctx); !errors.Is(err, recipes.ErrReleased) {
		t.Fatalf("second Downgrade: %v, want ErrReleased", err)
	}
	// Another goroutine may unlock an RWMutex's downgraded lease.
	unl := make(chan error, 1)
	go func() { unl <- rl.Release(ctx) }()
	if err := sessiontest.Recv(t, unl, wait, "Release"); err != nil {
		t.Fatal(err)
	}
	waitEmpty(t, raw, ns)

	re := newReentrant(t, connect(t, ns))
	rw, err := re.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	other := make(chan error, 1)
	go func() {
		_, err := rw.Downgrade(ctx)
		other <- err
	}()
	if err := sessiontest.Recv(t, other, wait, "Downgrade from another goroutine"); !errors.Is(err, recipes.ErrNotOwner) {
		t.Fatalf("Downgrade from another goroutine: %v, want ErrNotOwner", err)
	}
	if err := rw.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := rw.Downgrade(ctx); !errors.Is(err, recipes.ErrReleased) {
		t.Fatalf("Downgrade after Release: %v, want ErrReleased", err)
	}
	waitEmpty(t, raw, ns)
}

// TestDowngradeSameSession: the downgraded read node sorts before a writer
// of the same process (same session) queued meanwhile.
func TestDowngradeSameSession(t *testing.T) {
	ns := zktest.NewNamespace(t)
	raw := ns.Conn(t)
	ctx := ctxT(t)
	s, _, rd := connectReads(t, ns)
	m := newRWMutex(t, s)
	wl, err := m.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var clock atomic.Int64
	wa := lockAsync(t, ctx, m, Write, &clock)
	rd.waitRead(t, wl.Node())
	rl, err := wl.Downgrade(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rd.waitRead(t, rl.Node())
	wa.pending(t, "the process's second writer after the downgrade")
	u := clock.Add(1)
	if err := rl.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if g := wa.held(t); g.n < u {
		t.Fatal("second writer acquired before the downgraded reader unlocked")
	}
	wa.unlock(t)
	waitEmpty(t, raw, ns)
}
