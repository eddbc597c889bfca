package semaphore_test

import (
	"context"
	"testing"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/internal/testkit/leasetest"
	"github.com/zkrecipes/zkrecipes/semaphore"
)

// TestNilLease: a nil *Lease behaves as a nil *mutex.Lease does, as a lease
// that has ended with an error matching session.ErrBadArgument: no method
// panics, Release and Commit return that error, Done is closed.
func TestNilLease(t *testing.T) {
	var l *semaphore.Lease
	ctx := context.Background()
	leasetest.CheckNil(t, l, "semaphore", "nil lease",
		leasetest.Call{Name: "Release", Call: func(*testing.T) error { return l.Release(ctx) }},
		leasetest.Call{Name: "Commit", Call: func(t *testing.T) error {
			res, err := l.Commit(ctx, &zk.CreateRequest{Path: "/x"})
			if res != nil {
				t.Errorf("Commit of a nil lease returned %v", res)
			}
			return err
		}},
	)
}
