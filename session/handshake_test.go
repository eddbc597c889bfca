package session_test

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/internal/testkit/sessiontest"
	"github.com/zkrecipes/zkrecipes/session"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// TestReconnectPastSilentMember: a member that accepts connections but never
// answers (a frozen server) holds a reconnect up for the handshake bound
// (the session timeout divided among the servers, at least a second), not
// for go-zookeeper's 10 × ⅔ of the session timeout, and the client is
// connected again through the member that answers. (Whether it keeps its
// session depends on when it last pinged: the server may expire it first.)
//
// Two proxies to one server stand for two members. The session is on A; B
// goes silent; A's connection is cut. go-zookeeper tries the servers in
// turn, so with two of them its next dial is B: the handshake there gets no
// answer, and only its bound sends the client on to A (after go-zookeeper's
// one-second pause when it comes round the list again).
func TestReconnectPastSilentMember(t *testing.T) {
	ns := zktest.NewNamespace(t)
	p1, p2 := ns.Proxy(t), ns.Proxy(t)
	tap := zktest.NewTap()
	const timeout = 4 * time.Second
	servers := append(p1.Servers(), p2.Servers()...)
	s := sessiontest.ConnectTo(t, servers, ns.Root, session.WithSessionTimeout(timeout), session.WithDialer(tap.Dialer()))
	rec := sessiontest.Record(t, s)

	var a, b *zktest.Proxy
	zktest.Eventually(t, wait, func() bool {
		switch {
		case p1.Conns() == 1 && p2.Conns() == 0:
			a, b = p1, p2
		case p2.Conns() == 1 && p1.Conns() == 0:
			a, b = p2, p1
		}
		return a != nil
	}, "the session's connection on one of the two proxies")
	b.Partition()
	defer b.Heal()
	dials := tap.Dials()
	cut := time.Now()
	a.Cut()
	rec.Wait(t, wait, session.Suspended)
	// Bound: the handshake's 2 s (4 s over two servers), go-zookeeper's 1 s
	// pause, the connect itself, and slack for a busy machine. Without the
	// bound the handshake alone waits 10 × ⅔ × 4 s, about 27 s.
	rc := rec.Wait(t, 2*timeout, session.Reconnected)
	took := time.Since(cut)
	if n := tap.Dials() - dials; n < 2 {
		t.Fatalf("%d dials after the cut: the reconnect did not go through the silent member", n)
	}
	if n := a.Conns(); n != 1 {
		t.Fatalf("%d connections on the answering proxy after the reconnect, want 1", n)
	}
	t.Logf("cut → Reconnected in %v (session 0x%x, %d dials)", took, rc.SessionID, tap.Dials()-dials)
}

// stallingMember listens on loopback like a ZooKeeper member that answers a
// handshake with the length of a ConnectResponse and then nothing: it
// counts the connections it gets and holds them until the test ends.
func stallingMember(t *testing.T) (addr string, conns func() int) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var held []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, c)
			mu.Unlock()
			buf := make([]byte, 64)
			_, _ = c.Read(buf) // the ConnectRequest (or part of it)
			_, _ = c.Write([]byte{0, 0, 0, 36})
		}
	}()
	t.Cleanup(func() {
		l.Close()
		<-done
		mu.Lock()
		defer mu.Unlock()
		for _, c := range held {
			c.Close()
		}
	})
	return l.Addr().String(), func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(held)
	}
}

// TestReconnectPastStallingMember: a member that sends the length of its
// handshake answer and then nothing holds a connect up for the handshake
// bound only: go-zookeeper clears its read deadline after the length and
// reads the rest without one, and the session bounds that read too. The
// servers are the stalling member and a proxy to a real one; go-zookeeper
// tries them in turn, so either the first connect or the reconnect after the
// proxy's cut goes through the stalling member first.
func TestReconnectPastStallingMember(t *testing.T) {
	ns := zktest.NewNamespace(t)
	p := ns.Proxy(t)
	stall, stalled := stallingMember(t)
	const timeout = 2 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	s, err := session.Connect(ctx, []string{stall, p.Addr()}, session.WithNamespace(ns.Root),
		session.WithSessionTimeout(timeout), session.WithConnectTimeout(0))
	if err != nil {
		t.Fatalf("Connect past a stalling member: %v", err)
	}
	defer s.Close()
	rec := sessiontest.Record(t, s)
	before := stalled()
	cut := time.Now()
	p.Cut()
	rec.Wait(t, wait, session.Suspended)
	// The bound: 1 s of handshake per server (2 s over two), go-zookeeper's
	// 1 s pause, and slack; without it the reconnect never comes.
	rec.Wait(t, 3*timeout+2*time.Second, session.Reconnected)
	if stalled() == before && before == 0 {
		t.Fatal("the stalling member was never dialed: the test did not exercise it")
	}
	t.Logf("dials to the stalling member: %d; cut → Reconnected in %v", stalled(), time.Since(cut).Round(time.Millisecond))
}
