package mutex_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/internal/testkit/sessiontest"
	"github.com/zkrecipes/zkrecipes/mutex"
	"github.com/zkrecipes/zkrecipes/session"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// TestCounterFIFO: 8 sessions, many cycles each, on a counter znode updated
// without version checks. The count is exact only if the lock excludes; for
// the fair kinds the acquisition order must also follow the node sequence
// (FIFO). NonFair promises no order: only the count is checked.
func TestCounterFIFO(t *testing.T) {
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) { testCounterFIFO(t, k) })
	}
}

func testCounterFIFO(t *testing.T, k lockKind) {
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
		lk := k.make(t, s, mutex.WithID(fmt.Sprintf("s%d", i)))
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
					if k.fair {
						seq, err := strconv.ParseInt(seqOf(l.Node()), 10, 64)
						if err != nil {
							return err
						}
						mu.Lock()
						order = append(order, seq)
						mu.Unlock()
					}
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
					if err := l.Release(ctx); err != nil {
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
	if ks := kids(t, raw, ns); len(ks) != 0 {
		t.Fatalf("nodes left: %q", ks)
	}
	if !k.fair {
		t.Logf("%d acquisitions, counter exact", sessions*cycles)
		return
	}
	if len(order) != sessions*cycles {
		t.Fatalf("%d acquisitions recorded, want %d", len(order), sessions*cycles)
	}
	for i := 1; i < len(order); i++ {
		if order[i] <= order[i-1] {
			t.Fatalf("acquisition %d has sequence %d after %d: not FIFO (order %v)", i, order[i], order[i-1], order)
		}
	}
	t.Logf("%d acquisitions in sequence order, counter exact", len(order))
}

// TestCancelWhileQueued: for each kind, a Lock canceled (or timed out) while
// it waits behind another session's holder returns the ctx error and leaves
// nothing behind: the directory holds only the holder's node, untouched.
// Queued means, for the fair kinds, that the waiter's node is in the
// directory; for NonFair, which queues no node, that the waiter has sent its
// second read of the lock node: the first is pipelined behind its create,
// the second sets the watch it waits on after the create failed.
func TestCancelWhileQueued(t *testing.T) {
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			ns := zktest.NewNamespace(t)
			raw := ns.Conn(t)
			a := k.make(t, connect(t, ns))
			ws, p := sessiontest.ConnectProxy(t, ns)
			b := k.make(t, ws)
			fixed := ns.Path(lockPath) + "/" + mutex.NonFairNode
			var reads atomic.Int32 // the waiter's reads of the NonFair node
			watching := make(chan struct{}, 1)
			if !k.fair {
				p.OnRequest(func(r zktest.Request) zktest.Action {
					if r.Op == zktest.OpGetData && r.Path == fixed && reads.Add(1) == 2 {
						select { // never block the proxy
						case watching <- struct{}{}:
						default:
						}
					}
					return zktest.Forward
				})
			}
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
						// Long enough that the waiter is queued (checked
						// below) well before the deadline, even on a loaded
						// machine: the deadline must end a wait, not the
						// create before it.
						bctx, cancel = context.WithTimeout(ctx, 2*time.Second)
					} else {
						bctx, cancel = context.WithCancel(ctx)
					}
					defer cancel()
					reads.Store(0)
					select { // forget an earlier subtest's signal
					case <-watching:
					default:
					}
					done := make(chan error, 1)
					go func() {
						l, err := b.Lock(bctx)
						if err == nil {
							l.Release(ctx)
							err = errors.New("Lock succeeded")
						}
						done <- err
					}()
					if k.fair {
						waitKids(t, raw, ns, 2)
					} else {
						sessiontest.Recv(t, watching, wait, "waiter's read of the lock node")
					}
					if tc.want == context.Canceled {
						cancel()
					}
					err := sessiontest.Recv(t, done, wait, "Lock result")
					if !errors.Is(err, tc.want) {
						t.Fatalf("Lock = %v, want %v", err, tc.want)
					}
					// The canceled waiter's node goes through the session's
					// queue: at once on a healthy connection, but the call
					// only waits 10 ms for it (ctx bounds the call).
					var ks []string
					zktest.Eventually(t, wait, func() bool {
						ks = kids(t, raw, ns)
						return len(ks) == 1 && ks[0] == la.Node()
					}, "nodes %q, want only the holder's %q", &ks, la.Node())
					_, st, err := raw.Get(mutex.NodePath(la))
					if err != nil || st.EphemeralOwner != mutex.NodeSessionID(la) || st.Czxid != la.Token() {
						t.Fatalf("holder's node: stat %+v, %v", st, err)
					}
					if err := la.Err(); err != nil {
						t.Fatalf("holder's lease ended: %v", err)
					}
				})
			}
			if err := la.Release(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}
