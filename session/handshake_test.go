package session_test

import (
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/internal/sessiontest"
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
