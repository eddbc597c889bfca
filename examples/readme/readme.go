// Package readme holds the Go snippets of the repository's README.md,
// verbatim, so that the test suite compiles them and runs them against a
// real ZooKeeper. readme.go is the snippets of the tour and readme_test.go the
// test snippet, each after this package clause and nothing else; the drift
// test (snippets_test.go) fails when README.md and these files differ.
package readme

import (
	"context"
	"errors"

	"github.com/go-zookeeper/zk"
	"go.uber.org/zap"

	"github.com/zkrecipes/zkrecipes/leader"
	"github.com/zkrecipes/zkrecipes/mutex"
	"github.com/zkrecipes/zkrecipes/recipes/barrier"
	"github.com/zkrecipes/zkrecipes/recipes/counter"
	"github.com/zkrecipes/zkrecipes/rwlock"
	"github.com/zkrecipes/zkrecipes/semaphore"
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

// readCatalog runs read while this process holds the catalog's read lock,
// which any number of readers share.
func readCatalog(ctx context.Context, rw *rwlock.RWMutex, read func(ctx context.Context) error) error {
	lease, err := rw.RLock(ctx)
	if err != nil {
		return err
	}
	defer lease.Release(context.WithoutCancel(ctx))
	return read(lease.Context())
}

// export runs job while this process holds one of the leases of sem, such
// as semaphore.New(sess, "/limits/exports", 3): at most 3 across all processes.
func export(ctx context.Context, sem *semaphore.Semaphore, job func(ctx context.Context) error) error {
	lease, err := sem.Acquire(ctx)
	if err != nil {
		return err
	}
	defer lease.Release(context.WithoutCancel(ctx))
	return job(lease.Context())
}

// nextInvoiceNumber returns a number that no other process (Go, or Java on
// Curator's DistributedAtomicLong) gets from ids, such as
// counter.New(sess, "/ids/invoices"). After a lost answer it writes again
// only if nothing was written since, so no number is handed out twice (one
// may be skipped).
func nextInvoiceNumber(ctx context.Context, ids *counter.Counter[int64]) (int64, error) {
	v, err := ids.Increment(ctx)
	for errors.Is(err, counter.ErrUnknownOutcome) {
		var ok bool
		if v, ok, err = ids.TrySet(ctx, v, v.Value+1); err == nil && !ok {
			v, err = ids.Increment(ctx) // someone wrote since, perhaps this call: take another
		}
	}
	return v.Value, err
}

// runBatchStep runs step once every worker of the batch has entered d, such
// as barrier.NewDouble(sess, "/batches/nightly", 3), and returns once every
// worker has finished its step and left.
func runBatchStep(ctx context.Context, d *barrier.DoubleBarrier, step func(ctx context.Context) error) error {
	if err := d.Enter(ctx); err != nil {
		return err
	}
	return errors.Join(step(ctx), d.Leave(ctx))
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
