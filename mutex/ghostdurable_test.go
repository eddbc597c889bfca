package mutex_test

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/internal/testkit/sessiontest"
	"github.com/zkrecipes/zkrecipes/mutex"
	"github.com/zkrecipes/zkrecipes/session"
	"github.com/zkrecipes/zkrecipes/zktest"
)

const (
	// ghostCleanup is the lock's cleanup timeout (SetCleanupTimeout), short
	// so that a cut can outlast it quickly.
	ghostCleanup = time.Second
	// ghostHold is how long the connection stays refused after the point
	// from which a cleanup bounded by its timeout alone would give up: longer
	// than ghostCleanup.
	// It is the length of a fault, not a synchronisation.
	ghostHold = ghostCleanup + time.Second
	// ghostSession is the session timeout: well above the whole cut (about
	// ghostCleanup+ghostHold plus a reconnect), so the session survives and
	// its ghost with it.
	ghostSession = 10 * time.Second
	// ghostGone bounds the wait for the ghost to be deleted after the heal.
	ghostGone = 20 * time.Second
)

// TestGhostCleanupDurable: a create whose reply was lost
// leaves a node ("ghost") on the server that the client cannot name; the
// acquire then ends (its ctx) before it found the ghost, and the connection
// stays down for longer than the cleanup timeout while the session
// survives. The cleanup of the ghost must be durable: once the connection is
// back on the same session, the ghost is deleted and another session can
// take the lock. A sweep that ran once within the cleanup timeout (or
// until the lock is closed) and then gave up would leave the ghost blocking
// everyone until our session ends: this test fails on it.
//
// secondcut: the acquire's ctx ends while the connection is up again and it
// is looking for its ghost; the sweep's first request is dropped and the
// connection refused for longer than the cleanup timeout (no Close).
// closed: the acquire's ctx ends while the connection is down, and the lock
// is closed during the cut (the sweep belongs to the session, not the lock).
func TestGhostCleanupDurable(t *testing.T) {
	for _, tc := range []struct {
		kind string
		mode string
	}{
		{"mutex", "secondcut"},
		{"nonfair", "secondcut"},
		{"mutex", "closed"},
		{"nonfair", "closed"},
	} {
		t.Run(tc.kind+"/"+tc.mode, func(t *testing.T) {
			testGhostDurable(t, kindNamed(t, tc.kind), tc.mode == "closed")
		})
	}
}

func testGhostDurable(t *testing.T, k lockKind, closeLock bool) {
	ns := zktest.NewNamespace(t)
	raw := ns.Conn(t)
	s, p := sessiontest.ConnectProxy(t, ns, session.WithSessionTimeout(ghostSession))
	rec := sessiontest.Record(t, s)
	ep := sessiontest.Core(s).Epoch()
	sid := ep.SessionID()
	lk := k.make(t, s)
	if err := mutex.SetCleanupTimeout(s, lk, ghostCleanup); err != nil {
		t.Fatal(err)
	}
	ensureLockDir(t, s, ns)
	dir := ns.Path(lockPath)
	inDir := func(path string) bool { return path == dir || strings.HasPrefix(path, dir+"/") }

	var (
		mu      sync.Mutex
		created string // the path of the swallowed create
		stage   int    // 0: swallow the first create; 1: wait; 2: cancel on the next request; 3: cut the next; 4: done
		cutAt   = make(chan time.Time, 1)
	)
	lctx, cancelLock := context.WithCancel(ctxT(t))
	defer cancelLock()
	p.OnRequest(func(r zktest.Request) zktest.Action {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case stage == 0 && (r.Op == zktest.OpCreate || r.Op == zktest.OpCreate2 || r.Op == zktest.OpMulti) && strings.HasPrefix(r.Path, dir+"/"):
			// The create lands, its reply is lost, and the connection
			// cannot come back until the test allows it.
			stage, created = 1, r.Path
			p.Refuse(true)
			return zktest.SwallowReply
		case stage == 2 && inDir(r.Path):
			// The first request of the acquire on the new connection: it
			// is looking for its ghost. Its ctx ends now.
			stage = 3
			cancelLock()
			return zktest.Forward
		case stage == 3 && inDir(r.Path):
			// The next request on the lock directory is the cleanup's
			// (today: the sweep): the connection goes, for long.
			stage = 4
			p.Refuse(true)
			cutAt <- time.Now()
			return zktest.DropRequest
		}
		return zktest.Forward
	})
	// ghosts lists our nodes in the lock directory: for the fair kinds the
	// children with our protected prefix, for NonFair the node if our session
	// owns it.
	ghosts := func() []string {
		mu.Lock()
		base := created
		mu.Unlock()
		if base == "" {
			t.Fatal("no create was swallowed")
		}
		if !k.fair {
			_, st, err := raw.Get(base)
			if errors.Is(err, zk.ErrNoNode) {
				return nil
			}
			if err != nil {
				t.Fatalf("get %s: %v", base, err)
			}
			if st.EphemeralOwner != sid {
				return nil
			}
			return []string{base}
		}
		prefix := base[strings.LastIndexByte(base, '/')+1:]
		var out []string
		for _, c := range kids(t, raw, ns) {
			if strings.HasPrefix(c, prefix) {
				out = append(out, c)
			}
		}
		return out
	}

	if !closeLock {
		// Slow replies while the create is in flight: a read pipelined
		// behind it is then surely sent on the first connection, and
		// cannot be taken for the acquire's first request on the next.
		p.SetLatency(50 * time.Millisecond)
	}
	res := make(chan error, 1)
	go func() {
		l, err := lk.Lock(lctx)
		if err == nil {
			_ = l.Release(context.Background())
			err = errors.New("Lock succeeded")
		}
		res <- err
	}()
	rec.Wait(t, wait, session.Suspended)
	p.SetLatency(0)
	zktest.Eventually(t, wait, func() bool { return len(ghosts()) == 1 }, "the swallowed create left no node")

	var holdFrom time.Time
	if closeLock {
		cancelLock()
		if err := sessiontest.Recv(t, res, wait, "Lock result"); !errors.Is(err, context.Canceled) {
			t.Fatalf("Lock = %v, want context.Canceled", err)
		}
		start := time.Now()
		if err := lk.(io.Closer).Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		holdFrom = time.Now()
		t.Logf("Close took %v with the connection down", holdFrom.Sub(start).Round(time.Millisecond))
	} else {
		mu.Lock()
		stage = 2
		mu.Unlock()
		p.Refuse(false)
		rec.Wait(t, wait, session.Reconnected)
		if err := sessiontest.Recv(t, res, wait, "Lock result"); !errors.Is(err, context.Canceled) {
			t.Fatalf("Lock = %v, want context.Canceled", err)
		}
		holdFrom = sessiontest.Recv(t, cutAt, wait, "the cleanup's first request")
		rec.Wait(t, wait, session.Suspended)
		t.Logf("Lock returned %v after the second cut began", time.Since(holdFrom).Round(time.Millisecond))
	}

	// The fault: the connection stays refused for longer than the cleanup
	// timeout, counted from where the acquire's cleanup starts its clock.
	hold := time.NewTimer(time.Until(holdFrom.Add(ghostHold)))
	<-hold.C
	if g := ghosts(); len(g) != 1 {
		t.Fatalf("our nodes during the cut: %q, want the ghost (nothing can delete it while the connection is refused)", g)
	}
	p.Refuse(false)
	rec.Wait(t, wait, session.Reconnected)
	healed := time.Now()
	zktest.Eventually(t, ghostGone, func() bool { return len(ghosts()) == 0 },
		"the ghost %q is still there %v after the connection came back on the same session", ghosts(), ghostGone)
	t.Logf("ghost deleted %v after the reconnect", time.Since(healed).Round(time.Millisecond))

	if cur := sessiontest.Core(s).Epoch(); cur != ep || ep.Err() != nil {
		t.Fatalf("the session did not survive: epoch %v, was %v (%v)", cur, ep, ep.Err())
	}
	other := k.make(t, connect(t, ns))
	l, err := other.TryLock(ctxT(t))
	if err != nil {
		t.Fatalf("another session's TryLock after the ghost went: %v", err)
	}
	if err := l.Release(ctxT(t)); err != nil {
		t.Fatal(err)
	}
}
