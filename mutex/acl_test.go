package mutex_test

import (
	"context"
	"errors"
	"sort"
	"strings"
	"testing"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/internal/testkit/sessiontest"
	"github.com/zkrecipes/zkrecipes/mutex"
	"github.com/zkrecipes/zkrecipes/recipes"
	"github.com/zkrecipes/zkrecipes/session"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// ACL tests: the owner "alice" connects with digest credentials
// and an ACL of her own; intruders connect with no credentials or with
// another user's.

// ownerOpts are the owner's session options with the ACL acl.
func ownerOpts(acl []zk.ACL) []session.Option {
	return []session.Option{session.WithDigestAuth("alice", "secret"), session.WithACL(acl)}
}

// aliceOnly is the ACL a creator-only zk.AuthACL(zk.PermAll) becomes on the
// server for alice.
var aliceOnly = zk.DigestACL(zk.PermAll, "alice", "secret")

// Every node the locks create carries the session's ACL, as given (here two
// entries: alice may do anything, the world may read): the namespace's own
// node, the lock directories (containers), the fair nodes of holders and
// waiters, the non-fair node and a multi-lock's nodes.
func TestACLMutexNodes(t *testing.T) {
	ns := zktest.NewNamespace(t)
	admin := sessiontest.DigestConn(t, ns, "alice", "secret")
	acl := append(zk.DigestACL(zk.PermAll, "alice", "secret"), zk.WorldACL(zk.PermRead)...)
	app := ns.Root + "/app" // created by the sessions themselves
	a := sessiontest.ConnectTo(t, ns.Servers(), app, ownerOpts(acl)...)
	b := sessiontest.ConnectTo(t, ns.Servers(), app, ownerOpts(acl)...)
	ctx := ctxT(t)

	holder, err := mutex.New(a, "/locks/fair")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { holder.Close() })
	l, err := holder.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	waiter, err := mutex.NewReentrant(b, "/locks/fair")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { waiter.Close() })
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	waited := make(chan error, 1)
	go func() {
		l, err := waiter.Lock(wctx)
		if err == nil {
			_ = l.Release(context.Background())
		}
		waited <- err
	}()
	zktest.Eventually(t, wait, func() bool { return childCount(admin, app+"/locks/fair") == 2 }, "the waiter's node")

	nf, err := mutex.NewNonFair(a, "/locks/nf")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nf.Close() })
	if _, err := nf.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	m1, _ := mutex.New(a, "/locks/m1")
	m2, _ := mutex.New(b, "/deep/er/m2")
	t.Cleanup(func() { m1.Close(); m2.Close() })
	multi, err := mutex.NewMulti(m1, m2)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := multi.Lock(ctx); err != nil {
		t.Fatal(err)
	}

	nodes := sessiontest.CheckTreeACL(t, admin, app, acl)
	t.Logf("%d nodes carry the session's ACL %v", len(nodes), acl)
	want := []string{app, app + "/locks", app + "/locks/fair", app + "/locks/nf", app + "/locks/nf/" + mutex.NonFairNode,
		app + "/locks/m1", app + "/deep", app + "/deep/er", app + "/deep/er/m2", mutex.NodePath(l)}
	locks := 0
	for _, p := range nodes {
		if strings.Contains(p, "-lock-") {
			locks++
		}
	}
	for _, p := range want {
		if !contains(nodes, p) {
			t.Errorf("%s was not among the nodes read: %v", p, nodes)
		}
	}
	if locks != 4 { // holder, waiter, m1, m2
		t.Errorf("%d lock nodes read, want 4: %v", locks, nodes)
	}
	cancel()
	if err := <-waited; !errors.Is(err, context.Canceled) {
		t.Errorf("waiter = %v, want context.Canceled", err)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// With a creator-only ACL, the lock directories are the owner's (the first
// Lock created them with the session's ACL), and ZooKeeper checks a create
// and a delete against the parent's ACL. So a session with other
// credentials, or none, can neither delete the holder's node nor queue: each
// of its attempts fails at once (one request, no retry) with zk.ErrNoAuth
// naming the directory whose ACL refused, leaves no node, and the holders
// keep their leases.
func TestACLMutexIntruder(t *testing.T) {
	ns := zktest.NewNamespace(t)
	admin := sessiontest.DigestConn(t, ns, "alice", "secret")
	alice := connect(t, ns, ownerOpts(zk.AuthACL(zk.PermAll))...)
	ctx := ctxT(t)
	fair, _ := mutex.New(alice, "/locks/a")
	nf, _ := mutex.NewNonFair(alice, "/locks/nf")
	t.Cleanup(func() { fair.Close(); nf.Close() })
	held, err := fair.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	nfHeld, err := nf.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	locks := ns.Root + "/locks"

	for _, who := range []string{"", "bob"} {
		t.Run(map[string]string{"": "no credentials", "bob": "other credentials"}[who], func(t *testing.T) {
			s, log := sessiontest.ConnectIntruder(t, ns, who)
			m, _ := mutex.New(s, "/locks/a")
			r, _ := mutex.NewReentrant(s, "/locks/a")
			n, _ := mutex.NewNonFair(s, "/locks/nf")
			fresh, _ := mutex.New(s, "/locks/fresh") // its directory does not exist yet
			open, _ := mutex.New(s, "/open")         // the namespace root is open to all
			multi, _ := mutex.NewMulti(open, m)
			t.Cleanup(func() { m.Close(); r.Close(); n.Close(); fresh.Close(); open.Close() })
			calls := []struct {
				name, under string
				call        func(ctx context.Context) error
			}{
				{"Mutex.Lock", mutex.NodePath(held), func(ctx context.Context) error { _, err := m.Lock(ctx); return err }},
				{"Mutex.TryLock", mutex.NodePath(held), func(ctx context.Context) error { _, err := m.TryLock(ctx); return err }},
				{"Reentrant.Lock", mutex.NodePath(held), func(ctx context.Context) error { _, err := r.Lock(ctx); return err }},
				{"NonFair.Lock", mutex.NodePath(nfHeld), func(ctx context.Context) error { _, err := n.Lock(ctx); return err }},
				{"NonFair.TryLock", mutex.NodePath(nfHeld), func(ctx context.Context) error { _, err := n.TryLock(ctx); return err }},
				{"Lock in a new directory", locks, func(ctx context.Context) error { _, err := fresh.Lock(ctx); return err }},
				// The first lock is taken, the second refused: the first is
				// rolled back.
				{"Multi.Lock", mutex.NodePath(held), func(ctx context.Context) error { _, err := multi.Lock(ctx); return err }},
			}
			for _, c := range calls {
				oe := sessiontest.CheckRefused(t, c.name, log, admin, parentOf(c.under), aliceOnly, c.call)
				if oe != nil && oe.Op != "create" {
					t.Errorf("%s: refused %s %s, want the create", c.name, oe.Op, oe.Path)
				}
			}
			// Nor can it take the lock by deleting the holder's node.
			for _, p := range []string{mutex.NodePath(held), mutex.NodePath(nfHeld)} {
				if err := s.Conn().Delete(p, -1); !errors.Is(err, zk.ErrNoAuth) {
					t.Errorf("delete %s without alice's credentials = %v, want zk.ErrNoAuth", p, err)
				}
			}
			// No stray node: the directories hold alice's nodes only.
			if got := sortedKids(t, admin, ns.Root+"/locks/a"); len(got) != 1 || got[0] != held.Node() {
				t.Errorf("children of /locks/a = %v, want alice's %s only", got, held.Node())
			}
			if got := sortedKids(t, admin, ns.Root+"/locks/nf"); len(got) != 1 || got[0] != mutex.NonFairNode {
				t.Errorf("children of /locks/nf = %v, want alice's node only", got)
			}
			if got := sortedKids(t, admin, ns.Root+"/locks"); contains(got, "fresh") {
				t.Errorf("children of /locks = %v: the refused directory exists", got)
			}
			zktest.Eventually(t, wait, func() bool {
				k, _, err := s.Conn().Children(ns.Root + "/open") // the intruder's own directory
				return errors.Is(err, zk.ErrNoNode) || (err == nil && len(k) == 0)
			}, "the multi-lock's rolled-back node under /open stays")
		})
	}
	for _, l := range []*mutex.Lease{held, nfHeld} {
		if err := l.Err(); err != nil {
			t.Errorf("alice's lease %s ended: %v", mutex.NodePath(l), err)
		}
	}
	// A second session with alice's credentials is admitted.
	alice2 := connect(t, ns, ownerOpts(zk.AuthACL(zk.PermAll))...)
	m2, _ := mutex.New(alice2, "/locks/a")
	t.Cleanup(func() { m2.Close() })
	if _, err := m2.TryLock(ctx); !errors.Is(err, recipes.ErrBusy) {
		t.Errorf("TryLock with alice's credentials while held = %v, want ErrBusy", err)
	}
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	l2, err := m2.Lock(ctx)
	if err != nil {
		t.Fatalf("Lock with alice's credentials: %v", err)
	}
	if err := l2.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// parentOf returns the directory of a lock node (the path itself for a
// directory, which has no "-lock-" or fixed name in it).
func parentOf(p string) string {
	if i := strings.LastIndexByte(p, '/'); i > 0 && (strings.Contains(p[i:], "-lock-") || p[i+1:] == mutex.NonFairNode) {
		return p[:i]
	}
	return p
}

func sortedKids(t testing.TB, c *zk.Conn, p string) []string {
	t.Helper()
	k, _, err := c.Children(p)
	if err != nil && !errors.Is(err, zk.ErrNoNode) {
		t.Fatalf("children of %s: %v", p, err)
	}
	sort.Strings(k)
	return k
}

// With an open lock directory (created by someone without an ACL) and
// creator-only lock nodes, an intruder may queue, but it cannot read the
// holder's node, so it cannot watch it: Lock fails at once with zk.ErrNoAuth
// naming the holder's node, and deletes its own node. TryLock needs no read
// and reports the lock held. And, since ZooKeeper checks a delete against the
// parent's ACL, the node's own ACL does not keep the intruder from deleting
// it: only the directory's ACL protects holders. The holder is told at once
// (ErrNodeDeleted, through its node watch).
func TestACLMutexOpenDirectory(t *testing.T) {
	ns := zktest.NewNamespace(t)
	admin := sessiontest.DigestConn(t, ns, "alice", "secret")
	dir := ns.Path(lockPath)
	for _, p := range []string{ns.Path("locks"), dir} {
		if _, err := admin.Create(p, nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
			t.Fatal(err)
		}
	}
	alice := connect(t, ns, ownerOpts(zk.AuthACL(zk.PermAll))...)
	ctx := ctxT(t)
	m, _ := mutex.New(alice, lockPath)
	t.Cleanup(func() { m.Close() })
	held, err := m.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	s, log := sessiontest.ConnectIntruder(t, ns, "")
	im, _ := mutex.New(s, lockPath)
	t.Cleanup(func() { im.Close() })
	oe := sessiontest.CheckRefused(t, "Lock", log, admin, mutex.NodePath(held), aliceOnly,
		func(ctx context.Context) error { _, err := im.Lock(ctx); return err })
	if oe != nil && (oe.Op != "watch" || oe.Path != mutex.NodePath(held)) {
		t.Errorf("refused %s %s, want the watch of the holder's node %s", oe.Op, oe.Path, mutex.NodePath(held))
	}
	if _, err := im.TryLock(ctx); !errors.Is(err, recipes.ErrBusy) {
		t.Errorf("TryLock = %v, want ErrBusy", err)
	}
	zktest.Eventually(t, wait, func() bool {
		k := sortedKids(t, admin, dir)
		return len(k) == 1 && k[0] == held.Node()
	}, "the intruder's nodes stay in %s", dir)
	if err := held.Err(); err != nil {
		t.Fatalf("alice's lease ended: %v", err)
	}

	if err := s.Conn().Delete(mutex.NodePath(held), -1); err != nil {
		t.Fatalf("delete of the holder's node under an open directory = %v, want it to succeed (ZooKeeper checks the parent's ACL)", err)
	}
	if err := sessiontest.WaitDone(t, held, wait); !errors.Is(err, recipes.ErrNodeDeleted) {
		t.Errorf("holder's lease after the delete: %v, want ErrNodeDeleted", err)
	}
}
