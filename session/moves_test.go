package session_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/internal/testkit/sessiontest"
	"github.com/zkrecipes/zkrecipes/mutex"
	"github.com/zkrecipes/zkrecipes/session"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// These tests move servers the way Kubernetes moves ZooKeeper pods: a
// server stops and starts again with its data on a new address under the
// same name (zktest's Server.Move, and a zktest.Resolver in place of DNS).

// longSessions lets a test server grant session timeouts up to 30 s
// (zktest's servers cap them at 20 ticks, 4 s).
var longSessions = zktest.WithConfig("maxSessionTimeout", "30000")

// nameFor makes name resolve to the host of addr in r and returns
// "name:port" with addr's port.
func nameFor(t *testing.T, r *zktest.Resolver, name, addr string) string {
	t.Helper()
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	r.Set(name, addr)
	return net.JoinHostPort(name, port)
}

func connectNamed(t *testing.T, servers []string, r *zktest.Resolver, opts ...session.Option) *session.Session {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := session.Connect(ctx, servers, append([]session.Option{session.WithResolver(r)}, opts...)...)
	if err != nil {
		t.Fatalf("Connect(%v): %v", servers, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func lockOn(t *testing.T, s *session.Session, path string) *mutex.Lease {
	t.Helper()
	m, err := mutex.New(s, path)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l, err := m.Lock(ctx)
	if err != nil {
		t.Fatalf("Lock(%s): %v", path, err)
	}
	return l
}

// A standalone server moves to a new address under the same name within the
// session timeout: both sessions come back to the same session
// (Reconnected, same id). A SessionOnly lease is still held. A Standard
// lease is still held when the reconnection came before its deadline (two
// thirds of the timeout after the newest answered request, which is at
// least a third of the timeout after the suspension); one whose reconnection
// came after the deadline has ended by then, and the lock is taken again at
// once. go-zookeeper alone never reaches the new address.
func TestServerMovesWithinSessionTimeout(t *testing.T) {
	const timeout = 12 * time.Second
	srv := zktest.StartServerT(t, longSessions)
	var r zktest.Resolver
	name := nameFor(t, &r, "zk-0.zkmove.test", srv.Addr())
	only := connectNamed(t, []string{name}, &r, session.WithSessionTimeout(timeout), session.WithLossPolicy(session.SessionOnly))
	std := connectNamed(t, []string{name}, &r, session.WithSessionTimeout(timeout))
	if got := std.SessionTimeout(); got != timeout {
		t.Fatalf("negotiated timeout %v, want %v", got, timeout)
	}
	onlyID, stdID := only.SessionID(), std.SessionID()
	recOnly, recStd := sessiontest.Record(t, only), sessiontest.Record(t, std)
	onlyLease := lockOn(t, only, "/moves/only")
	stdLease := lockOn(t, std, "/moves/std")

	moved := time.Now()
	addr, err := srv.Move()
	if err != nil {
		t.Fatal(err)
	}
	r.Set("zk-0.zkmove.test", addr)
	served := time.Now()
	suspended := recStd.Wait(t, wait, session.Suspended)
	back := recStd.Wait(t, wait, session.Reconnected)
	recOnly.Wait(t, wait, session.Reconnected)
	t.Logf("moved to %s: server answering after %v; Standard session: suspended at +%v, reconnected at +%v",
		addr, served.Sub(moved).Round(time.Millisecond), suspended.At.Sub(moved).Round(time.Millisecond), back.At.Sub(moved).Round(time.Millisecond))
	if only.SessionID() != onlyID || std.SessionID() != stdID || back.SessionID != stdID {
		t.Fatalf("a new session after the move: 0x%x -> 0x%x, 0x%x -> 0x%x", onlyID, only.SessionID(), stdID, std.SessionID())
	}
	for _, ev := range append(recOnly.Events(), recStd.Events()...) {
		if ev.State == session.Lost {
			t.Fatalf("Lost during a move within the session timeout: %v / %v", recOnly.States(), recStd.States())
		}
	}
	if err := onlyLease.Err(); err != nil {
		t.Errorf("SessionOnly lease ended by a move within the session timeout: %v", err)
	}
	away := back.At.Sub(suspended.At)
	switch {
	case away < timeout/3-500*time.Millisecond:
		if err := stdLease.Err(); err != nil {
			t.Errorf("Standard lease ended although the session came back %v after the suspension (its deadline is at least %v after it): %v", away, timeout/3, err)
		}
	case away > 2*timeout/3+500*time.Millisecond:
		if stdLease.Err() == nil {
			t.Errorf("Standard lease still held although the session came back %v after the suspension, past its deadline", away)
		}
	}
	if err := stdLease.Err(); err != nil {
		if !errors.Is(err, session.ErrSuspended) {
			t.Errorf("Standard lease ended with %v, want session.ErrSuspended", err)
		}
		// The old node went with the release at the lease's end: the lock
		// is free for the next Lock at once.
		start := time.Now()
		l := lockOn(t, std, "/moves/std")
		t.Logf("Standard lease ended (%v); locked again %v after the reconnection (%v after asking)", err, time.Since(back.At).Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
		releaseT(t, l)
	} else {
		start := time.Now()
		l := lockOn(t, std, "/moves/other")
		t.Logf("Standard lease kept: the session was away %v; a new lock taken %v after the reconnection (%v after asking)",
			away.Round(time.Millisecond), time.Since(back.At).Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
		releaseT(t, l)
		releaseT(t, stdLease)
	}
	releaseT(t, onlyLease)
}

func releaseT(t *testing.T, l *mutex.Lease) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := l.Release(ctx); err != nil && !errors.Is(err, session.ErrSuspended) {
		t.Errorf("Release: %v", err)
	}
}

// The same move, but the name comes to point at the new address only after
// the session timeout: the Session declares Lost by its own timer, then
// makes a session on the new address within a few seconds of the name
// resolving there, and a lock is taken on it.
func TestServerMovesAfterSessionTimeout(t *testing.T) {
	const timeout = 2 * time.Second
	srv := zktest.StartServerT(t)
	var r zktest.Resolver
	name := nameFor(t, &r, "zk-0.zkmove.test", srv.Addr())
	s := connectNamed(t, []string{name}, &r, session.WithSessionTimeout(timeout))
	rec := sessiontest.Record(t, s)
	lease := lockOn(t, s, "/moves/after")

	moved := time.Now()
	addr, err := srv.Move()
	if err != nil {
		t.Fatal(err)
	}
	suspended := rec.Wait(t, wait, session.Suspended)
	lost := rec.Wait(t, wait, session.Lost)
	sessiontest.WaitDone(t, lease, wait)
	r.Set("zk-0.zkmove.test", addr)
	answering := time.Now()
	back := rec.Wait(t, wait, session.Reconnected)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	m, err := mutex.New(s, "/moves/after")
	if err != nil {
		t.Fatal(err)
	}
	l, err := m.Lock(ctx)
	if err != nil {
		t.Fatalf("Lock on the session made after the move: %v", err)
	}
	locked := time.Now()
	t.Logf("suspended at +%v, lost at +%v, name moved at +%v, new session at +%v, locked at +%v",
		suspended.At.Sub(moved).Round(time.Millisecond), lost.At.Sub(moved).Round(time.Millisecond),
		answering.Sub(moved).Round(time.Millisecond), back.At.Sub(moved).Round(time.Millisecond), locked.Sub(moved).Round(time.Millisecond))
	if d := back.At.Sub(answering); d > 5*time.Second {
		t.Errorf("new session %v after the name resolved to the server, want within a few seconds", d)
	}
	releaseT(t, l)
}

// rollingStats is what a rolling restart did to the locks of its sessions.
type rollingStats struct {
	cycles, ended int
	unknown       int // increments whose answer was lost as their lease ended
	longHeld      bool
}

// rollingRestart moves every member of a three-member ensemble to a new
// address, one at a time, while six sessions contend on one mutex (a
// counter incremented inside the lock) and a seventh holds another lock for
// the whole restart, all under policy. It checks what holds under any policy
// (the counter is exact, hold intervals never overlap, no session is lost)
// and returns the rest.
func rollingRestart(t *testing.T, policy session.LossPolicy) rollingStats {
	const timeout = 15 * time.Second
	e := zktest.StartEnsembleT(t, 3, longSessions)
	var r zktest.Resolver
	var servers []string
	for i := 0; i < 3; i++ {
		servers = append(servers, nameFor(t, &r, fmt.Sprintf("zk-%d.zkroll.test", i), e.Member(i).Addr()))
	}
	opts := []session.Option{session.WithSessionTimeout(timeout), session.WithLossPolicy(policy)}
	const workers = 6
	var sessions []*session.Session
	var recs []*sessiontest.Recorder
	for i := 0; i < workers+1; i++ {
		s := connectNamed(t, servers, &r, opts...)
		sessions = append(sessions, s)
		recs = append(recs, sessiontest.Record(t, s))
	}
	root := "/roll"
	conn := sessions[0].Conn()
	if _, err := conn.Create(root, nil, 0, zk.WorldACL(zk.PermAll)); err != nil && !errors.Is(err, zk.ErrNodeExists) {
		t.Fatal(err)
	}
	if _, err := conn.Create(root+"/counter", []byte("0"), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	long := lockOn(t, sessions[workers], root+"/long")

	type hold struct{ from, to time.Time }
	var mu sync.Mutex
	var holds []hold
	var stats rollingStats
	var problems []string
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		s := sessions[w]
		m, err := mutex.New(s, root+"/lock")
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				l, err := m.Lock(ctx)
				cancel()
				if err != nil {
					continue // a lock attempt cut short by the restart: try again
				}
				from := time.Now()
				ok, unknown, perr := increment(l, s.Conn(), root+"/counter")
				ended := l.Err() != nil
				to := time.Now()
				rctx, rcancel := context.WithTimeout(context.Background(), 20*time.Second)
				_ = l.Release(rctx)
				rcancel()
				mu.Lock()
				holds = append(holds, hold{from, to})
				if unknown {
					stats.unknown++
				}
				if ok {
					stats.cycles++
				}
				if ended {
					stats.ended++
				}
				if perr != "" {
					problems = append(problems, perr)
				}
				mu.Unlock()
			}
		}()
	}
	progress := func(n int) {
		zktest.Eventually(t, 60*time.Second, func() bool {
			mu.Lock()
			defer mu.Unlock()
			return stats.cycles >= n
		}, "lock cycles between moves")
	}
	progress(20)
	for i := 0; i < 3; i++ {
		start := time.Now()
		addr, err := e.Member(i).Move()
		if err != nil {
			close(stop)
			wg.Wait()
			t.Fatal(err)
		}
		r.Set(fmt.Sprintf("zk-%d.zkroll.test", i), addr)
		t.Logf("member %d moved to %s in %v", i, addr, time.Since(start).Round(time.Millisecond))
		mu.Lock()
		n := stats.cycles
		mu.Unlock()
		progress(n + 20)
	}
	close(stop)
	wg.Wait()

	stats.longHeld = long.Err() == nil
	for i, rec := range recs {
		for _, ev := range rec.Events() {
			if ev.State == session.Lost {
				t.Errorf("session %d lost during the rolling restart: %v", i, rec.States())
			}
		}
	}
	for _, p := range problems {
		t.Error(p)
	}
	data, _, err := sessions[0].Conn().Get(root + "/counter")
	if err != nil {
		t.Fatal(err)
	}
	// Exact, but for the increments whose outcome no holder could learn
	// (only a policy that ends leases at a disconnect leaves any).
	if got, err := strconv.Atoi(string(data)); err != nil || got < stats.cycles || got > stats.cycles+stats.unknown {
		t.Errorf("counter = %s after %d increments under the lock and %d of unknown outcome", data, stats.cycles, stats.unknown)
	}
	sort.Slice(holds, func(i, j int) bool { return holds[i].from.Before(holds[j].from) })
	for i := 1; i < len(holds); i++ {
		if holds[i].from.Before(holds[i-1].to) {
			t.Errorf("hold intervals overlap: %v-%v and %v-%v", holds[i-1].from, holds[i-1].to, holds[i].from, holds[i].to)
		}
	}
	if stats.longHeld {
		releaseT(t, long)
	}
	return stats
}

// increment adds one to the counter at p under the lease l, with a version
// check that fails if anyone else wrote it meanwhile. It reports whether the
// increment applied (after a lost answer, by reading the counter back while
// the lease still holds), whether its outcome is unknown (the answer was
// lost and the lease ended before the read-back could tell), and describes
// a violation, if any.
func increment(l *mutex.Lease, c *zk.Conn, p string) (applied, unknown bool, problem string) {
	for l.Err() == nil {
		data, st, err := c.Get(p)
		if err != nil {
			pauseOn(l)
			continue
		}
		n, err := strconv.Atoi(string(data))
		if err != nil {
			return false, false, fmt.Sprintf("counter %q: %v", data, err)
		}
		_, err = c.Set(p, []byte(strconv.Itoa(n+1)), st.Version)
		switch {
		case err == nil:
			return true, false, ""
		case errors.Is(err, zk.ErrBadVersion):
			return false, false, fmt.Sprintf("counter written by someone else while the lock was held (version %d)", st.Version)
		}
		// The answer was lost: the lock excludes every other writer, so
		// while it holds, the counter tells whether the write applied.
		for l.Err() == nil {
			data2, st2, err := c.Get(p)
			if err != nil {
				pauseOn(l)
				continue
			}
			return st2.Version == st.Version+1 && string(data2) == strconv.Itoa(n+1), false, ""
		}
		return false, true, ""
	}
	return false, false, ""
}

// A rolling restart in which every member comes back on a new address, one
// at a time, ends no lease under the default policy: no session is lost, the
// long hold is never ended, the counter is exact and holds never overlap.
func TestRollingRestartToNewAddresses(t *testing.T) {
	stats := rollingRestart(t, session.Standard)
	t.Logf("Standard: %d lock cycles, %d leases ended by the restart, long hold kept: %v", stats.cycles, stats.ended, stats.longHeld)
	if !stats.longHeld {
		t.Error("the lock held through the rolling restart was ended")
	}
	if stats.ended != 0 || stats.unknown != 0 {
		t.Errorf("%d leases ended by a rolling restart that no session expired in (%d increments of unknown outcome)", stats.ended, stats.unknown)
	}
}

// pauseOn waits a little before a request is tried again, or until the
// lease ends.
func pauseOn(l *mutex.Lease) {
	t := time.NewTimer(20 * time.Millisecond)
	defer t.Stop()
	select {
	case <-t.C:
	case <-l.Done():
	}
}

// The ensemble is reconfigured until none of its original members is left,
// one member at a time (a new one added and an old one removed by each
// reconfig). The Session follows the members the ensemble announces: it is
// never lost, its lock is never ended, and it ends connected to a new
// member, although its configured names all point at members that are gone.
func TestReconfigReplacesEveryMember(t *testing.T) {
	const timeout = 15 * time.Second
	e := zktest.StartEnsembleT(t, 3, longSessions, zktest.WithConfig("reconfigEnabled", "true"))
	var r zktest.Resolver
	var servers []string
	original := []*zktest.Server{e.Member(0), e.Member(1), e.Member(2)}
	for i, m := range original {
		servers = append(servers, nameFor(t, &r, fmt.Sprintf("zk-%d.zkreconfig.test", i), m.Addr()))
	}
	s := connectNamed(t, servers, &r, session.WithSessionTimeout(timeout))
	rec := sessiontest.Record(t, s)
	id := s.SessionID()
	lease := lockOn(t, s, "/reconfig/lock")
	var added []*zktest.Server
	for i, m := range original {
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		start := time.Now()
		joined, err := e.Reconfig(ctx, 1, m)
		cancel()
		if err != nil {
			t.Fatalf("reconfig %d: %v", i, err)
		}
		added = append(added, joined...)
		t.Logf("reconfig %d: %s replaced by %s in %v; the session is on %s", i, m.Addr(), joined[0].Addr(), time.Since(start).Round(time.Millisecond), sessiontest.Core(s).Server())
	}
	newAddrs := map[string]bool{}
	for _, m := range added {
		newAddrs[m.Addr()] = true
	}
	// Every original member is gone; the Session must be on a new one.
	zktest.Eventually(t, wait, func() bool {
		return s.State() != session.Suspended && newAddrs[sessiontest.Core(s).Server()]
	}, "the session connected to a new member")
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if _, _, err := s.Conn().Get("/zookeeper/config"); err != nil {
		t.Fatalf("a request on the session after the reconfigs: %v", err)
	}
	for _, ev := range rec.Events() {
		if ev.State == session.Lost {
			t.Fatalf("session lost during the reconfigs: %v", rec.States())
		}
	}
	if s.SessionID() != id {
		t.Errorf("session id 0x%x, was 0x%x", s.SessionID(), id)
	}
	if err := lease.Err(); err != nil {
		t.Errorf("the lock held through the reconfigs ended: %v", err)
	}
	if err := lease.Release(ctx); err != nil {
		t.Errorf("Release: %v", err)
	}
	t.Logf("transitions: %v", rec.States())
}

// The same rolling restart under EndAtDisconnect, the policy that ends a
// lease at the first disconnect: it ends the long hold (every session is
// disconnected at least once) and the leases of the holders it catches,
// while the exclusion checks hold as under Standard.
func TestRollingRestartEndAtDisconnect(t *testing.T) {
	stats := rollingRestart(t, session.EndAtDisconnect)
	t.Logf("EndAtDisconnect: %d lock cycles, %d leases ended by the restart (%d increments of unknown outcome), long hold kept: %v", stats.cycles, stats.ended, stats.unknown, stats.longHeld)
	if stats.longHeld {
		t.Error("EndAtDisconnect kept a lock through the disconnects of a rolling restart")
	}
}
