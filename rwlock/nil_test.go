package rwlock_test

import (
	"context"
	"testing"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/internal/testkit/leasetest"
	"github.com/zkrecipes/zkrecipes/rwlock"
)

// TestNilLeases: a nil *Lease and a nil *WriteLease behave as a nil
// *mutex.Lease does, as leases that have ended with an error matching
// session.ErrBadArgument: no method panics (a method the WriteLease
// promoted from a nil embedded Lease would), Release, Commit and Downgrade
// return that error, Done is closed.
func TestNilLeases(t *testing.T) {
	ctx := context.Background()
	t.Run("Lease", func(t *testing.T) {
		var l *rwlock.Lease
		leasetest.CheckNil(t, l, "rwlock", "nil lease",
			leasetest.Call{Name: "Release", Call: func(*testing.T) error { return l.Release(ctx) }})
	})
	t.Run("WriteLease", func(t *testing.T) {
		var w *rwlock.WriteLease
		leasetest.CheckNil(t, w, "rwlock", "nil write lease",
			leasetest.Call{Name: "Release", Call: func(*testing.T) error { return w.Release(ctx) }},
			leasetest.Call{Name: "Commit", Call: func(t *testing.T) error {
				res, err := w.Commit(ctx, &zk.CreateRequest{Path: "/x"})
				if res != nil {
					t.Errorf("Commit of a nil write lease returned %v", res)
				}
				return err
			}},
			leasetest.Call{Name: "Downgrade", Call: func(t *testing.T) error {
				r, err := w.Downgrade(ctx)
				if r != nil {
					t.Errorf("Downgrade of a nil write lease returned a lease")
				}
				return err
			}},
		)
	})
}
