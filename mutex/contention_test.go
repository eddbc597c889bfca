package mutex_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/mutex"
	"github.com/zkrecipes/zkrecipes/session"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// TestCounterFIFO: 8 sessions, many cycles each, on a counter znode updated
// without version checks. The count is exact only if the lock excludes; the
// acquisition order must follow the node sequence (FIFO).
func TestCounterFIFO(t *testing.T) {
	for _, kind := range []string{"mutex", "nonreentrant"} {
		t.Run(kind, func(t *testing.T) { testCounterFIFO(t, kind) })
	}
}

func testCounterFIFO(t *testing.T, kind string) {
	const sessions, cycles = 8, 25
	ns := zktest.NewNamespace(t)
	raw := ns.Conn(t)
	counter := ns.Path("counter")
	if _, err := raw.Create(counter, make([]byte, 8), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t)

	var mu sync.Mutex
	var order []int64 // sequence numbers in acquisition order
	errs := make(chan error, sessions)
	var wg sync.WaitGroup
	for i := 0; i < sessions; i++ {
		s := connect(t, ns)
		var lk mutex.Locker
		var err error
		id := mutex.WithID(fmt.Sprintf("s%d", i))
		if kind == "mutex" {
			lk, err = mutex.New(s, lockPath, id)
		} else {
			lk, err = mutex.NewNonReentrant(s, lockPath, id)
		}
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { lk.(interface{ Close() error }).Close() })
		wg.Add(1)
		go func(s *session.Session) {
			defer wg.Done()
			errs <- func() error {
				c := s.Conn()
				for j := 0; j < cycles; j++ {
					l, err := lk.Lock(ctx)
					if err != nil {
						return err
					}
					seq, err := strconv.ParseInt(seqOf(l.Node()), 10, 64)
					if err != nil {
						return err
					}
					mu.Lock()
					order = append(order, seq)
					mu.Unlock()
					b, _, err := c.Get(counter)
					if err != nil {
						return err
					}
					n := binary.BigEndian.Uint64(b)
					binary.BigEndian.PutUint64(b, n+1)
					if _, err := c.Set(counter, b, -1); err != nil {
						return err
					}
					if l.Err() != nil {
						return fmt.Errorf("lease ended while held: %w", l.Err())
					}
					if err := l.Unlock(ctx); err != nil {
						return err
					}
				}
				return nil
			}()
		}(s)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	b, _, err := raw.Get(counter)
	if err != nil {
		t.Fatal(err)
	}
	if got := binary.BigEndian.Uint64(b); got != sessions*cycles {
		t.Fatalf("counter = %d, want %d", got, sessions*cycles)
	}
	for i := 1; i < len(order); i++ {
		if order[i] <= order[i-1] {
			t.Fatalf("acquisition %d has sequence %d after %d: not FIFO (order %v)", i, order[i], order[i-1], order)
		}
	}
	if k := lockKids(t, raw, ns); len(k) != 0 {
		t.Fatalf("nodes left: %q", k)
	}
	t.Logf("%d acquisitions in sequence order", len(order))
}

// TestCancelWhileQueued: a Lock canceled (or timed out) while queued returns
// the ctx error and leaves no node.
func TestCancelWhileQueued(t *testing.T) {
	ns := zktest.NewNamespace(t)
	raw := ns.Conn(t)
	a := newMutex(t, connect(t, ns))
	b := newMutex(t, connect(t, ns))
	ctx := ctxT(t)
	la, err := a.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name string
		want error
	}{{"cancel", context.Canceled}, {"deadline", context.DeadlineExceeded}} {
		t.Run(tc.name, func(t *testing.T) {
			var bctx context.Context
			var cancel context.CancelFunc
			if tc.want == context.DeadlineExceeded {
				bctx, cancel = context.WithTimeout(ctx, 500*time.Millisecond)
			} else {
				bctx, cancel = context.WithCancel(ctx)
			}
			defer cancel()
			done := make(chan error, 1)
			go func() {
				l, err := b.Lock(bctx)
				if err == nil {
					l.Unlock(ctx)
					err = errors.New("Lock succeeded")
				}
				done <- err
			}()
			if tc.want == context.Canceled {
				waitKids(t, raw, ns, 2)
				cancel()
			}
			err := <-done
			if !errors.Is(err, tc.want) {
				t.Fatalf("Lock = %v, want %v", err, tc.want)
			}
			if k := lockKids(t, raw, ns); len(k) != 1 || k[0] != la.Node() {
				t.Fatalf("nodes %q, want only the holder's %q", k, la.Node())
			}
		})
	}
	if err := la.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}
