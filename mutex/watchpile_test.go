package mutex_test

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/internal/testkit/sessiontest"
	"github.com/zkrecipes/zkrecipes/mutex"
	"github.com/zkrecipes/zkrecipes/recipes"
	"github.com/zkrecipes/zkrecipes/session"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// Counts of TestWatchesBounded. Measured on a 2-core machine under -race
// (shared with other test runs): a failed NonFair.TryLock takes about 1.6 ms,
// a failed fair TryLock about 2 ms, a fair Lock with a 20 ms ctx about 25 ms,
// so these counts take about 25 s; a pile would show as hundreds of watches
// against a bound of a few.
const (
	pileNonFairTries = 4000
	pileFairTries    = 500
	pileFairLocks    = 500
	// pileLockWait is the ctx of each timed-out fair Lock: long enough for
	// the Lock to create its node and queue behind the holder (a create, a
	// children read and a watch take 3 to 5 ms here under -race; with 10 ms
	// about 1 % still timed out before creating its node), short enough for
	// 500 of them to run one after the other in about 12 s. They run one
	// after the other so that each one waits directly on the holder's node,
	// as a polling loop against a long-held lock does.
	pileLockWait = 20 * time.Millisecond
	// pileLiveWaiters are fair Locks left waiting while the watches are
	// counted: the bound is per live waiter.
	pileLiveWaiters = 2
	// pilePerWaiter is what one live fair waiter may watch: its predecessor
	// and (WithNodeWatch, the default) its own node.
	pilePerWaiter = 2
	// pileSlack is the constant allowed on top: a watch shared by past
	// waiters on a node that still exists (the holder's fair node, the
	// NonFair node) stays registered, since go-zookeeper cannot remove a
	// watch.
	pileSlack = 2
)

// TestWatchesBounded: another session holds a fair lock
// and a NonFair lock for the whole test. Our session then makes 4,000
// NonFair.TryLock calls and 500 fair TryLock calls that fail, and 500
// fair Lock calls whose ctx ends while they are queued behind the holder.
// With a few Locks still waiting, the watches our session holds must be
// bounded by the live waiters, not grow with the calls made: in the client
// (go-zookeeper's watcher channels, counted on the wire by zktest.Tap) and on
// the server (wchc for our session). A try-acquire sets no watch it will not
// wait on, and waits on the same node share one watch.
func TestWatchesBounded(t *testing.T) {
	const fairPath, nonFairPath = "/pile/fair", "/pile/nonfair"
	ns := zktest.NewNamespace(t)
	raw := ns.Conn(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	hs := connect(t, ns, session.WithSessionTimeout(10*time.Second))
	hFair, err := mutex.NewReentrant(hs, fairPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { hFair.Close() })
	hNonFair, err := mutex.NewNonFair(hs, nonFairPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { hNonFair.Close() })
	if _, err := hFair.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := hNonFair.Lock(ctx); err != nil {
		t.Fatal(err)
	}

	// A 10 s session: 45 s of requests on a loaded machine must not be
	// interrupted by a suspension.
	s, tap := sessiontest.ConnectTap(t, ns, session.WithSessionTimeout(10*time.Second))
	fair, err := mutex.NewReentrant(s, fairPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fair.Close() })
	nonFair, err := mutex.NewNonFair(s, nonFairPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nonFair.Close() })
	sid := s.SessionID()
	phase := func(what string, n int, start time.Time) {
		t.Logf("%d %s in %v (%v each): watches client=%d", n, what, time.Since(start).Round(time.Millisecond),
			(time.Since(start) / time.Duration(n)).Round(10*time.Microsecond), sessiontest.TapWatches(tap))
	}

	start := time.Now()
	for i := 0; i < pileNonFairTries; i++ {
		if _, err := nonFair.TryLock(ctx); !errors.Is(err, recipes.ErrBusy) {
			t.Fatalf("NonFair.TryLock %d = %v, want ErrBusy", i, err)
		}
	}
	phase("failed NonFair.TryLock", pileNonFairTries, start)

	start = time.Now()
	for i := 0; i < pileFairTries; i++ {
		if _, err := fair.TryLock(ctx); !errors.Is(err, recipes.ErrBusy) {
			t.Fatalf("fair TryLock %d = %v, want ErrBusy", i, err)
		}
	}
	phase("failed fair TryLock", pileFairTries, start)

	start = time.Now()
	before := pileCreates(tap)
	for i := 0; i < pileFairLocks; i++ {
		lctx, cancel := context.WithTimeout(ctx, pileLockWait)
		_, err := fair.Lock(lctx)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("fair Lock %d = %v, want context.DeadlineExceeded", i, err)
		}
	}
	phase(fmt.Sprintf("fair Lock timed out after %v", pileLockWait), pileFairLocks, start)
	// Each Lock that created its node was queued behind the holder when its
	// ctx ended; most must have, or this part proves nothing.
	queued := pileCreates(tap) - before
	t.Logf("%d of %d timed-out Locks created their node (were queued)", queued, pileFairLocks)
	if queued < pileFairLocks/2 {
		t.Fatalf("only %d of %d Locks got queued before their ctx ended; raise pileLockWait", queued, pileFairLocks)
	}

	// Live waiters, queued behind the holder.
	wctx, stopWaiters := context.WithCancel(ctx)
	var wg sync.WaitGroup
	errs := make(chan error, pileLiveWaiters)
	for i := 0; i < pileLiveWaiters; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l, err := fair.Lock(wctx)
			if err == nil {
				_ = l.Release(context.Background())
				err = errors.New("a waiter got the lock while the holder held it")
			} else if errors.Is(err, context.Canceled) {
				err = nil
			}
			errs <- err
		}()
	}
	defer func() {
		stopWaiters()
		wg.Wait()
	}()
	zktest.Eventually(t, wait, func() bool {
		k, _, err := raw.Children(ns.Path(fairPath))
		return err == nil && len(k) == 1+pileLiveWaiters
	}, "the %d waiters did not queue", pileLiveWaiters)

	if _, err := tap.Notifications(); err != nil { // a parse failure: the tap's counts may be short
		t.Fatal(err)
	}
	client := sessiontest.TapWatches(tap)
	server := pileServerWatches(t, ns, sid)
	total := "?"
	if m, err := zktest.Mntr(ctx, ns.Server.Addr()); err == nil {
		total = m["zk_watch_count"]
	}
	t.Logf("watches client=%d server=%d (server total, every session: %s) with %d live waiters", client, len(server), total, pileLiveWaiters)
	t.Logf("client watches by path: %s", pileTopPaths(tap.Watches(), 5))
	t.Logf("server watches of our session: %q", server)

	bound := pilePerWaiter*pileLiveWaiters + pileSlack
	if client > bound {
		t.Errorf("the client holds %d watches after %d NonFair.TryLock, %d fair TryLock and %d timed-out Lock calls, with %d live waiters; want at most %d",
			client, pileNonFairTries, pileFairTries, pileFairLocks, pileLiveWaiters, bound)
	}
	if len(server) > bound {
		t.Errorf("the server holds %d watches for our session, with %d live waiters; want at most %d", len(server), pileLiveWaiters, bound)
	}

	stopWaiters()
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
}

// creates returns how many creates (plain or in a multi) the client sent.
func pileCreates(tap *zktest.Tap) int {
	r := tap.Requests()
	return int(r[zktest.OpCreate] + r[zktest.OpCreate2] + r[zktest.OpMulti])
}

// pileServerWatches returns the paths session sid watches on ns's server, from
// the wchc four-letter word (one line per session id, then one indented line
// per watched path).
func pileServerWatches(t testing.TB, ns *zktest.Namespace, sid int64) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	out, err := zktest.FourLetterWord(ctx, ns.Server.Addr(), "wchc")
	if err != nil {
		t.Fatalf("wchc: %v", err)
	}
	var paths []string
	in := false
	for _, line := range strings.Split(out, "\n") {
		l := strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(l, "0x"):
			id, err := strconv.ParseUint(strings.TrimPrefix(l, "0x"), 16, 64)
			in = err == nil && int64(id) == sid
		case in && strings.HasPrefix(l, "/"):
			paths = append(paths, l)
		}
	}
	return paths
}

// pileTopPaths formats the n paths with the most watches.
func pileTopPaths(m map[string]int, n int) string {
	type pc struct {
		p string
		c int
	}
	var all []pc
	for p, c := range m {
		all = append(all, pc{p, c})
	}
	sort.Slice(all, func(i, j int) bool { return all[i].c > all[j].c || (all[i].c == all[j].c && all[i].p < all[j].p) })
	var b strings.Builder
	for i, x := range all {
		if i == n {
			fmt.Fprintf(&b, " ... (%d paths)", len(all))
			break
		}
		fmt.Fprintf(&b, " %s=%d", x.p, x.c)
	}
	return b.String()
}
