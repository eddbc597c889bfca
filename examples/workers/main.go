// Command workers shows group membership (package recipes/group), on the
// layout of Curator's GroupMember: a pool of workers, each with its own
// ZooKeeper session, find each other through a group and split a fixed set
// of jobs by the member list.
//
// Each worker joins the group -path with its id (worker-1, worker-2, ...)
// and an address as data, follows the group's views (Member.Changes), and
// owns the jobs whose number, modulo the number of members, is its rank
// among the sorted ids. Every worker computes the same split from the same
// view, so once the views agree every job has exactly one owner, with no
// coordinator. The demo checks that after each step:
//
//  1. three workers join; they agree on the split;
//  2. a fourth joins: the jobs are split four ways;
//  3. one leaves (Close deletes its node): the others take its jobs;
//  4. one is partitioned from ZooKeeper past its session timeout: the server
//     expires its session and the others take its jobs; meanwhile it still
//     sees its old view, which is why a worker must stop at Suspended (it
//     does here), and why membership alone never fences work (a lock or a
//     lease does); once healed it gets a new session, its node is created
//     again at once, and the jobs are split as before.
//
// Run it on an embedded ZooKeeper (started from the local install, stopped
// on exit, Ctrl-C included):
//
//	go run ./examples/workers
//
// or on your own ensemble:
//
//	go run ./examples/workers -zk 10.0.0.1:2181,10.0.0.2:2181,10.0.0.3:2181
//
// Flags: -jobs, -path, -session-timeout, -v, -timeout. It exits 0 when the
// workers agreed on a split that gives every job exactly one owner after
// every step.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/zkrecipes/zkrecipes/examples/internal/demo"
	"github.com/zkrecipes/zkrecipes/recipes/group"
	"github.com/zkrecipes/zkrecipes/session"
	"github.com/zkrecipes/zkrecipes/zktest"
)

var (
	nJobs          = flag.Int("jobs", 12, "jobs to split among the workers")
	groupPath      = flag.String("path", "/examples/workers/pool", "the group's path")
	sessionTimeout = flag.Duration("session-timeout", 2*time.Second, "session timeout of each worker's session")
)

func main() { demo.Main("workers", 2*time.Minute, run) }

// worker is one member of the pool, on its own session through its own
// fault proxy (so the demo can partition it alone).
type worker struct {
	id      string
	proxy   *zktest.Proxy
	sess    *session.Session
	m       *group.Member
	subDone <-chan struct{}

	mu     sync.Mutex
	view   []string // the sorted ids of the last view
	paused bool     // the connection is down: do no work
	left   bool
}

// pool is what the demo's script watches: every change of any worker's view
// or state wakes it.
type pool struct {
	out     *demo.Printer
	mu      sync.Mutex
	changed chan struct{}
}

func (p *pool) wake() {
	p.mu.Lock()
	close(p.changed)
	p.changed = make(chan struct{})
	p.mu.Unlock()
}

func (p *pool) ch() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.changed
}

// jobsOf returns the jobs that the member at rank owns when the view has n
// members.
func jobsOf(rank, n int) []int {
	var out []int
	for j := 0; j < *nJobs; j++ {
		if j%n == rank {
			out = append(out, j)
		}
	}
	return out
}

func jobNames(js []int) string {
	names := make([]string, len(js))
	for i, j := range js {
		names[i] = fmt.Sprintf("job-%02d", j)
	}
	return strings.Join(names, " ")
}

// owned returns the jobs w owns by its current view (none while paused).
func (w *worker) owned() []int {
	w.mu.Lock()
	defer w.mu.Unlock()
	rank := slices.Index(w.view, w.id)
	if rank < 0 || w.paused || w.left {
		return nil
	}
	return jobsOf(rank, len(w.view))
}

func run(ctx context.Context, env *demo.Env) error {
	if *nJobs < 1 || *sessionTimeout <= 0 {
		return errors.New("need -jobs >= 1 and a positive -session-timeout")
	}
	p := &pool{out: env.Out, changed: make(chan struct{})}
	out := env.Out
	var workers []*worker
	var wg sync.WaitGroup
	defer func() {
		for _, w := range workers {
			w.proxy.Heal()
			_ = w.m.Close()
			_ = w.sess.Close()
			<-w.subDone
			w.proxy.Close()
		}
		wg.Wait()
	}()
	join := func(i int) error {
		w, err := start(ctx, env, p, fmt.Sprintf("worker-%d", i), &wg)
		if err != nil {
			return err
		}
		workers = append(workers, w)
		return nil
	}

	out.Printf("--- 1. three workers join the group %s; %d jobs to split ---", *groupPath, *nJobs)
	for i := 1; i <= 3; i++ {
		if err := join(i); err != nil {
			return err
		}
	}
	if err := agree(ctx, p, workers, workers); err != nil {
		return err
	}

	out.Printf("--- 2. a fourth worker joins ---")
	if err := join(4); err != nil {
		return err
	}
	if err := agree(ctx, p, workers, workers); err != nil {
		return err
	}

	out.Printf("--- 3. worker-2 leaves the group (Close deletes its node) ---")
	leaving := workers[1]
	leaving.mu.Lock()
	leaving.left = true
	leaving.mu.Unlock()
	if err := leaving.m.Close(); err != nil {
		return err
	}
	live := []*worker{workers[0], workers[2], workers[3]}
	if err := agree(ctx, p, live, live); err != nil {
		return err
	}

	victim := workers[2]
	old := victim.sess.SessionID()
	out.Printf("--- 4. %s is partitioned from ZooKeeper past its session timeout (%v) ---", victim.id, *sessionTimeout)
	victim.proxy.Partition()
	others := []*worker{workers[0], workers[3]}
	// The others see it leave once the server has expired its session.
	if err := agree(ctx, p, others, others); err != nil {
		return err
	}
	out.Printf("%s still sees %v, but it paused at Suspended: it runs none of its jobs", victim.id, victim.viewNow())
	out.Printf("--- healing %s's connection ---", victim.id)
	victim.proxy.Heal()
	if err := agree(ctx, p, live, live); err != nil {
		return err
	}
	if id := victim.sess.SessionID(); id == old {
		out.Printf("%s kept its session %s (the server had not expired it)", victim.id, demo.Hex(id))
	} else {
		out.Printf("%s is back on a new session %s (was %s); its node was created again on it", victim.id, demo.Hex(id), demo.Hex(old))
	}
	out.Printf("every step ended with each of the %d jobs owned by exactly one worker", *nJobs)
	return nil
}

// start connects a worker, joins the group and follows its views.
func start(ctx context.Context, env *demo.Env, p *pool, id string, wg *sync.WaitGroup) (*worker, error) {
	px, err := zktest.NewProxy(env.Servers...)
	if err != nil {
		return nil, err
	}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	sess, err := session.Connect(cctx, px.Servers(), append([]session.Option{
		session.WithSessionTimeout(*sessionTimeout),
		session.WithLogger(env.Logger.Named(id)),
	}, env.Options...)...)
	if err != nil {
		px.Close()
		return nil, fmt.Errorf("%s: %w", id, err)
	}
	addr := "10.0.0." + strings.TrimPrefix(id, "worker-") + ":8080"
	m, err := group.NewMember(sess, *groupPath, id, []byte(addr))
	if err == nil {
		err = m.Start()
	}
	if err != nil {
		_ = sess.Close()
		px.Close()
		return nil, fmt.Errorf("%s: %w", id, err)
	}
	w := &worker{id: id, proxy: px, sess: sess, m: m}
	w.subDone = demo.FollowSession(env.Out, id, sess, func(ev session.Event) {
		w.mu.Lock()
		w.paused = ev.State == session.Suspended || ev.State == session.Lost
		w.mu.Unlock()
		p.wake()
	})
	env.Out.Printf("%s joins with data %s (session %s)", id, addr, demo.Hex(sess.SessionID()))
	views := m.Changes(ctx)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for view := range views {
			ids := make([]string, 0, len(view))
			for k := range view {
				ids = append(ids, k)
			}
			sort.Strings(ids)
			w.mu.Lock()
			w.view = ids
			w.mu.Unlock()
			p.wake()
		}
	}()
	return w, nil
}

func (w *worker) viewNow() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.view)
}

// agree waits until every worker in ws sees exactly the ids of members,
// runs (is not paused), and their jobs are each owned once; it prints the
// split.
func agree(ctx context.Context, p *pool, ws, members []*worker) error {
	want := make([]string, len(members))
	for i, w := range members {
		want[i] = w.id
	}
	sort.Strings(want)
	for {
		ch := p.ch()
		ok := true
		for _, w := range ws {
			w.mu.Lock()
			same := slices.Equal(w.view, want) && !w.paused
			w.mu.Unlock()
			ok = ok && same
		}
		if ok {
			break
		}
		select {
		case <-ch:
		case <-ctx.Done():
			var got []string
			for _, w := range ws {
				got = append(got, fmt.Sprintf("%s sees %v", w.id, w.viewNow()))
			}
			return fmt.Errorf("the workers did not agree on %v: %s: %w", want, strings.Join(got, "; "), context.Cause(ctx))
		}
	}
	owners := make([]int, *nJobs)
	for _, w := range ws {
		js := w.owned()
		p.out.Printf("  %s owns %s", w.id, jobNames(js))
		for _, j := range js {
			owners[j]++
		}
	}
	for j, n := range owners {
		if n != 1 {
			return fmt.Errorf("job-%02d has %d owners, want exactly one", j, n)
		}
	}
	p.out.Printf("  %d workers agree: every job has exactly one owner", len(ws))
	return nil
}
