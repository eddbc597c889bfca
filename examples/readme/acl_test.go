package readme

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/internal/testkit/sessiontest"
	"github.com/zkrecipes/zkrecipes/internal/zksession"
	"github.com/zkrecipes/zkrecipes/mutex"
	"github.com/zkrecipes/zkrecipes/session"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// README's ACL snippet runs as shown: while a session connected as
// "billing" holds the billing lock, a session connected as another user is
// refused at once with zk.ErrNoAuth and a *zksession.OpError; a second
// "billing" session takes the lock afterwards.
func TestACLSnippet(t *testing.T) {
	ns := zktest.NewNamespace(t)
	sessiontest.DigestConn(t, ns, "billing", "s3cret") // removes the protected nodes after the test
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	connect := func(user, password string) *session.Session {
		s, err := connectAs(ctx, ns.Servers(), ns.Root, user, password)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	owner, other, owner2 := connect("billing", "s3cret"), connect("intruder", "x"), connect("billing", "s3cret")

	err := withBillingLock(ctx, owner, func(ctx context.Context, token int64) error {
		m, err := mutex.New(other, "/locks/billing")
		if err != nil {
			return err
		}
		defer m.Close()
		start := time.Now()
		_, err = m.TryLock(ctx)
		var oe *zksession.OpError
		if !errors.Is(err, zk.ErrNoAuth) || !errors.As(err, &oe) || oe.ACLPath() != ns.Path("locks/billing") {
			return fmt.Errorf("another user's TryLock = %v, want zk.ErrNoAuth refused by the ACL of %s", err, ns.Path("locks/billing"))
		}
		t.Logf("refused after %v: %v", time.Since(start), err)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	err = withBillingLock(ctx, owner2, func(context.Context, int64) error { return nil })
	if err != nil {
		t.Fatalf("a second session with the same credentials: %v", err)
	}
}

// connectAs connects with the digest credentials of user. Every node the
// recipes create on this session then admits only sessions with the same
// credentials: others can neither queue nor delete a holder's node, and
// their attempts fail at once with an error matching zk.ErrNoAuth that names
// the node whose ACL refused.
func connectAs(ctx context.Context, servers []string, namespace, user, password string) (*session.Session, error) {
	return session.Connect(ctx, servers,
		session.WithNamespace(namespace),
		session.WithDigestAuth(user, password),
		session.WithACL(zk.AuthACL(zk.PermAll))) // or zk.DigestACL(zk.PermAll, user, password)
}
