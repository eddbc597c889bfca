// Package readme holds the Go snippets of the repository's README.md,
// verbatim, so that the test suite compiles them and runs them against a
// real ZooKeeper. readme.go is the snippets of the tour, after this package
// clause and nothing else; the drift test (snippets_test.go) fails when
// README.md and this file differ. The other files run them, and hold the
// examples that docs/zktest.md and the package documentation show.
package readme

import (
	"context"
	"errors"

	"go.uber.org/zap"

	"github.com/zkrecipes/zkrecipes/leader"
	"github.com/zkrecipes/zkrecipes/mutex"
	"github.com/zkrecipes/zkrecipes/session"
)

// serve opens the process's one ZooKeeper session, runs the service on it,
// and closes it on the way out.
func serve(ctx context.Context, servers []string, logger *zap.Logger,
	service func(ctx context.Context, sess *session.Session) error) (err error) {
	sess, err := session.Connect(ctx, servers, // such as []string{"zk1:2181", "zk2:2181"}
		session.WithNamespace("/myapp"), // every recipe path lives below it
		session.WithLogger(logger))      // silent by default
	if err != nil {
		return err // within 15 s if no server answers, naming the address
	}
	defer func() { err = errors.Join(err, sess.Close()) }()
	return service(ctx, sess)
}

// withBillingLock runs job while this process holds the lock "/locks/billing".
func withBillingLock(ctx context.Context, sess *session.Session,
	job func(ctx context.Context, token int64) error) (err error) {
	m, err := mutex.New(sess, "/locks/billing") // fair, Curator's InterProcessMutex layout
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, m.Close()) }()

	lease, err := m.Lock(ctx) // ctx bounds the wait, and nothing else
	if err != nil {
		return err
	}
	// Release even when ctx has ended: a release is cleanup.
	defer func() { err = errors.Join(err, lease.Release(context.WithoutCancel(ctx))) }()

	// lease.Context() is canceled the moment the lock is no longer safe: run
	// the job under it, and give the token to the guarded resource, which
	// refuses writes with a token lower than the highest it has seen.
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
