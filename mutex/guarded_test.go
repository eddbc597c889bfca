package mutex_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/internal/testkit/sessiontest"
	"github.com/zkrecipes/zkrecipes/leader"
	"github.com/zkrecipes/zkrecipes/mutex"
	"github.com/zkrecipes/zkrecipes/recipes"
	"github.com/zkrecipes/zkrecipes/rwlock"
	"github.com/zkrecipes/zkrecipes/semaphore"
	"github.com/zkrecipes/zkrecipes/session"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// serverData reads a node's data through a raw connection ("" and false if
// it does not exist).
func serverData(t *testing.T, c *zk.Conn, p string) (string, bool) {
	t.Helper()
	b, _, err := c.Get(p)
	if errors.Is(err, zk.ErrNoNode) {
		return "", false
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(b), true
}

// TestCommitWhileHeld: a holder's guarded write commits every operation
// in one transaction, on recipe paths under the session's namespace; a
// refused operation (a stale version) commits nothing of the transaction.
func TestCommitWhileHeld(t *testing.T) {
	ns := zktest.NewNamespace(t)
	raw := ns.Conn(t)
	ctx := ctxT(t)
	m := mutexOnOwnSession(t, ns)
	l, err := m.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(ctx)
	res, err := l.Commit(ctx,
		&zk.CreateRequest{Path: "/config", Data: []byte("v1")},
		&zk.SetDataRequest{Path: "/config", Data: []byte("v2"), Version: 0})
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 2 || res[0].String != ns.Path("config") || res[1].Stat == nil || res[1].Stat.Version != 1 {
		t.Fatalf("responses %+v: want the create's path and the setData's stat (version 1)", res)
	}
	if d, _ := serverData(t, raw, ns.Path("config")); d != "v2" {
		t.Fatalf("server has %q, want v2", d)
	}
	// A stale version: nothing of the transaction commits.
	_, err = l.Commit(ctx,
		&zk.CreateRequest{Path: "/other", Data: []byte("x")},
		&zk.SetDataRequest{Path: "/config", Data: []byte("v3"), Version: 0})
	if !errors.Is(err, zk.ErrBadVersion) || errors.Is(err, recipes.ErrNotHeld) {
		t.Fatalf("commit with a stale version: %v, want zk.ErrBadVersion", err)
	}
	if _, ok := serverData(t, raw, ns.Path("other")); ok {
		t.Fatal("the create of a failed transaction committed")
	}
	// Just the check: the lease holds.
	if _, err := l.Commit(ctx); err != nil {
		t.Fatalf("an empty guarded write (the check alone): %v", err)
	}
}

// TestCommitServerCheckedAfterThirdPartyDelete: with the node watch off,
// a holder whose node a third party deleted still believes it holds (Err is
// nil); its guarded write fails with ErrNotHeld all the same, and nothing
// commits.
func TestCommitServerCheckedAfterThirdPartyDelete(t *testing.T) {
	ns := zktest.NewNamespace(t)
	raw := ns.Conn(t)
	ctx := ctxT(t)
	m, err := mutex.New(connect(t, ns), lockPath, mutex.WithNodeWatch(false))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	l, err := m.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := raw.Delete(ns.Path(lockPath)+"/"+l.Node(), -1); err != nil {
		t.Fatal(err)
	}
	if l.Err() != nil {
		t.Fatalf("the lease already knows: %v (the test needs a holder that believes it holds)", l.Err())
	}
	_, err = l.Commit(ctx, &zk.CreateRequest{Path: "/stale", Data: []byte("late")})
	if !errors.Is(err, recipes.ErrNotHeld) {
		t.Fatalf("guarded write after a third-party delete: %v, want ErrNotHeld", err)
	}
	if _, ok := serverData(t, raw, ns.Path("stale")); ok {
		t.Fatal("a guarded write committed after its lease's node was deleted")
	}
}

// TestCommitAfterPartition: a holder is partitioned until the server
// expires its session, and another session takes the lock and writes; the
// old holder's guarded write, attempted while it is cut off (SessionOnly:
// it still believes it holds) and after the heal, fails, and the server
// keeps the new holder's data. Under the Standard policy the lease has ended
// at the suspension, and the write is refused before anything is sent.
func TestCommitAfterPartition(t *testing.T) {
	for _, policy := range []session.LossPolicy{session.SessionOnly, session.Standard} {
		t.Run(policy.String(), func(t *testing.T) {
			ns := zktest.NewNamespace(t)
			raw := ns.Conn(t)
			ctx := ctxT(t)
			hs, p := sessiontest.ConnectProxy(t, ns, session.WithLossPolicy(policy), session.WithSessionTimeout(4*time.Second))
			old, err := mutex.New(hs, lockPath)
			if err != nil {
				t.Fatal(err)
			}
			defer old.Close()
			l, err := old.Lock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := l.Commit(ctx, &zk.CreateRequest{Path: "/owner", Data: []byte("old")}); err != nil {
				t.Fatal(err)
			}
			creds := p.Sessions()
			p.Partition()
			if err := zktest.ExpireSession(ctx, ns.Servers(), creds[len(creds)-1]); err != nil {
				t.Fatal(err)
			}
			next := mutexOnOwnSession(t, ns)
			nl, err := next.Lock(ctx) // the old holder's node went with its session
			if err != nil {
				t.Fatal(err)
			}
			defer nl.Release(ctx)
			if _, err := nl.Commit(ctx, &zk.SetDataRequest{Path: "/owner", Data: []byte("new"), Version: -1}); err != nil {
				t.Fatal(err)
			}
			if policy == session.SessionOnly && l.Err() != nil {
				t.Fatalf("SessionOnly: the old lease already ended (%v) before its session's timeout", l.Err())
			}
			if policy == session.Standard {
				select {
				case <-l.Done():
				case <-time.After(wait):
					t.Fatal("Standard: the partitioned holder's lease never ended")
				}
			}
			// While cut off: the write goes nowhere, or to a dead session.
			cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
			start := time.Now()
			_, err = l.Commit(cctx, &zk.SetDataRequest{Path: "/owner", Data: []byte("old again"), Version: -1})
			cancel()
			if err == nil {
				t.Fatal("the partitioned holder's guarded write committed")
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Fatalf("the guarded write with a 300 ms ctx returned after %v", d)
			}
			if policy == session.Standard && !errors.Is(err, recipes.ErrNotHeld) {
				t.Fatalf("Standard: %v, want ErrNotHeld (the lease ended at the suspension)", err)
			}
			p.Heal()
			// Once the client learns that its session expired, the lease
			// ends (SessionOnly: at Lost), and the write is refused.
			select {
			case <-l.Done():
			case <-time.After(wait):
				t.Fatal("the old lease never ended after the heal")
			}
			_, err = l.Commit(ctx, &zk.SetDataRequest{Path: "/owner", Data: []byte("old after heal"), Version: -1})
			if !errors.Is(err, recipes.ErrNotHeld) {
				t.Fatalf("after the heal: %v, want ErrNotHeld", err)
			}
			if d, _ := serverData(t, raw, ns.Path("owner")); d != "new" {
				t.Fatalf("the server has %q, want the new holder's %q", d, "new")
			}
		})
	}
}

// TestCommitBadInput: a nil lease or ctx, an operation of another type, a
// nil one, a bad path, and a NonFair lease (whose node name every holder
// shares) are refused with ErrBadArgument, and nothing is sent.
func TestCommitBadInput(t *testing.T) {
	ns := zktest.NewNamespace(t)
	ctx := ctxT(t)
	s := connect(t, ns)
	m := mutexOnOwnSession(t, ns)
	l, err := m.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(ctx)
	var nilLease *mutex.Lease
	var nilCreate *zk.CreateRequest
	for name, call := range map[string]func() error{
		"nil lease":  func() error { _, err := nilLease.Commit(ctx); return err },
		"nil ctx":    func() error { _, err := l.Commit(nil); return err },
		"nil op":     func() error { _, err := l.Commit(ctx, nil); return err },
		"nil create": func() error { _, err := l.Commit(ctx, nilCreate); return err },
		"wrong type": func() error { _, err := l.Commit(ctx, "set /a"); return err },
		"bad path":   func() error { _, err := l.Commit(ctx, &zk.CreateRequest{Path: "no-slash"}); return err },
	} {
		if err := call(); !errors.Is(err, session.ErrBadArgument) {
			t.Errorf("%s: %v, want ErrBadArgument", name, err)
		}
	}
	nf, err := mutex.NewNonFair(s, "/nf")
	if err != nil {
		t.Fatal(err)
	}
	defer nf.Close()
	nl, err := nf.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer nl.Release(ctx)
	if _, err := nl.Commit(ctx); !errors.Is(err, session.ErrBadArgument) {
		t.Errorf("NonFair lease: %v, want ErrBadArgument", err)
	}
}

// TestCommitEveryLeaseKind: a mutex lease, a write lease, a semaphore lease
// and a leader's term commit while they hold and return ErrNotHeld once they
// have ended (released, downgraded, resigned); the error names its recipe
// and path once, first, as every recipe's errors do.
func TestCommitEveryLeaseKind(t *testing.T) {
	ns := zktest.NewNamespace(t)
	raw := ns.Conn(t)
	ctx := ctxT(t)
	s := connect(t, ns)
	write := func(p string) *zk.CreateRequest { return &zk.CreateRequest{Path: p, Data: []byte("x")} }
	check := func(what string, commit func(op any) error, end func(), p, name string) {
		t.Helper()
		if err := commit(write(p)); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if _, ok := serverData(t, raw, ns.Path(p)); !ok {
			t.Fatalf("%s: the write did not commit", what)
		}
		end()
		err := commit(write(p + "-late"))
		if !errors.Is(err, recipes.ErrNotHeld) || !errors.Is(err, recipes.ErrReleased) {
			t.Fatalf("%s after its end: %v, want ErrNotHeld and ErrReleased", what, err)
		}
		_, quoted, _ := strings.Cut(name, " ")
		if msg := err.Error(); !strings.HasPrefix(msg, name+": ") || strings.Count(msg, quoted) != 1 {
			t.Fatalf("%s after its end: %q, want it to start with %s and name the path once", what, msg, name)
		}
		if _, ok := serverData(t, raw, ns.Path(p+"-late")); ok {
			t.Fatalf("%s: a write after the end committed", what)
		}
	}

	mx, err := mutex.New(s, "/mx")
	if err != nil {
		t.Fatal(err)
	}
	defer mx.Close()
	ml, err := mx.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	check("mutex lease", func(op any) error { _, err := ml.Commit(ctx, op); return err },
		func() { _ = ml.Release(ctx) }, "/m", `mutex "/mx"`)

	rw, err := rwlock.New(s, "/rw")
	if err != nil {
		t.Fatal(err)
	}
	defer rw.Close()
	wl, err := rw.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var rl *rwlock.Lease
	check("write lease", func(op any) error { _, err := wl.Commit(ctx, op); return err },
		func() {
			if rl, err = wl.Downgrade(ctx); err != nil {
				t.Fatal(err)
			}
		}, "/w", `rwlock "/rw"`)
	_ = rl.Release(ctx)

	sem, err := semaphore.New(s, "/sem", 2)
	if err != nil {
		t.Fatal(err)
	}
	defer sem.Close()
	sl, err := sem.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	check("semaphore lease", func(op any) error { _, err := sl.Commit(ctx, op); return err },
		func() { _ = sl.Release(ctx) }, "/s", `semaphore "/sem"`)

	lt, err := leader.NewLatch(s, "/lead")
	if err != nil {
		t.Fatal(err)
	}
	defer lt.Close()
	if err := lt.Start(); err != nil {
		t.Fatal(err)
	}
	term, err := lt.Await(ctx)
	if err != nil {
		t.Fatal(err)
	}
	check("leader term", func(op any) error { _, err := term.Commit(ctx, op); return err },
		func() { term.Resign(); <-term.Done() }, "/l", `leader "/lead"`)
}
