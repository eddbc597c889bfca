package semaphore_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/internal/testkit/sessiontest"
	"github.com/zkrecipes/zkrecipes/recipes"
	"github.com/zkrecipes/zkrecipes/semaphore"
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

const aclCountPath = "/counts/c"

// Every node a semaphore creates carries the session's ACL, as given: the
// namespace's node, the semaphore's directories, "locks/" with an acquirer's
// guard node in it, "leases/" with a lease node, and the SharedCount node
// and its parent.
func TestACLSemaphoreNodes(t *testing.T) {
	ns := zktest.NewNamespace(t)
	admin := sessiontest.DigestConn(t, ns, "alice", "secret")
	acl := append(zk.DigestACL(zk.PermAll, "alice", "secret"), zk.WorldACL(zk.PermRead)...)
	app := ns.Root + "/app" // created by the sessions themselves
	var sems []*semaphore.Semaphore
	for i := 0; i < 2; i++ {
		s := sessiontest.ConnectTo(t, ns.Servers(), app, ownerOpts(acl)...)
		sems = append(sems, newShared(t, s, newCount(t, s, aclCountPath, 1)))
	}
	ctx := ctxT(t)
	l, err := sems[0].Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The second acquirer holds the acquirer mutex while it waits for room.
	qctx, cancel := context.WithCancel(ctx)
	defer cancel()
	queued := acquireAsync(qctx, sems[1], 1)
	locks := app + semPath + "/" + semaphore.LocksDir
	zktest.Eventually(t, wait, func() bool {
		k, _, err := admin.Children(locks)
		return err == nil && len(k) == 1
	}, "the waiting acquirer's guard node")
	notAcquired(t, queued)

	nodes := sessiontest.CheckTreeACL(t, admin, app, acl)
	t.Logf("%d nodes carry the session's ACL %v", len(nodes), acl)
	var guards, leaseNodes int
	for _, p := range nodes {
		switch {
		case strings.HasPrefix(p, locks+"/") && strings.Contains(p, "-lock-"):
			guards++
		case strings.Contains(p, "-lease-"):
			leaseNodes++
		}
	}
	for _, p := range []string{app, app + "/counts", app + aclCountPath, app + semPath, locks, semaphore.NodePath(l)} {
		if !containsStr(nodes, p) {
			t.Errorf("%s was not among the nodes read: %v", p, nodes)
		}
	}
	if guards != 1 || leaseNodes != 1 {
		t.Errorf("%d guard and %d lease nodes read, want 1 and 1: %v", guards, leaseNodes, nodes)
	}
	cancel()
	if r := <-queued; !errors.Is(r.err, context.Canceled) {
		t.Errorf("queued acquire = %v, want context.Canceled", r.err)
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

// With a creator-only ACL the semaphore's directories and the count node are
// the owner's, so a session with other credentials, or none, can neither
// queue on the acquirer mutex nor delete a lease, nor change or read the
// count: every acquire (fixed or shared maximum, try or not, one or n
// leases, the semaphore mutex) and every SharedCount call fails at once
// (one request, no retry) with zk.ErrNoAuth naming the path that refused;
// the lease stays and nothing is left behind.
func TestACLSemaphoreIntruder(t *testing.T) {
	ns := zktest.NewNamespace(t)
	admin := sessiontest.DigestConn(t, ns, "alice", "secret")
	alice := connect(t, ns, ownerOpts(zk.AuthACL(zk.PermAll))...)
	ctx := ctxT(t)
	sem := newShared(t, alice, newCount(t, alice, aclCountPath, 1))
	held, err := sem.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	semFull, countFull := ns.Path(semPath), ns.Path(aclCountPath)
	for _, who := range []string{"", "bob"} {
		t.Run(map[string]string{"": "no credentials", "bob": "other credentials"}[who], func(t *testing.T) {
			s, log := sessiontest.ConnectIntruder(t, ns, who)
			fixed := newSem(t, s, 2)
			count := newCount(t, s, aclCountPath, 5)
			shared := newShared(t, s, count)
			mu, err := semaphore.NewMutex(s, semPath)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { mu.Close() })
			calls := []struct {
				name, op, under string
				call            func(ctx context.Context) error
			}{
				{"Acquire", "create", semFull, func(ctx context.Context) error { _, err := fixed.Acquire(ctx); return err }},
				{"TryAcquire", "create", semFull, func(ctx context.Context) error { _, err := fixed.TryAcquire(ctx); return err }},
				{"AcquireN", "create", semFull, func(ctx context.Context) error { _, err := fixed.AcquireN(ctx, 2); return err }},
				{"shared Acquire", "create", semFull, func(ctx context.Context) error { _, err := shared.Acquire(ctx); return err }},
				{"NewMutex Acquire", "create", semFull, func(ctx context.Context) error { _, err := mu.Acquire(ctx); return err }},
				{"NewMutex TryAcquire", "create", semFull, func(ctx context.Context) error { _, err := mu.TryAcquire(ctx); return err }},
				{"SharedCount.Set", "set", countFull, func(ctx context.Context) error { _, err := count.Set(ctx, 7); return err }},
				{"SharedCount.TrySet", "set", countFull, func(ctx context.Context) error {
					_, _, err := count.TrySet(ctx, semaphore.CountValue{Count: 1}, 7)
					return err
				}},
				{"SharedCount.Get", "read", countFull, func(ctx context.Context) error { _, err := count.Get(ctx); return err }},
			}
			for _, c := range calls {
				oe := sessiontest.CheckRefused(t, c.name, log, admin, c.under, aliceOnly, c.call)
				if oe != nil && oe.Op != c.op {
					t.Errorf("%s: refused %s %s, want a %s", c.name, oe.Op, oe.Path, c.op)
				}
			}
			if err := s.Conn().Delete(semaphore.NodePath(held), -1); !errors.Is(err, zk.ErrNoAuth) {
				t.Errorf("delete of alice's lease node without her credentials = %v, want zk.ErrNoAuth", err)
			}
			if got := children(t, admin, ns, semaphore.LeasesDir); len(got) != 1 || got[0] != held.Node() {
				t.Errorf("leases = %v, want alice's %s only", got, held.Node())
			}
			if got := children(t, admin, ns, semaphore.LocksDir); len(got) != 0 {
				t.Errorf("acquirer mutex nodes left: %v", got)
			}
			if data, _, err := admin.Get(countFull); err != nil || len(data) != 4 || data[3] != 1 {
				t.Errorf("count node = %v, %v; want 1, unchanged", data, err)
			}
		})
	}
	if err := held.Err(); err != nil {
		t.Errorf("alice's lease ended: %v", err)
	}
	// alice's second session is admitted once there is room.
	alice2 := connect(t, ns, ownerOpts(zk.AuthACL(zk.PermAll))...)
	sem2 := newShared(t, alice2, newCount(t, alice2, aclCountPath, 1))
	if _, err := sem2.TryAcquire(ctx); !errors.Is(err, recipes.ErrBusy) {
		t.Errorf("TryAcquire with alice's credentials while full = %v, want ErrBusy", err)
	}
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	l2, err := sem2.Acquire(ctx)
	if err != nil {
		t.Fatalf("Acquire with alice's credentials: %v", err)
	}
	if err := l2.Release(ctx); err != nil {
		t.Fatal(err)
	}
}
