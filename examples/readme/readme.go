// Package readme holds the Go snippets of the repository's README.md,
// verbatim, so that the test suite compiles them and runs them against a
// real ZooKeeper. readme.go is the snippets of the tour and readme_test.go the
// test snippet, each after this package clause and nothing else; the drift
// test (snippets_test.go) fails when README.md and these files differ.
package readme

import (
	"context"
	"errors"
	"time"

	"github.com/go-zookeeper/zk"
	"go.uber.org/zap"

	"github.com/zkrecipes/zkrecipes/leader"
	"github.com/zkrecipes/zkrecipes/mutex"
	"github.com/zkrecipes/zkrecipes/session"
)

// serve opens the process's one ZooKeeper session, runs the service on it,
// and closes it on the way out.
func serve(ctx context.Context, servers []string, logger *zap.Logger,
	service func(ctx context.Context, sess *session.Session) error) (err error) {
	// Connect keeps trying until its ctx ends (logging a warning every few
	// seconds): give it a deadline, or a wrong address blocks for ever.
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	sess, err := session.Connect(cctx, servers, // such as []string{"zk1:2181", "zk2:2181"}
		session.WithSessionTimeout(10*time.Second),
		session.WithNamespace("/myapp"), // every recipe path lives below it
		session.WithLogger(logger))      // silent by default
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, sess.Close()) }()
	return service(ctx, sess)
}

// withBillingLock runs job while this process holds the lock "/locks/billing".
func withBillingLock(ctx context.Context, sess *session.Session,
	job func(ctx context.Context, token int64) error) (err error) {
	m, err := mutex.New(sess, "/locks/billing") // fair, not reentrant, Curator-compatible
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, m.Close()) }()

	lease, err := m.Lock(ctx) // ctx bounds the wait, and nothing else
	if err != nil {
		return err
	}
	// Unlock even when ctx has ended: a release is cleanup.
	defer func() { err = errors.Join(err, lease.Release(context.WithoutCancel(ctx))) }()

	// lease.Context() is canceled the moment the lock is no longer safe: run
	// the work under it, and give the token to the guarded resource as a
	// fencing token.
	return job(lease.Context(), lease.Token())
}

// runScheduler keeps one scheduler running among all the replicas that call
// it, until ctx ends.
func runScheduler(ctx context.Context, sess *session.Session,
	schedule func(ctx context.Context) error) error {
	return leader.Run(ctx, sess, "/election/scheduler", func(ctx context.Context) error {
		// ctx is canceled as soon as this process stops leading.
		return schedule(ctx)
	})
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
