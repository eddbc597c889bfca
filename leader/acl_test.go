package leader_test

import (
	"context"
	"errors"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/internal/testkit/sessiontest"
	"github.com/zkrecipes/zkrecipes/leader"
	"github.com/zkrecipes/zkrecipes/session"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// ACL tests. auth_test.go covers an election path protected
// beforehand by its owner (the errors of Latch, Selector and Run, their
// channels); these cover the nodes the recipes create themselves, and how
// fast and how precisely an intruder is refused.

func ownerOpts(acl []zk.ACL) []session.Option {
	return []session.Option{session.WithDigestAuth("alice", "secret"), session.WithACL(acl)}
}

// aliceOnly is what a creator-only zk.AuthACL(zk.PermAll) becomes on the
// server for alice.
var aliceOnly = zk.DigestACL(zk.PermAll, "alice", "secret")

// Every node the election recipes create carries the session's ACL, as
// given: the namespace's node, the election directories, a leading and a
// queued latch's nodes, a selector's node and Run's node.
func TestACLLeaderNodes(t *testing.T) {
	ns := zktest.NewNamespace(t)
	admin := sessiontest.DigestConn(t, ns, "alice", "secret")
	acl := append(zk.DigestACL(zk.PermAll, "alice", "secret"), zk.WorldACL(zk.PermRead)...)
	app := ns.Root + "/app" // created by the sessions themselves
	a := sessiontest.ConnectTo(t, ns.Servers(), app, ownerOpts(acl)...)
	b := sessiontest.ConnectTo(t, ns.Servers(), app, ownerOpts(acl)...)
	ctx := ctxT(t)

	term := await(t, startLatch(t, a, "a"))
	startLatch(t, b, "b") // queued behind a
	zktest.Eventually(t, wait, func() bool {
		k, _, err := admin.Children(app + electionPath)
		return err == nil && len(k) == 2
	}, "the queued latch's node")

	release := make(chan struct{})
	leading := make(chan *leader.Term, 2)
	work := func(ctx context.Context) error {
		term, _ := leader.TermFromContext(ctx)
		leading <- term
		select {
		case <-release:
		case <-ctx.Done():
		}
		return nil
	}
	sel, err := leader.NewSelector(a, "/sel", work, leader.WithID("sel"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sel.Close() })
	if err := sel.Start(); err != nil {
		t.Fatal(err)
	}
	selTerm := sessiontest.Recv(t, leading, wait, "selector term")
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ran := make(chan error, 1)
	go func() { ran <- leader.Run(rctx, b, "/run", work, leader.WithID("run")) }()
	runTerm := sessiontest.Recv(t, leading, wait, "Run term")

	nodes := sessiontest.CheckTreeACL(t, admin, app, acl)
	t.Logf("%d nodes carry the session's ACL %v", len(nodes), acl)
	latches := 0
	for _, p := range nodes {
		if strings.HasPrefix(p, app+electionPath+"/") {
			latches++
		}
	}
	for _, p := range []string{app, app + electionPath, leader.TermPath(term), app + "/sel", leader.TermPath(selTerm), app + "/run", leader.TermPath(runTerm)} {
		if !containsStr(nodes, p) {
			t.Errorf("%s was not among the nodes read: %v", p, nodes)
		}
	}
	if latches != 2 {
		t.Errorf("%d latch nodes read, want 2: %v", latches, nodes)
	}
	close(release)
	cancel()
	select {
	case err := <-ran:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Run = %v, want context.Canceled", err)
		}
	case <-time.After(wait):
		t.Fatal("Run did not return after its ctx ended")
	}
}

func containsStr(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// The election directory that alice's latch created carries her
// creator-only ACL, so a participant with other credentials, or none,
// cannot enter: a Latch's Await, a Selector and Run fail at once (one
// create, no re-campaign) with zk.ErrNoAuth naming the directory whose ACL
// refused; the leader's node cannot be deleted by them, the leader keeps
// leading, and no node is left behind.
func TestACLLeaderIntruder(t *testing.T) {
	ns := zktest.NewNamespace(t)
	admin := sessiontest.DigestConn(t, ns, "alice", "secret")
	alice := connect(t, ns, ownerOpts(zk.AuthACL(zk.PermAll))...)
	term := await(t, startLatch(t, alice, "alice"))
	dir := ns.Path(electionPath)
	for _, who := range []string{"", "bob"} {
		t.Run(map[string]string{"": "no credentials", "bob": "other credentials"}[who], func(t *testing.T) {
			s, log := sessiontest.ConnectIntruder(t, ns, who)
			noWork := func(context.Context) error {
				t.Error("work ran without alice's credentials")
				return nil
			}
			calls := []struct {
				name string
				call func(ctx context.Context) error
			}{
				{"Latch.Start+Await", func(ctx context.Context) error {
					l, err := leader.NewLatch(s, electionPath, leader.WithID("intruder"))
					if err != nil {
						return err
					}
					defer l.Close()
					if err := l.Start(); err != nil {
						return err
					}
					_, err = l.Await(ctx)
					return err
				}},
				{"Selector.Start", func(ctx context.Context) error {
					sel, err := leader.NewSelector(s, electionPath, noWork, leader.WithID("intruder"))
					if err != nil {
						return err
					}
					defer sel.Close()
					if err := sel.Start(); err != nil {
						return err
					}
					select {
					case <-sel.Done():
						return sel.Err()
					case <-ctx.Done():
						return ctx.Err()
					}
				}},
				{"Run", func(ctx context.Context) error {
					return leader.Run(ctx, s, electionPath, noWork, leader.WithID("intruder"))
				}},
			}
			for _, c := range calls {
				oe := sessiontest.CheckRefused(t, c.name, log, admin, dir, aliceOnly, c.call)
				if oe != nil && (oe.Op != "create" || oe.ACLPath() != dir) {
					t.Errorf("%s: refused %s %s, want a create in %s", c.name, oe.Op, oe.Path, dir)
				}
			}
			if err := s.Conn().Delete(leader.TermPath(term), -1); !errors.Is(err, zk.ErrNoAuth) {
				t.Errorf("delete of the leader's node without alice's credentials = %v, want zk.ErrNoAuth", err)
			}
			k, _, err := admin.Children(dir)
			sort.Strings(k)
			if err != nil || len(k) != 1 || k[0] != term.Node() {
				t.Errorf("election nodes = %v (%v), want the leader's %s only", k, err, term.Node())
			}
		})
	}
	if err := term.Err(); err != nil {
		t.Errorf("alice's term ended: %v", err)
	}
}

func connect(t testing.TB, ns *zktest.Namespace, opts ...session.Option) *session.Session {
	t.Helper()
	return sessiontest.Connect(t, ns, opts...)
}
