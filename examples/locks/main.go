// Command locks shows the fair distributed mutex (package mutex) and what a lost
// lock looks like to its holder.
//
// Several workers, each with its own ZooKeeper session, take turns on one lock.
// Each prints when it acquires the lock (with its fencing token, lease.Token(),
// how long it waited and the queue behind it), does a job of a few steps under
// lease.Context(), writing to a store that refuses writes with a fencing token
// older than the newest it has seen, and releases the lock.
//
// Then the demo cuts the connection of the worker that holds the lock, through
// that worker's own fault proxy (zktest.Proxy), which then refuses it for a
// while. Under the session's standard loss policy the lease ends at its
// deadline (two thirds of the session timeout after the last answered
// request; a reconnection before that would have kept it): lease.Done()
// fires with cause session.ErrSuspended and the job running under
// lease.Context() stops, before any other worker can get the lock. The next holder acquires once the cut
// worker's node is gone, and a late write with the old token is refused by the
// store. The cut worker reconnects and queues again.
//
// Run it on an embedded ZooKeeper (started from the local install and stopped
// on exit, Ctrl-C included):
//
//	go run ./examples/locks
//
// or on your own ensemble:
//
//	go run ./examples/locks -zk 10.0.0.1:2181,10.0.0.2:2181,10.0.0.3:2181
//
// (with -zk it first opens one session to those addresses and exits with the
// addresses and the dial error if none comes within -connect-timeout, 5 s by
// default).
//
// Flags: -workers (default 3), -rounds (jobs each worker completes), -steps and
// -step (size of a job), -session-timeout, -path, -v (library log on stderr),
// -timeout. It exits 0 when the lock behaved as described (never two holders,
// the cut holder told before the next one acquired), non-zero otherwise.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/zkrecipes/zkrecipes/examples/internal/demo"
	"github.com/zkrecipes/zkrecipes/mutex"
	"github.com/zkrecipes/zkrecipes/session"
	"github.com/zkrecipes/zkrecipes/zktest"
)

var (
	nWorkers       = flag.Int("workers", 3, "number of workers (at least 2)")
	rounds         = flag.Int("rounds", 2, "jobs each worker completes under the lock")
	steps          = flag.Int("steps", 2, "steps of a job; each step writes to the store")
	stepEvery      = flag.Duration("step", 150*time.Millisecond, "duration of a step")
	sessionTimeout = flag.Duration("session-timeout", 2*time.Second, "ZooKeeper session timeout of each worker")
	lockPath       = flag.String("path", "/zkrecipes-demo/locks/report", "lock path")
)

func main() { demo.Main("locks", 2*time.Minute, run) }

type kind int

const (
	acquired kind = iota
	stepped
	lost
	finished
)

type event struct {
	kind  kind
	w     *worker
	lease *mutex.Lease
	hold  int // acquisition number (acquired), step number (stepped)
	err   error
	at    time.Time
}

type worker struct {
	name    string
	proxy   *zktest.Proxy
	sess    *session.Session
	m       *mutex.Reentrant
	subDone <-chan struct{}
}

// store is the resource the lock guards. Like any resource that takes fencing
// tokens, it refuses a write whose token is older than the newest it has seen:
// that stops a holder that lost the lock without noticing (a long GC pause,
// say) from overwriting its successor's work.
type store struct {
	mu       sync.Mutex
	newest   int64
	accepted int
	refused  int
}

func (s *store) write(token int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if token < s.newest {
		s.refused++
		return fmt.Errorf("token %s is older than %s, which the store has already seen", demo.Hex(token), demo.Hex(s.newest))
	}
	s.newest = token
	s.accepted++
	return nil
}

type demoRun struct {
	out   *demo.Printer
	j     *demo.Journal[event]
	store store

	mu         sync.Mutex
	holder     *mutex.Lease // the last lease granted
	holderName string       // the worker it was granted to (its participant id)
	holds      int
	losses     int
	errs       []error // exclusion violations
}

func run(ctx context.Context, env *demo.Env) error {
	if *nWorkers < 2 || *rounds < 1 || *steps < 1 || *stepEvery <= 0 {
		return errors.New("need -workers >= 2 and positive -rounds, -steps and -step")
	}
	d := &demoRun{out: env.Out, j: demo.NewJournal[event]()}
	d.j.Fail = func(e event) error {
		if e.kind == finished && e.err != nil {
			return e.err
		}
		return nil
	}
	out := d.out

	var workers []*worker
	defer func() {
		for _, w := range workers {
			w.proxy.Heal()
			_ = w.m.Close()
			_ = w.sess.Close()
			<-w.subDone
			w.proxy.Close()
		}
	}()
	for i := 1; i <= *nWorkers; i++ {
		w, err := connect(ctx, env, fmt.Sprintf("worker-%d", i))
		if err != nil {
			return err
		}
		workers = append(workers, w)
		out.Printf("%s connected: session %s, through its own fault proxy %s", w.name, demo.Hex(w.sess.SessionID()), w.proxy.Addr())
	}
	out.Printf("%d workers take the lock %s, %d jobs each; every job step writes to a store", len(workers), *lockPath, *rounds)
	out.Printf("that refuses fencing tokens older than the newest it has seen")

	wctx, stopWorkers := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer stopWorkers()
	for _, w := range workers {
		w := w
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := d.loop(wctx, w)
			d.j.Add(event{kind: finished, w: w, err: err, at: time.Now()})
		}()
	}

	// The first holder of the second round is the victim, once its job has begun.
	victimHold := len(workers) + 1
	ev, cur, err := d.j.WaitFor(ctx, 0, fmt.Sprintf("hold #%d", victimHold), func(e event) bool {
		return e.kind == acquired && e.hold == victimHold
	})
	if err != nil {
		return err
	}
	victim, victimLease := ev.w, ev.lease
	if _, cur, err = d.j.WaitFor(ctx, cur, victim.name+"'s first step", func(e event) bool {
		return e.kind == stepped && e.w == victim && e.lease == victimLease
	}); err != nil {
		return err
	}
	out.Printf("--- cutting the connection of %s, which holds the lock (its proxy closes it, and refuses it for a while) ---", victim.name)
	tCut := time.Now()
	mark := cur
	victim.proxy.Refuse(true)
	victim.proxy.Cut()
	lostEv, c1, err := d.j.WaitFor(ctx, mark, victim.name+" to be told it lost the lock", func(e event) bool {
		return e.kind == lost && e.w == victim
	})
	if err != nil {
		return err
	}
	out.Printf("%s was told %s after the cut; its node still blocks the queue until it reconnects and deletes it", victim.name, demo.Ms(lostEv.at.Sub(tCut)))
	victim.proxy.Refuse(false)
	out.Printf("    (or, if it never reconnects, until the server expires its session)")
	next, c2, err := d.j.WaitFor(ctx, mark, "the next holder", func(e event) bool {
		return e.kind == acquired && e.hold > victimHold
	})
	if err != nil {
		return err
	}
	if !next.at.After(lostEv.at) {
		return fmt.Errorf("%s got the lock before %s was told it had lost it", next.w.name, victim.name)
	}
	out.Printf("%s got the lock %s after the cut, %s after %s's lease had ended: never two holders",
		next.w.name, demo.Ms(next.at.Sub(tCut)), demo.Ms(next.at.Sub(lostEv.at)), victim.name)
	cur = max(c1, c2)
	if _, _, err = d.j.WaitFor(ctx, cur, next.w.name+"'s first write", func(e event) bool {
		return e.kind == stepped && e.lease == next.lease
	}); err != nil {
		return err
	}
	if err := d.store.write(victimLease.Token()); err == nil {
		return fmt.Errorf("the store accepted a late write with %s's old token %s", victim.name, demo.Hex(victimLease.Token()))
	} else {
		out.Printf("had %s kept writing with its old token %s, the store would refuse it: %v", victim.name, demo.Hex(victimLease.Token()), err)
	}

	// Let every worker finish its jobs.
	cur = 0
	for range workers {
		if _, cur, err = d.j.WaitFor(ctx, cur, "every worker to finish", func(e event) bool { return e.kind == finished }); err != nil {
			return err
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.errs) > 0 {
		return errors.Join(d.errs...)
	}
	out.Printf("done: %d holds (%d lost), never two holders at once; the store accepted %d writes and refused %d (the stale-token probe above)",
		d.holds, d.losses, d.store.accepted, d.store.refused)
	return nil
}

func connect(ctx context.Context, env *demo.Env, name string) (*worker, error) {
	p, err := zktest.NewProxy(env.Servers...)
	if err != nil {
		return nil, err
	}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	sess, err := session.Connect(cctx, p.Servers(),
		session.WithSessionTimeout(*sessionTimeout),
		session.WithLogger(env.Logger.Named(name)))
	if err != nil {
		p.Close()
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	m, err := mutex.NewReentrant(sess, *lockPath, mutex.WithID(name))
	if err != nil {
		_ = sess.Close()
		p.Close()
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	w := &worker{name: name, proxy: p, sess: sess, m: m}
	w.subDone = demo.FollowSession(env.Out, name, sess, nil)
	return w, nil
}

// loop is one worker: take the lock, do a job under it, release it, until
// -rounds jobs are complete. A lost lock does not count.
func (d *demoRun) loop(ctx context.Context, w *worker) error {
	for done := 0; done < *rounds; {
		t0 := time.Now()
		lease, err := w.m.Lock(ctx)
		if err != nil {
			return fmt.Errorf("%s: Lock: %w", w.name, err)
		}
		d.granted(ctx, w, lease, time.Since(t0))
		ok := d.job(w, lease)
		if err := lease.Release(context.WithoutCancel(ctx)); err != nil {
			return fmt.Errorf("%s: Release: %w", w.name, err)
		}
		if ok {
			d.out.Printf("%s released the lock", w.name)
			done++
		} else {
			d.out.Printf("%s calls Release on the lost lease: nil (the library deletes the node once the connection is back); it queues again", w.name)
		}
	}
	return nil
}

// granted checks exclusion and reports a new hold.
func (d *demoRun) granted(ctx context.Context, w *worker, lease *mutex.Lease, waited time.Duration) {
	d.mu.Lock()
	if prev := d.holder; prev != nil && prev.Err() == nil {
		d.errs = append(d.errs, fmt.Errorf("%s acquired while the previous lease (%s) was still live: two holders", w.name, d.holderName))
	}
	d.holder, d.holderName = lease, w.name
	d.holds++
	n := d.holds
	d.mu.Unlock()
	queue := ""
	if ps, err := w.m.Participants(ctx); err == nil {
		ids := make([]string, len(ps))
		for i, p := range ps {
			ids[i] = p.ID
		}
		queue = "; queue: " + strings.Join(ids, ", ")
	}
	d.out.Printf("%s acquired the lock: fencing token %s, waited %s%s", w.name, demo.Hex(lease.Token()), demo.Ms(waited), queue)
	d.j.Add(event{kind: acquired, w: w, lease: lease, hold: n, at: time.Now()})
}

// job does the guarded work under lease.Context(); it reports whether it
// completed.
func (d *demoRun) job(w *worker, lease *mutex.Lease) bool {
	ctx := lease.Context()
	t := time.NewTimer(*stepEvery)
	defer t.Stop()
	for s := 1; s <= *steps; s++ {
		select {
		case <-ctx.Done():
			at := time.Now()
			d.mu.Lock()
			d.losses++
			d.mu.Unlock()
			d.out.Printf("%s LOST the lock: lease.Done() fired; lease.Err(): %v", w.name, lease.Err())
			d.out.Printf("%s's job, running under lease.Context(), stopped before step %d/%d", w.name, s, *steps)
			d.j.Add(event{kind: lost, w: w, lease: lease, err: lease.Err(), at: at})
			return false
		case <-t.C:
			t.Reset(*stepEvery)
		}
		if err := d.store.write(lease.Token()); err != nil {
			d.mu.Lock()
			d.errs = append(d.errs, fmt.Errorf("%s's write refused while holding the lock: %w", w.name, err))
			d.mu.Unlock()
			return false
		}
		d.out.Printf("%s step %d/%d: wrote to the store with token %s", w.name, s, *steps, demo.Hex(lease.Token()))
		d.j.Add(event{kind: stepped, w: w, lease: lease, hold: s, at: time.Now()})
	}
	return true
}
