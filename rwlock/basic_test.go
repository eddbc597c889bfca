package rwlock_test

import (
	"errors"
	"regexp"
	"sync/atomic"
	"testing"

	"github.com/zkrecipes/zkrecipes/recipes"
	"github.com/zkrecipes/zkrecipes/rwlock"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// nodeName is Curator's protected read or write node name.
var nodeName = regexp.MustCompile(`^_c_[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}-__(READ|WRIT)__[0-9]{10}$`)

// TestNormalPath: for each kind, readers of two sessions hold at once; a
// writer queues behind them and holds once both unlock; readers and TryLocks
// arriving meanwhile wait or fail; node names, data, tokens and Participants
// are as documented; nothing is left behind.
func TestNormalPath(t *testing.T) {
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			ns := zktest.NewNamespace(t)
			raw := ns.Conn(t)
			ctx := ctxT(t)
			r1 := k.make(t, connect(t, ns), rwlock.WithID("r1"))
			r2 := k.make(t, connect(t, ns), rwlock.WithID("r2"))
			ws, _, wrd := connectReads(t, ns)
			w := k.make(t, ws, rwlock.WithID("w"))
			late := k.make(t, connect(t, ns), rwlock.WithID("late"))

			// Two readers hold together (the second without waiting).
			l1, err := r1.RLock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			l2, err := r2.TryRLock(ctx)
			if err != nil {
				t.Fatalf("TryRLock beside a reader: %v", err)
			}
			for _, l := range []*rwlock.Lease{l1, l2} {
				if rwlock.LeaseKind(l) != Read || l.Err() != nil || l.Token() <= 0 || !nodeName.MatchString(l.Node()) {
					t.Fatalf("read lease: side %v, err %v, token %d, node %q", rwlock.LeaseKind(l), l.Err(), l.Token(), l.Node())
				}
			}
			if l2.Token() <= l1.Token() {
				t.Errorf("tokens %d then %d: not growing", l1.Token(), l2.Token())
			}
			if _, err := w.TryLock(ctx); !errors.Is(err, recipes.ErrBusy) {
				t.Fatalf("TryLock while read-locked: %v, want ErrBusy", err)
			}
			if ks := nodes(t, raw, ns); len(ks) != 2 {
				t.Fatalf("a failed TryLock left nodes: %q", ks)
			}

			// A writer queues behind both readers.
			var clock atomic.Int64
			wa := lockAsync(t, ctx, w, Write, &clock)
			ps := waitWaiting(t, ctx, w, wrd, 3, func(p recipes.Participant) bool { return p.ID == "w" })
			wantPs := []struct {
				id    string
				side  Side
				holds bool
			}{{"r1", Read, true}, {"r2", Read, true}, {"w", Write, false}}
			for i, p := range ps {
				if p.ID != wantPs[i].id || p.Kind != wantPs[i].side || p.Holds != wantPs[i].holds || !nodeName.MatchString(p.Node) {
					t.Fatalf("participant %d: %+v, want %+v", i, p, wantPs[i])
				}
			}
			if ps[0].Node != l1.Node() || ps[0].Token != l1.Token() || ps[0].SessionID != rwlock.NodeSessionID(l1) {
				t.Fatalf("participant 0 %+v does not match lease %s", ps[0], l1.Node())
			}
			// A reader arriving now waits for the writer: TryRLock fails.
			if _, err := late.TryRLock(ctx); !errors.Is(err, recipes.ErrBusy) {
				t.Fatalf("TryRLock behind a queued writer: %v, want ErrBusy", err)
			}
			wa.pending(t, "writer behind two readers")

			u1 := clock.Add(1)
			if err := l1.Release(ctx); err != nil {
				t.Fatal(err)
			}
			wa.pending(t, "writer behind one reader") // still waits for r2: it read r2's node
			u2 := clock.Add(1)
			if err := l2.Release(ctx); err != nil {
				t.Fatal(err)
			}
			got := wa.held(t)
			if got.n < u2 || got.n < u1 {
				t.Fatalf("writer acquired (#%d) before the readers unlocked (#%d, #%d)", got.n, u1, u2)
			}
			if rwlock.LeaseKind(got.l) != Write || !nodeName.MatchString(got.l.Node()) || rwlock.NodeID(got.l) != "w" || got.l.Token() <= l2.Token() {
				t.Fatalf("write lease: side %v node %q id %q token %d", rwlock.LeaseKind(got.l), got.l.Node(), rwlock.NodeID(got.l), got.l.Token())
			}
			data, st, err := raw.Get(rwlock.NodePath(got.l))
			if err != nil || string(data) != "w" || st.EphemeralOwner != rwlock.NodeSessionID(got.l) || st.Czxid != got.l.Token() {
				t.Fatalf("write node: data %q stat %+v err %v", data, st, err)
			}
			// While a writer holds, nobody else gets either side.
			if _, err := late.TryRLock(ctx); !errors.Is(err, recipes.ErrBusy) {
				t.Fatalf("TryRLock while write-locked: %v, want ErrBusy", err)
			}
			if _, err := late.TryLock(ctx); !errors.Is(err, recipes.ErrBusy) {
				t.Fatalf("TryLock while write-locked: %v, want ErrBusy", err)
			}
			ps, err = late.Participants(ctx)
			if err != nil || len(ps) != 1 || ps[0].Kind != Write || !ps[0].Holds || ps[0].Node != got.l.Node() {
				t.Fatalf("participants while write-locked: %+v, %v", ps, err)
			}
			wa.unlock(t)
			if got.l.Err() == nil || !errors.Is(got.l.Err(), recipes.ErrReleased) {
				t.Fatalf("write lease after Release: %v, want ErrReleased", got.l.Err())
			}
			for _, l := range []*rwlock.Lease{l1, l2} {
				if !errors.Is(l.Err(), recipes.ErrReleased) {
					t.Fatalf("read lease after Release: %v", l.Err())
				}
				if err := l.Release(ctx); err != nil {
					t.Fatalf("second Release: %v", err)
				}
			}
			waitEmpty(t, raw, ns)
			ps, err = late.Participants(ctx)
			if err != nil || len(ps) != 0 {
				t.Fatalf("participants of a free lock: %+v, %v", ps, err)
			}
		})
	}
}

// TestKindsExcludeEachOther: an RWMutex and a Reentrant on one path share
// one queue: a writer of one kind excludes readers of the other.
func TestKindsExcludeEachOther(t *testing.T) {
	ns := zktest.NewNamespace(t)
	ctx := ctxT(t)
	a := newRWMutex(t, connect(t, ns))
	b := newReentrant(t, connect(t, ns))
	wl, err := a.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.TryRLock(ctx); !errors.Is(err, recipes.ErrBusy) {
		t.Fatalf("Reentrant TryRLock while an RWMutex writes: %v", err)
	}
	if err := wl.Release(ctx); err != nil {
		t.Fatal(err)
	}
	bl, err := b.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.TryRLock(ctx); !errors.Is(err, recipes.ErrBusy) {
		t.Fatalf("RWMutex TryRLock while a Reentrant writes: %v", err)
	}
	if err := bl.Release(ctx); err != nil {
		t.Fatal(err)
	}
}
