package zksession_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/internal/testkit/sessiontest"
	"github.com/zkrecipes/zkrecipes/internal/zksession"
	"github.com/zkrecipes/zkrecipes/session"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// ACL tests. auth_test.go covers digest credentials across a new
// session and errors.Is(zk.ErrNoAuth) for an intruder; these cover the ACL
// of every node the Session creates, and how fast and how precisely a
// refusal is reported.

// Refused wraps only the refusals, once, and the message names the request
// and the node whose ACL decided.
func TestACLOpError(t *testing.T) {
	const p = "/ns/locks/a/_c_x-lock-"
	err := zksession.Refused("create", p, zk.ErrNoAuth)
	var oe *zksession.OpError
	if !errors.As(err, &oe) || !errors.Is(err, zk.ErrNoAuth) || oe.Op != "create" || oe.Path != p || oe.ACLPath() != "/ns/locks/a" {
		t.Fatalf("Refused(create, NoAuth) = %#v", err)
	}
	if got, want := err.Error(), "create "+p+": refused by the ACL of /ns/locks/a: zk: not authenticated"; got != want {
		t.Errorf("message %q, want %q", got, want)
	}
	if got, want := zksession.Refused("watch", "/ns/n", zk.ErrNoAuth).Error(), "watch /ns/n: refused by its ACL: zk: not authenticated"; got != want {
		t.Errorf("message %q, want %q", got, want)
	}
	if got, want := zksession.Refused("delete", "/ns/n", zk.ErrNoAuth).(*zksession.OpError).ACLPath(), "/ns"; got != want {
		t.Errorf("delete ACLPath %q, want %q", got, want)
	}
	if got, want := zksession.Refused("set", "/n", zk.ErrInvalidACL).Error(), "set /n: zk: invalid ACL specified"; got != want {
		t.Errorf("message %q, want %q", got, want)
	}
	// Already carrying an OpError: not wrapped again.
	wrapped := fmt.Errorf("recipe: %w", err)
	if again := zksession.Refused("list", "/other", wrapped); again != wrapped {
		t.Errorf("Refused of a wrapped OpError = %v, want it unchanged", again)
	}
	// Not refusals: unchanged.
	for _, e := range []error{nil, zk.ErrNoNode, zk.ErrNodeExists, zk.ErrBadVersion, zk.ErrConnectionClosed,
		zk.ErrSessionExpired, context.Canceled, session.ErrLost} {
		if got := zksession.Refused("create", p, e); got != e {
			t.Errorf("Refused(%v) = %v, want it unchanged", e, got)
		}
	}
}

// Every node the Session creates carries its ACL, as given: the namespace's
// persistent nodes, the containers EnsureContainers creates below it, and
// ephemeral nodes, sequential or not.
func TestACLSessionNodes(t *testing.T) {
	ns := zktest.NewNamespace(t)
	admin := sessiontest.DigestConn(t, ns, "alice", "secret")
	acl := append(zk.DigestACL(zk.PermAll, "alice", "secret"), zk.WorldACL(zk.PermRead)...)
	s := sessiontest.ConnectTo(t, ns.Servers(), ns.Root+"/app/deep",
		session.WithDigestAuth("alice", "secret"), session.WithACL(acl))
	ctx := ctxT(t, wait)
	dir, err := s.Path("/x/y")
	if err != nil {
		t.Fatal(err)
	}
	if err := sessiontest.Core(s).EnsureContainers(ctx, dir); err != nil {
		t.Fatal(err)
	}
	e, _, err := sessiontest.Core(s).CreateEphemeral(ctx, sessiontest.Core(s).Epoch(), dir+"/e", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	seq, _, err := sessiontest.Core(s).CreateEphemeral(ctx, sessiontest.Core(s).Epoch(), dir+"/s-", nil, zk.FlagSequence)
	if err != nil {
		t.Fatal(err)
	}
	nodes := sessiontest.CheckTreeACL(t, admin, ns.Root+"/app", acl)
	want := []string{ns.Root + "/app", ns.Root + "/app/deep", ns.Root + "/app/deep/x", dir, e, seq}
	if fmt.Sprint(nodes) != fmt.Sprint(sortedCopy(want)) {
		t.Errorf("nodes read %v, want %v", nodes, want)
	}
	t.Logf("%d nodes carry the session's ACL %v", len(nodes), acl)
}

func sortedCopy(s []string) []string {
	out := append([]string(nil), s...)
	for i := range out { // insertion sort: a handful of paths
		for j := i; j > 0 && out[j] < out[j-1]; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

// Under a node with a creator-only ACL, another session's EnsureContainers,
// CreateEphemeral and Retry are refused at once: the request is sent once
// (Retry treats zk.ErrNoAuth as permanent), the error matches zk.ErrNoAuth
// and names the node that could not be created and the node whose ACL
// refused, and nothing is created.
func TestACLSessionRefused(t *testing.T) {
	ns := zktest.NewNamespace(t)
	admin := sessiontest.DigestConn(t, ns, "alice", "secret")
	alice := sessiontest.Connect(t, ns, session.WithDigestAuth("alice", "secret"), session.WithACL(zk.AuthACL(zk.PermAll)))
	ctx := ctxT(t, wait)
	secure, err := alice.Path("/secure")
	if err != nil {
		t.Fatal(err)
	}
	if err := sessiontest.Core(alice).EnsureContainers(ctx, secure); err != nil {
		t.Fatal(err)
	}
	// A persistent child keeps the container from being reaped.
	if _, err := alice.Conn().Create(secure+"/keep", nil, 0, sessiontest.Core(alice).ACL()); err != nil {
		t.Fatal(err)
	}
	aliceOnly := zk.DigestACL(zk.PermAll, "alice", "secret")

	for _, who := range []string{"", "bob"} {
		t.Run(map[string]string{"": "no credentials", "bob": "other credentials"}[who], func(t *testing.T) {
			// A fast, unbounded retry policy: a retried refusal would show
			// as many requests well within RefusalBound.
			fast := session.WithRetry(func() backoff.BackOff { return backoff.NewConstantBackOff(5 * time.Millisecond) })
			opts := []session.Option{fast}
			if who != "" {
				opts = append(opts, session.WithDigestAuth(who, "other"), session.WithACL(zk.AuthACL(zk.PermAll)))
			}
			s, proxy := sessiontest.ConnectProxy(t, ns, opts...)
			log := sessiontest.LogRequests(proxy)
			tk := sessiontest.Core(s)
			var calls atomic.Int32
			cases := []struct {
				name, node string // node: the one that could not be created
				call       func(ctx context.Context) error
			}{
				{"EnsureContainers", secure + "/sub", func(ctx context.Context) error {
					return tk.EnsureContainers(ctx, secure+"/sub/deeper")
				}},
				{"CreateEphemeral", secure + "/e", func(ctx context.Context) error {
					_, _, err := tk.CreateEphemeral(ctx, sessiontest.Core(s).Epoch(), secure+"/e", nil, 0)
					return err
				}},
				{"CreateEphemeral sequential", secure + "/s-", func(ctx context.Context) error {
					_, _, err := tk.CreateEphemeral(ctx, sessiontest.Core(s).Epoch(), secure+"/s-", nil, zk.FlagSequence)
					return err
				}},
				{"Retry", secure + "/r", func(ctx context.Context) error {
					return tk.Retry(ctx, sessiontest.Core(s).Epoch(), func(c *zk.Conn) error {
						calls.Add(1)
						_, err := c.Create(secure+"/r", nil, 0, zk.WorldACL(zk.PermAll))
						return zksession.Refused("create", secure+"/r", err)
					})
				}},
			}
			for _, c := range cases {
				oe := sessiontest.CheckRefused(t, c.name, log, admin, secure, aliceOnly, c.call)
				if oe != nil && (oe.Op != "create" || oe.Path != c.node || oe.ACLPath() != secure) {
					t.Errorf("%s: refused %s %s (ACL of %s), want the create of %s in %s", c.name, oe.Op, oe.Path, oe.ACLPath(), c.node, secure)
				}
			}
			if n := calls.Load(); n != 1 {
				t.Errorf("Retry ran its op %d times on zk.ErrNoAuth, want once", n)
			}
			// A raw zk.ErrNoAuth from op is permanent too.
			calls.Store(0)
			err := tk.Retry(ctx, sessiontest.Core(s).Epoch(), func(*zk.Conn) error { calls.Add(1); return zk.ErrNoAuth })
			if !errors.Is(err, zk.ErrNoAuth) || calls.Load() != 1 {
				t.Errorf("Retry of zk.ErrNoAuth: %v after %d calls, want it returned after one", err, calls.Load())
			}
			if k, _, err := admin.Children(secure); err != nil || len(k) != 1 || k[0] != "keep" {
				t.Errorf("children of %s = %v (%v), want [keep] only", secure, k, err)
			}
		})
	}
}
