package rwlock_test

import (
	"context"
	"errors"
	"sort"
	"strings"
	"testing"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/internal/testkit/sessiontest"
	"github.com/zkrecipes/zkrecipes/rwlock"
	"github.com/zkrecipes/zkrecipes/session"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// ACL tests: the owner "alice" connects with digest credentials
// and an ACL of her own; intruders connect with no credentials or with
// another user's.

func ownerOpts(acl []zk.ACL) []session.Option {
	return []session.Option{session.WithDigestAuth("alice", "secret"), session.WithACL(acl)}
}

// aliceOnly is what a creator-only zk.AuthACL(zk.PermAll) becomes on the
// server for alice.
var aliceOnly = zk.DigestACL(zk.PermAll, "alice", "secret")

func sortedKids(t testing.TB, c *zk.Conn, p string) []string {
	t.Helper()
	k, _, err := c.Children(p)
	if err != nil && !errors.Is(err, zk.ErrNoNode) {
		t.Fatalf("children of %s: %v", p, err)
	}
	sort.Strings(k)
	return k
}

// Every node a read-write lock creates carries the session's ACL, as given:
// the namespace's node, the directories, a queued writer's and a queued
// reader's nodes, and the read node a downgrade places beside its write node.
func TestACLRWLockNodes(t *testing.T) {
	ns := zktest.NewNamespace(t)
	admin := sessiontest.DigestConn(t, ns, "alice", "secret")
	acl := append(zk.DigestACL(zk.PermAll, "alice", "secret"), zk.WorldACL(zk.PermRead)...)
	app := ns.Root + "/app" // created by the sessions themselves
	dir := app + lockPath
	var locks []*rwlock.RWMutex
	for i := 0; i < 3; i++ {
		s := sessiontest.ConnectTo(t, ns.Servers(), app, ownerOpts(acl)...)
		m, err := rwlock.New(s, lockPath)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { m.Close() })
		locks = append(locks, m)
	}
	ctx := ctxT(t)
	w, err := locks[0].Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	qctx, cancel := context.WithCancel(ctx)
	defer cancel()
	queued := make(chan error, 2)
	for i, side := range []Side{Write, Read} {
		lk := locks[i+1]
		go func() {
			l, err := acquire(qctx, lk, side, false)
			if err == nil {
				_ = l.Release(context.Background())
			}
			queued <- err
		}()
		zktest.Eventually(t, wait, func() bool { return len(sortedKids(t, admin, dir)) == i+2 }, "the %v waiter's node", side)
	}
	r, err := w.Downgrade(ctx)
	if err != nil {
		t.Fatal(err)
	}
	nodes := sessiontest.CheckTreeACL(t, admin, app, acl)
	t.Logf("%d nodes carry the session's ACL %v", len(nodes), acl)
	var reads, writes int
	for _, p := range nodes {
		switch {
		case strings.Contains(p, rwlock.ReadMarker):
			reads++
		case strings.Contains(p, rwlock.WriteMarker):
			writes++
		}
	}
	if reads != 2 || writes != 1 || !containsStr(nodes, rwlock.NodePath(r)) || !containsStr(nodes, dir) || !containsStr(nodes, app) {
		t.Errorf("nodes read: %v; want the namespace, the directory, %s (placed), a queued reader's and a queued writer's node", nodes, rwlock.NodePath(r))
	}
	cancel()
	for i := 0; i < 2; i++ {
		if err := <-queued; !errors.Is(err, context.Canceled) {
			t.Errorf("queued acquire = %v, want context.Canceled", err)
		}
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

// With a creator-only ACL the lock directory is the owner's (her first lock
// created it with the session's ACL), so a session with other credentials,
// or none, can neither queue nor delete a holder's node: every attempt, read
// or write, try or not, of both kinds, fails at once (one request, no retry)
// with zk.ErrNoAuth naming the directory, and leaves no node.
func TestACLRWLockIntruder(t *testing.T) {
	ns := zktest.NewNamespace(t)
	admin := sessiontest.DigestConn(t, ns, "alice", "secret")
	alice := connect(t, ns, ownerOpts(zk.AuthACL(zk.PermAll))...)
	ctx := ctxT(t)
	own := newRWMutex(t, alice)
	rd, err := own.RLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	dir := ns.Path(lockPath)
	for _, who := range []string{"", "bob"} {
		t.Run(map[string]string{"": "no credentials", "bob": "other credentials"}[who], func(t *testing.T) {
			s, log := sessiontest.ConnectIntruder(t, ns, who)
			for _, k := range kinds {
				lk := k.make(t, s)
				for _, side := range []Side{Read, Write} {
					for _, try := range []bool{false, true} {
						name := k.name + " " + side
						if try {
							name += " try"
						}
						oe := sessiontest.CheckRefused(t, name, log, admin, dir, aliceOnly, func(ctx context.Context) error {
							_, err := acquire(ctx, lk, side, try)
							return err
						})
						if oe != nil && (oe.Op != "create" || oe.ACLPath() != dir) {
							t.Errorf("%s: refused %s %s, want a create in %s", name, oe.Op, oe.Path, dir)
						}
					}
				}
			}
			if err := s.Conn().Delete(rwlock.NodePath(rd), -1); !errors.Is(err, zk.ErrNoAuth) {
				t.Errorf("delete of the reader's node without alice's credentials = %v, want zk.ErrNoAuth", err)
			}
			if got := sortedKids(t, admin, dir); len(got) != 1 || got[0] != rd.Node() {
				t.Errorf("children of %s = %v, want alice's %s only", dir, got, rd.Node())
			}
		})
	}
	if err := rd.Err(); err != nil {
		t.Errorf("alice's read lease ended: %v", err)
	}
	// alice's second session is admitted.
	w, err := newRWMutex(t, connect(t, ns, ownerOpts(zk.AuthACL(zk.PermAll))...)).TryRLock(ctx)
	if err != nil {
		t.Fatalf("TryRLock with alice's credentials: %v", err)
	}
	if err := w.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// With an open lock directory and creator-only nodes, an intruder may queue,
// but it cannot read the node it must wait on: a reader behind alice's writer
// and a writer behind alice's reader both fail at once with zk.ErrNoAuth
// naming alice's node (the watch), and delete their own node.
func TestACLRWLockOpenDirectory(t *testing.T) {
	ns := zktest.NewNamespace(t)
	admin := sessiontest.DigestConn(t, ns, "alice", "secret")
	dir := ns.Path(lockPath)
	for _, p := range []string{ns.Path("locks"), dir} {
		if _, err := admin.Create(p, nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
			t.Fatal(err)
		}
	}
	own := newRWMutex(t, connect(t, ns, ownerOpts(zk.AuthACL(zk.PermAll))...))
	s, log := sessiontest.ConnectIntruder(t, ns, "")
	lk := newRWMutex(t, s)
	ctx := ctxT(t)
	for _, c := range []struct{ held, want Side }{{Write, Read}, {Read, Write}} {
		held, err := acquire(ctx, own, c.held, false)
		if err != nil {
			t.Fatal(err)
		}
		name := c.want + " behind a " + c.held
		oe := sessiontest.CheckRefused(t, name, log, admin, rwlock.NodePath(held), aliceOnly, func(ctx context.Context) error {
			_, err := acquire(ctx, lk, c.want, false)
			return err
		})
		if oe != nil && (oe.Op != "watch" || oe.Path != rwlock.NodePath(held)) {
			t.Errorf("%s: refused %s %s, want the watch of alice's %s", name, oe.Op, oe.Path, rwlock.NodePath(held))
		}
		zktest.Eventually(t, wait, func() bool {
			k := sortedKids(t, admin, dir)
			return len(k) == 1 && k[0] == held.Node()
		}, "the intruder's node stays in %s", dir)
		if err := held.Err(); err != nil {
			t.Fatalf("alice's lease ended: %v", err)
		}
		if err := held.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
}
