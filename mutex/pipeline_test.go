package mutex_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/zkrecipes/zkrecipes/mutex"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// TestPipelinedReadBehindCreate: an uncontended Lock sends its children
// read without waiting for its create's reply, and the read goes behind the
// create, so it sees our node and is never sent again. 32 goroutines lock
// and release 32 keys on one tapped session, many requests in flight at
// once (where a read that overtook its create was frequent): exactly one
// read per create (a create is sent again when the server reaped the empty
// directory between two locks, its read with it).
func TestPipelinedReadBehindCreate(t *testing.T) {
	const keys, cycles = 32, 25
	ns := zktest.NewNamespace(t)
	s, tap := tappedSession(t, ns)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	ms := make([]*mutex.Mutex, keys)
	for i := range ms {
		m, err := mutex.New(s, fmt.Sprintf("/keys/k%d", i))
		if err != nil {
			t.Fatal(err)
		}
		ms[i] = m
	}
	run := func(n int) {
		t.Helper()
		var wg sync.WaitGroup
		errs := make(chan error, keys)
		for _, m := range ms {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for j := 0; j < n; j++ {
					l, err := m.Lock(ctx)
					if err != nil {
						errs <- err
						return
					}
					if err := l.Release(ctx); err != nil {
						errs <- err
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
	}
	run(1) // the directories exist from here on
	_, before := requestsOf([]*zktest.Tap{tap})
	run(cycles)
	_, after := requestsOf([]*zktest.Tap{tap})
	locks := int64(keys * cycles)
	creates, reads := after["create"]-before["create"], after["getChildren2"]-before["getChildren2"]
	t.Logf("%d locks: %d creates, %d children reads, %d deletes", locks, creates, reads, after["delete"]-before["delete"])
	if creates < locks || reads != creates {
		t.Fatalf("%d locks sent %d creates and %d children reads, want one read per create", locks, creates, reads)
	}
}
