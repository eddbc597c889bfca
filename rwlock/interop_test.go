package rwlock_test

// Interoperability with Apache Curator 5.4's InterProcessReadWriteLock: Java
// contenders (internal/curatortest's CuratorRWLock program) and Go locks of
// both kinds on one lock path. The Java side gets the full server path.

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/internal/testkit/curatortest"
	"github.com/zkrecipes/zkrecipes/recipes"
	"github.com/zkrecipes/zkrecipes/rwlock"
	"github.com/zkrecipes/zkrecipes/zktest"
)

func interopContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// TestCuratorRWLockCounter: two Curator processes and two Go sessions (an
// RWMutex and a Reentrant) run the mixed workload on one path (client c's
// round k writes iff (k+3c) mod 5 == 0). Writers read a counter znode, set
// it to "writing", then to the next number, without version checks; every
// reader, Go or Java, checks that it never sees "writing". The counter is
// exact and no reader saw a write in progress only if Go and Curator
// exclude each other.
func TestCuratorRWLockCounter(t *testing.T) {
	const rounds = 40
	ctx := interopContext(t)
	ns := zktest.NewNamespace(t)
	raw := ns.Conn(t)
	counter := ns.Path("/counter")
	if _, err := raw.Create(counter, []byte("0"), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	full := ns.Path(lockPath)
	javas := []*curatortest.RWLock{
		curatortest.StartRWLock(t, ns.Servers(), full, "java-0"),
		curatortest.StartRWLock(t, ns.Servers(), full, "java-1"),
	}
	gos := []locker{
		newRWMutex(t, connect(t, ns), rwlock.WithID("go-2")),
		newReentrant(t, connect(t, ns), rwlock.WithID("go-3")),
	}
	for c, j := range javas {
		if err := j.BeginCycles(rounds, counter, c); err != nil {
			t.Fatal(err)
		}
	}
	var activeR, activeW, goReads, goWrites atomic.Int32
	errs := make(chan error, len(gos))
	var wg sync.WaitGroup
	for i, lk := range gos {
		c := len(javas) + i
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- cycles(ctx, raw, lk, counter, c, rounds, curatortest.Writes, &activeR, &activeW, &goReads, &goWrites)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	writes := int(goWrites.Load())
	reads := int(goReads.Load())
	for i, j := range javas {
		w, r, v, err := j.WaitCycles(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if v != 0 {
			t.Errorf("Curator client %d: %d reads saw a write in progress", i, v)
		}
		writes += w
		reads += r
	}
	if t.Failed() {
		return
	}
	data, _, err := raw.Get(counter)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(data), strconv.Itoa(writes); got != want {
		t.Fatalf("counter = %s, want %d: writes were lost, Go and Curator did not exclude each other", got, writes)
	}
	var want int
	for c := 0; c < 4; c++ {
		for k := 0; k < rounds; k++ {
			if curatortest.Writes(k, c) {
				want++
			}
		}
	}
	if writes != want {
		t.Fatalf("%d writes, want %d", writes, want)
	}
	waitEmpty(t, raw, ns)
	t.Logf("2 Curator and 2 Go clients: %d writes (counter exact), %d reads, none saw a write in progress", writes, reads)
}

// cycles runs n rounds of client c: round k writes iff write(k, c). A write
// sets the counter to "writing", then to its next value; a read fails if it
// sees anything but a number. In-process counts check that no Go reader or
// writer is granted beside a Go writer.
func cycles(ctx context.Context, conn *zk.Conn, lk locker, counter string, c, n int, write func(k, c int) bool, activeR, activeW, reads, writes *atomic.Int32) error {
	for k := 0; k < n; k++ {
		if write(k, c) {
			wl, err := lk.Lock(ctx)
			if err != nil {
				return fmt.Errorf("client %d round %d: Lock: %w", c, k, err)
			}
			if w := activeW.Add(1); w != 1 || activeR.Load() != 0 {
				return fmt.Errorf("client %d: writer granted beside %d writers and %d readers", c, w-1, activeR.Load())
			}
			data, _, err := conn.Get(counter)
			if err != nil {
				return err
			}
			v, err := strconv.Atoi(string(data))
			if err != nil {
				return fmt.Errorf("client %d: a writer found the counter %q: another write in progress", c, data)
			}
			if _, err := conn.Set(counter, []byte("writing"), -1); err != nil {
				return err
			}
			if _, err := conn.Set(counter, []byte(strconv.Itoa(v+1)), -1); err != nil {
				return err
			}
			if err := wl.Err(); err != nil {
				return fmt.Errorf("client %d: write lease ended while held: %w", c, err)
			}
			writes.Add(1)
			activeW.Add(-1)
			if err := wl.Release(ctx); err != nil {
				return err
			}
			continue
		}
		l, err := lk.RLock(ctx)
		if err != nil {
			return fmt.Errorf("client %d round %d: RLock: %w", c, k, err)
		}
		activeR.Add(1)
		if w := activeW.Load(); w != 0 {
			return fmt.Errorf("client %d: reader granted beside %d writers", c, w)
		}
		data, _, err := conn.Get(counter)
		if err != nil {
			return err
		}
		if _, err := strconv.Atoi(string(data)); err != nil {
			return fmt.Errorf("client %d: a reader saw the counter %q: a write in progress", c, data)
		}
		if err := l.Err(); err != nil {
			return fmt.Errorf("client %d: read lease ended while held: %w", c, err)
		}
		reads.Add(1)
		activeR.Add(-1)
		if err := l.Release(ctx); err != nil {
			return err
		}
	}
	return nil
}

// TestCuratorRWLockQueue: Go and Curator queue in one order and agree on it.
// Curator writes; a Go reader and a Go writer queue; Curator releases and
// the Go reader (only) gets the lock; a Curator reader queues behind the Go
// writer and gets the lock only after it; a Go reader then shares the read
// lock with Curator while a Go writer cannot.
func TestCuratorRWLockQueue(t *testing.T) {
	ctx := interopContext(t)
	ns := zktest.NewNamespace(t)
	raw := ns.Conn(t)
	full := ns.Path(lockPath)
	java := curatortest.StartRWLock(t, ns.Servers(), full, "java")
	rs, _, rrd := connectReads(t, ns)
	r := newRWMutex(t, rs, rwlock.WithID("go-reader"))
	ws, _, wrd := connectReads(t, ns)
	w := newReentrant(t, ws, rwlock.WithID("go-writer"))

	jw, err := java.Acquire(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	if !jw.Write || !nodeName.MatchString(jw.Name) {
		t.Fatalf("Curator's write node %+v", jw)
	}
	var clock atomic.Int64
	ra := lockAsync(t, ctx, r, Read, &clock)
	waitWaiting(t, ctx, r, rrd, 2, func(p recipes.Participant) bool { return p.ID == "go-reader" })
	wa := lockAsync(t, ctx, w, Write, &clock)
	ps := waitWaiting(t, ctx, w, wrd, 3, func(p recipes.Participant) bool { return p.ID == "go-writer" })
	checkQueue(t, ctx, java, ps, []string{"java", "go-reader", "go-writer"}, []bool{true, false, false})
	if _, err := r.TryRLock(ctx); err == nil {
		t.Fatal("TryRLock succeeded while Curator writes")
	}

	released := time.Now()
	if err := java.Release(ctx, true); err != nil {
		t.Fatal(err)
	}
	gr := ra.held(t)
	if !gr.at.After(released) {
		t.Fatal("Go reader acquired before Curator released the write lock")
	}
	wa.pending(t, "Go writer behind the Go reader")

	// A Curator reader queues behind the Go writer.
	if err := java.BeginAcquire(false); err != nil {
		t.Fatal(err)
	}
	ps = waitParticipants(t, ctx, r, 3)
	checkQueue(t, ctx, java, ps, []string{"go-reader", "go-writer", "java"}, []bool{true, false, false})
	u := clock.Add(1)
	ra.unlock(t)
	gw := wa.held(t)
	if gw.n < u {
		t.Fatal("Go writer acquired before the Go reader unlocked")
	}
	unlocked := time.Now()
	wa.unlock(t)
	jr, err := java.WaitAcquired(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if jr.Write || !jr.At.After(unlocked) || jr.Name != ps[2].Node {
		t.Fatalf("Curator read %+v; want node %s after the Go writer's unlock at %s", jr, ps[2].Node, unlocked.Format("15:04:05.000000"))
	}
	// Curator reads: a Go reader shares, a Go writer cannot.
	gl, err := r.TryRLock(ctx)
	if err != nil {
		t.Fatalf("Go TryRLock beside a Curator reader: %v", err)
	}
	if _, err := w.TryLock(ctx); err == nil {
		t.Fatal("Go TryLock succeeded while Curator and Go read")
	}
	if err := gl.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := java.Release(ctx, false); err != nil {
		t.Fatal(err)
	}
	waitEmpty(t, raw, ns)
}

// TestCuratorWriterRespectsDowngrade: Curator 5.4 creates no downgrade node
// of its own, but honours ours: Go writes, a Curator writer queues, Go
// downgrades; when the Go write node goes, the Curator writer waits for the
// Go read node (which sorts before it) and gets the lock only after Go's
// read unlock.
func TestCuratorWriterRespectsDowngrade(t *testing.T) {
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			ctx := interopContext(t)
			ns := zktest.NewNamespace(t)
			raw := ns.Conn(t)
			full := ns.Path(lockPath)
			jp := ns.Proxy(t)
			jrd := recordReads(jp)
			java := curatortest.StartRWLock(t, jp.Servers(), full, "java")
			g := k.make(t, connect(t, ns), rwlock.WithID("go"))
			wl, err := g.Lock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if err := java.BeginAcquire(true); err != nil {
				t.Fatal(err)
			}
			ps := waitParticipants(t, ctx, g, 2)
			jrd.waitRead(t, wl.Node()) // Curator's writer waits for ours
			rl, err := wl.Downgrade(ctx)
			if err != nil {
				t.Fatal(err)
			}
			ps = waitParticipants(t, ctx, g, 2)
			if ps[0].Node != rl.Node() || seqOf(ps[0].Node) != seqOf(wl.Node()) || !ps[0].Holds || ps[1].ID != "java" || ps[1].Holds {
				t.Fatalf("after the downgrade: %+v", ps)
			}
			names, err := java.Participants(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Join(names, " ") != ps[0].Node+" "+ps[1].Node {
				t.Fatalf("Curator's queue %v, Go's %+v", names, ps)
			}
			// Curator's writer read the directory again when our write node
			// went, and decided to wait for our read node.
			jrd.waitRead(t, rl.Node())
			for _, l := range java.Lines() {
				if l.Word() == "ACQUIRED" {
					t.Fatalf("Curator acquired while Go holds the downgraded read lock: %v", l)
				}
			}
			unlocked := time.Now()
			if err := rl.Release(ctx); err != nil {
				t.Fatal(err)
			}
			jw, err := java.WaitAcquired(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if !jw.Write || !jw.At.After(unlocked) {
				t.Fatalf("Curator's write %+v; want after Go's read unlock at %s", jw, unlocked.Format("15:04:05.000000"))
			}
			if err := java.Release(ctx, true); err != nil {
				t.Fatal(err)
			}
			waitEmpty(t, raw, ns)
		})
	}
}

// waitParticipants waits until lk lists n participants.
func waitParticipants(t *testing.T, ctx context.Context, lk locker, n int) []recipes.Participant {
	t.Helper()
	var ps []recipes.Participant
	zktest.Eventually(t, wait, func() bool {
		var err error
		ps, err = lk.Participants(ctx)
		return err == nil && len(ps) == n
	}, "%d participants", n)
	return ps
}

// checkQueue checks Go's view of the queue (ids and holders, Curator's name
// format) and that Curator lists the same nodes in the same order.
func checkQueue(t *testing.T, ctx context.Context, java *curatortest.RWLock, ps []recipes.Participant, ids []string, holds []bool) {
	t.Helper()
	if len(ps) != len(ids) {
		t.Fatalf("queue %+v, want ids %v", ps, ids)
	}
	var goNames []string
	for i, p := range ps {
		if p.ID != ids[i] || p.Holds != holds[i] || !nodeName.MatchString(p.Node) {
			t.Fatalf("queue position %d: %+v, want id %q holds %v", i, p, ids[i], holds[i])
		}
		goNames = append(goNames, p.Node)
	}
	names, err := java.Participants(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(names, " ") != strings.Join(goNames, " ") {
		t.Fatalf("Curator's queue %v, Go's %v", names, goNames)
	}
}
