package counter_test

// Interoperability with Apache Curator 5.4's DistributedAtomicLong and
// DistributedAtomicInteger (internal/testkit/curatortest's CuratorCounter
// program): Java and Go processes change one counter. The Java side gets full
// server paths (the Go sessions' namespace root plus the path).

import (
	"sync"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/internal/testkit/curatortest"
	"github.com/zkrecipes/zkrecipes/internal/testkit/sessiontest"
	"github.com/zkrecipes/zkrecipes/recipes/counter"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// Six Go sessions and two Curator processes increment one 64-bit counter
// 1,000 times each, at the same time: the total is exact, and each side
// reads the value the other wrote.
func TestInteropLongExactTotal(t *testing.T) {
	const goSessions, javas, each = 6, 2, 1000
	ns := zktest.NewNamespace(t)
	ctx := ctxT(t)
	var js []*curatortest.Counter
	for i := 0; i < javas; i++ {
		js = append(js, curatortest.StartCounter(t, ns.Servers(), ns.Path(cpath), true))
	}
	var cs []*counter.Counter[int64]
	for i := 0; i < goSessions; i++ {
		cs = append(cs, newCounter(t, sessiontest.Connect(t, ns)))
	}
	for _, j := range js {
		if err := j.BeginAdd(1, each); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, goSessions)
	for _, c := range cs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := 0; k < each; k++ {
				if _, err := c.Increment(ctx); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	for _, j := range js {
		if _, err := j.WaitAdded(ctx); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	const total = (goSessions + javas) * each
	if v, err := cs[0].Get(ctx); err != nil || v.Value != total {
		t.Fatalf("Go reads %+v, %v; want %d", v, err, total)
	}
	if v, err := js[0].Get(ctx); err != nil || v != total {
		t.Fatalf("Curator reads %d, %v; want %d", v, err, total)
	}
	// A value of Go's, past 32 bits and negative, read by Curator.
	if _, err := cs[0].Add(ctx, -1<<40); err != nil {
		t.Fatal(err)
	}
	if v, err := js[0].Get(ctx); err != nil || v != total-1<<40 {
		t.Fatalf("Curator reads %d, %v; want %d", v, err, int64(total-1<<40))
	}
	// Curator's compareAndSet against Go's value.
	if ok, err := js[1].CompareAndSet(ctx, total-1<<40, 7); err != nil || !ok {
		t.Fatalf("Curator compareAndSet = %v, %v", ok, err)
	}
	if v, err := cs[1].Get(ctx); err != nil || v.Value != 7 {
		t.Fatalf("Go reads %+v, %v; want 7", v, err)
	}
}

// A 32-bit counter: Curator's DistributedAtomicInteger and New32 share it
// (4-byte encoding), negative values included; a Curator process creates
// the node and Go reads it, then the other way round.
func TestInteropInt(t *testing.T) {
	ns := zktest.NewNamespace(t)
	ctx := ctxT(t)
	j := curatortest.StartCounter(t, ns.Servers(), ns.Path(cpath), false)
	c, err := counter.New32(sessiontest.Connect(t, ns), cpath)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := j.BeginAdd(-3, 100); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		for k := 0; k < 100; k++ {
			if _, err := c.Add(ctx, 5); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	if _, err := j.WaitAdded(ctx); err != nil {
		t.Fatal(err)
	}
	if err := sessiontest.Recv(t, done, 2*time.Minute, "Go adds"); err != nil {
		t.Fatal(err)
	}
	if v, err := c.Get(ctx); err != nil || v.Value != 200 {
		t.Fatalf("Go reads %+v, %v; want 200", v, err)
	}
	if _, err := c.Add(ctx, -1000); err != nil {
		t.Fatal(err)
	}
	if v, err := j.Get(ctx); err != nil || v != -800 {
		t.Fatalf("Curator reads %d, %v; want -800", v, err)
	}
}
