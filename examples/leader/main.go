// Command leader is the zkrecipes demo: leader election for background workers.
//
// Several workers, each with its own ZooKeeper session, campaign for one
// election path with leader.Run. The leader does periodic work under its term's
// context and prints a tick with its fencing token; the others stand by. Then
// the demo
//
//  1. stops the leader, as a process does at shutdown (cancels its Run), and
//     prints who took over and how long it took, from the stop to the start of
//     the new term;
//  2. cuts the new leader off from ZooKeeper through its own fault proxy
//     (zktest.Proxy; -fault partition, or cut: its connection closed and new
//     ones refused until step 3): the leader steps down when its connection
//     is still down at the lease deadline, before its session can expire, and
//     prints why (its term's cause); another worker takes over once the old
//     leader's node is gone;
//  3. heals the connection and shows the old leader back in the election as a
//     follower, then shuts everything down and prints every term of
//     leadership, checking that no two overlapped.
//
// Run it on an embedded ZooKeeper (started from the local install and stopped
// on exit, Ctrl-C included):
//
//	go run ./examples/leader
//	make demo
//
// or on your own ensemble:
//
//	go run ./examples/leader -zk 10.0.0.1:2181,10.0.0.2:2181,10.0.0.3:2181
//
// (with -zk it first opens one session to those addresses and exits with the
// addresses and the dial error if none comes within -connect-timeout, 5 s by
// default), over TLS when the ensemble serves it on a secure client port:
//
//	go run ./examples/leader -zk zk1:2281,zk2:2281,zk3:2281 \
//		-tls-ca ca.pem -tls-cert client.pem -tls-key client-key.pem
//
// (-tls-ca: the CA that signed the servers' certificates; -tls-cert and
// -tls-key: the client certificate ZooKeeper requires by default;
// -tls-server-name: the name the servers' certificates carry, by default any
// of the -zk hosts).
//
// Flags: -workers (default 3), -tick (the leader's work period), -ticks
// (ticks before each step), -session-timeout, -fault partition|cut, -path,
// -v (library log on stderr), -timeout. It exits 0 when every step happened
// as described, non-zero with a message otherwise.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/examples/internal/demo"
	"github.com/zkrecipes/zkrecipes/leader"
	"github.com/zkrecipes/zkrecipes/recipes"
	"github.com/zkrecipes/zkrecipes/session"
	"github.com/zkrecipes/zkrecipes/zktest"
)

var (
	nWorkers       = flag.Int("workers", 3, "number of workers (at least 3: one is stopped, one cut off, one takes over)")
	tickEvery      = flag.Duration("tick", 250*time.Millisecond, "how often the leader does its periodic work")
	ticksPerStep   = flag.Int("ticks", 3, "ticks the leader does before each step of the demo")
	sessionTimeout = flag.Duration("session-timeout", 2*time.Second, "ZooKeeper session timeout of each worker")
	faultKind      = flag.String("fault", "partition", "how to cut the leader off: partition (silence until healed; its session expires) or cut (close its connection; it reconnects to the same session)")
	electionPath   = flag.String("path", "/zkrecipes-demo/leader", "election path")
)

func main() { demo.MainTLS("leader", 2*time.Minute, run) }

// errStopped is the cause given to a worker's Run context when the demo stops it.
var errStopped = errors.New("worker stopped by the demo")

type kind int

const (
	termStarted kind = iota
	ticked
	termEnded
	sessionState
	runReturned
)

// event is something a worker did, as the demo's script waits for it.
type event struct {
	kind  kind
	w     *worker
	term  *leader.Term
	tick  int
	state session.Event
	err   error
	at    time.Time
}

// worker is one replica of a background service: a session (through its own
// fault proxy) and a leader.Run loop.
type worker struct {
	name     string
	proxy    *zktest.Proxy
	sess     *session.Session
	stop     context.CancelCauseFunc
	stopping atomic.Bool
	done     chan struct{}   // closed when Run has returned
	subDone  <-chan struct{} // closed when the session watcher has exited
	runErr   error
}

type demoRun struct {
	env     *demo.Env
	out     *demo.Printer
	j       *demo.Journal[event]
	workers []*worker
}

func run(ctx context.Context, env *demo.Env) error {
	if *nWorkers < 3 {
		return fmt.Errorf("-workers %d: need at least 3 (one is stopped, one cut off, one takes over)", *nWorkers)
	}
	if *ticksPerStep < 1 || *tickEvery <= 0 {
		return errors.New("-ticks and -tick must be positive")
	}
	if *faultKind != "partition" && *faultKind != "cut" {
		return fmt.Errorf("-fault %q: want partition or cut", *faultKind)
	}
	d := &demoRun{env: env, out: env.Out, j: demo.NewJournal[event]()}
	d.j.Fail = func(e event) error {
		if e.kind == runReturned && !e.w.stopping.Load() {
			return fmt.Errorf("%s: leader.Run returned unexpectedly: %v", e.w.name, e.err)
		}
		return nil
	}
	defer d.shutdownAll()
	return d.script(ctx)
}

func (d *demoRun) script(ctx context.Context) error {
	out := d.out
	for i := 1; i <= *nWorkers; i++ {
		w, err := d.connect(ctx, fmt.Sprintf("worker-%d", i))
		if err != nil {
			return err
		}
		out.Printf("%s connected: session %s, through its own fault proxy %s", w.name, demo.Hex(w.sess.SessionID()), w.proxy.Addr())
	}
	out.Printf("%d workers campaign for %s with leader.Run (session timeout %v)", len(d.workers), *electionPath, d.workers[0].sess.SessionTimeout())
	for _, w := range d.workers {
		d.campaign(ctx, w)
	}

	cur := 0
	ev, cur, err := d.j.WaitFor(ctx, cur, "a first leader", isStart(nil))
	if err != nil {
		return err
	}
	first := ev.w
	ps, err := waitElection(ctx, first.sess, "every worker in the election", func(ps []recipes.Participant) bool {
		return len(ps) == len(d.workers)
	})
	if err != nil {
		return err
	}
	out.Printf("participants, in election order: %s", formatParticipants(ps))
	if _, cur, err = d.j.WaitFor(ctx, cur, first.name+"'s ticks", isTick(first, *ticksPerStep)); err != nil {
		return err
	}

	// Step 1: the leader shuts down.
	out.Printf("--- step 1: stopping the leader, %s, as a process does at shutdown (cancel its Run) ---", first.name)
	t0 := time.Now()
	first.stopping.Store(true)
	first.stop(errStopped)
	mark := cur
	endEv, c1, err := d.j.WaitFor(ctx, mark, first.name+"'s term to end", isEnd(first))
	if err != nil {
		return err
	}
	startEv, c2, err := d.j.WaitFor(ctx, mark, "a new leader after "+first.name, isStart(first))
	if err != nil {
		return err
	}
	cur = max(c1, c2)
	second := startEv.w
	took := startEv.term.Started().Sub(t0)
	out.Printf("%s took over %s after %s was stopped (its term had ended %s after the stop)",
		second.name, demo.Ms(took), first.name, demo.Ms(endEv.at.Sub(t0)))
	if err := d.retire(ctx, first); err != nil {
		return err
	}
	if _, cur, err = d.j.WaitFor(ctx, cur, second.name+"'s ticks", isTick(second, *ticksPerStep)); err != nil {
		return err
	}

	// Step 2: the leader is cut off from ZooKeeper.
	if *faultKind == "partition" {
		out.Printf("--- step 2: partitioning the leader, %s, from ZooKeeper: its proxy now forwards nothing ---", second.name)
	} else {
		out.Printf("--- step 2: cutting the leader's connection: %s's proxy closes it ---", second.name)
	}
	if *faultKind == "partition" {
		out.Printf("    (session timeout %v: the client suspends after about 2/3 of it without a word from the server;", second.sess.SessionTimeout())
		out.Printf("     the server expires the session, and deletes its node, only after the full timeout)")
	} else {
		out.Printf("    (the client suspends at once; the term ends at its deadline, 2/3 of the timeout after the last answer, unless it is back by then)")
	}
	t1 := time.Now()
	mark = cur
	if *faultKind == "partition" {
		second.proxy.Partition()
	} else {
		second.proxy.Refuse(true)
		second.proxy.Cut()
	}
	endEv, c1, err = d.j.WaitFor(ctx, mark, second.name+" to step down", isEnd(second))
	if err != nil {
		return err
	}
	out.Printf("%s stepped down %s after the fault; its term's cause: %v", second.name, demo.Ms(endEv.at.Sub(t1)), endEv.err)
	startEv, c2, err = d.j.WaitFor(ctx, mark, "a new leader after "+second.name, isStart(second))
	if err != nil {
		return err
	}
	cur = max(c1, c2)
	third := startEv.w
	gap := startEv.term.Started().Sub(endEv.at)
	out.Printf("%s took over %s after the fault, %s after %s had stepped down",
		third.name, demo.Ms(startEv.term.Started().Sub(t1)), demo.Ms(gap), second.name)
	if gap < 0 {
		return fmt.Errorf("%s led before %s stepped down: two leaders at once", third.name, second.name)
	}

	// Step 3: the cut-off worker comes back as a follower.
	if *faultKind == "partition" {
		out.Printf("--- step 3: healing %s's connection ---", second.name)
		second.proxy.Heal()
	} else {
		out.Printf("--- step 3: %s's proxy lets it in again; it reconnects by itself ---", second.name)
		second.proxy.Refuse(false)
	}
	back, _, err := d.j.WaitFor(ctx, mark, second.name+" to reconnect", func(e event) bool {
		return e.kind == sessionState && e.w == second && e.state.State == session.Reconnected
	})
	if err != nil {
		return err
	}
	ps, err = waitElection(ctx, third.sess, second.name+" back in the election as a follower", func(ps []recipes.Participant) bool {
		return len(ps) > 1 && ps[0].ID == third.name && indexOfID(ps, second.name) > 0
	})
	if err != nil {
		return err
	}
	out.Printf("%s is back (session %s) and follows; participants: %s", second.name, demo.Hex(back.state.SessionID), formatParticipants(ps))
	cur = d.j.Len()
	for i := 0; i < 2; i++ {
		if _, cur, err = d.j.WaitFor(ctx, cur, third.name+"'s ticks", isTick(third, 1)); err != nil {
			return err
		}
	}

	out.Printf("--- shutting down ---")
	if err := d.shutdown(ctx); err != nil {
		return err
	}
	return d.summary()
}

// connect gives a worker its proxy and session.
func (d *demoRun) connect(ctx context.Context, name string) (*worker, error) {
	p, err := zktest.NewProxy(d.env.Servers...)
	if err != nil {
		return nil, err
	}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	opts := append([]session.Option{
		session.WithSessionTimeout(*sessionTimeout),
		session.WithLogger(d.env.Logger.Named(name)),
	}, d.env.Options...) // TLS with the -tls-* flags
	sess, err := session.Connect(cctx, p.Servers(), opts...)
	if err != nil {
		p.Close()
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	w := &worker{name: name, proxy: p, sess: sess, done: make(chan struct{})}
	d.workers = append(d.workers, w)

	w.subDone = demo.FollowSession(d.out, name, sess, func(ev session.Event) {
		d.j.Add(event{kind: sessionState, w: w, state: ev, at: ev.At})
	})
	return w, nil
}

// campaign starts the worker's leader.Run; w.stop ends it.
func (d *demoRun) campaign(ctx context.Context, w *worker) {
	rctx, stop := context.WithCancelCause(context.WithoutCancel(ctx))
	w.stop = stop
	go func() {
		defer close(w.done)
		w.runErr = leader.Run(rctx, w.sess, *electionPath, d.work(w), leader.WithID(w.name))
		d.j.Add(event{kind: runReturned, w: w, err: w.runErr, at: time.Now()})
	}()
}

// work is what the leader does: periodic work until its term ends. It is the
// function a user hands to leader.Run.
func (d *demoRun) work(w *worker) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		term, _ := leader.TermFromContext(ctx)
		d.out.Printf("%s leads: new term, fencing token %s", w.name, demo.Hex(term.Token()))
		d.j.Add(event{kind: termStarted, w: w, term: term, at: term.Started()})
		t := time.NewTicker(*tickEvery)
		defer t.Stop()
		for n := 1; ; n++ {
			select {
			case <-ctx.Done():
				at := time.Now()
				cause := context.Cause(ctx)
				d.out.Printf("%s stopped leading: %v", w.name, cause)
				d.j.Add(event{kind: termEnded, w: w, term: term, err: cause, at: at})
				return nil
			case <-t.C:
				d.out.Printf("%s leading: tick %d, fencing token %s", w.name, n, demo.Hex(term.Token()))
				d.j.Add(event{kind: ticked, w: w, term: term, tick: n, at: time.Now()})
			}
		}
	}
}

// retire waits for a stopped worker's Run, then closes its session and proxy.
func (d *demoRun) retire(ctx context.Context, w *worker) error {
	if _, err := demo.Wait(ctx, w.done, w.name+"'s leader.Run to return"); err != nil {
		return err
	}
	if !errors.Is(w.runErr, context.Canceled) {
		return fmt.Errorf("%s: leader.Run returned %v, want the context's error", w.name, w.runErr)
	}
	w.proxy.Heal()
	if err := w.sess.Close(); err != nil {
		return fmt.Errorf("%s: closing the session: %w", w.name, err)
	}
	<-w.subDone
	w.proxy.Close()
	d.out.Printf("%s has left: leader.Run returned (%v), session closed", w.name, w.runErr)
	return nil
}

// shutdown stops every worker still running and checks how each Run ended.
func (d *demoRun) shutdown(ctx context.Context) error {
	var live []*worker
	for _, w := range d.workers {
		if !w.stopping.Load() {
			live = append(live, w)
			w.stopping.Store(true)
			w.stop(errStopped)
		}
	}
	for _, w := range live {
		if err := d.retire(ctx, w); err != nil {
			return err
		}
	}
	return nil
}

// shutdownAll is the safety net on every exit path: nothing is left running.
func (d *demoRun) shutdownAll() {
	for _, w := range d.workers {
		w.stopping.Store(true)
		if w.stop != nil {
			w.stop(errStopped)
		}
		w.proxy.Heal()
	}
	for _, w := range d.workers {
		if w.stop != nil {
			<-w.done
		}
		_ = w.sess.Close()
		<-w.subDone
		w.proxy.Close()
	}
}

// summary prints every term and fails if two overlapped.
func (d *demoRun) summary() error {
	type term struct {
		w          *worker
		token      int64
		start, end time.Time
		cause      error
	}
	var terms []term
	for _, e := range d.j.All() {
		if e.kind == termEnded {
			terms = append(terms, term{w: e.w, token: e.term.Token(), start: e.term.Started(), end: e.at, cause: e.err})
		}
	}
	sort.Slice(terms, func(i, k int) bool { return terms[i].start.Before(terms[k].start) })
	d.out.Printf("terms of leadership (ms since start):")
	for _, t := range terms {
		d.out.Plain("             %-9s  %5d – %5d  token %-12s  ended: %v", t.w.name, d.out.Since(t.start), d.out.Since(t.end), demo.Hex(t.token), t.cause)
	}
	for i := 1; i < len(terms); i++ {
		if terms[i].start.Before(terms[i-1].end) {
			return fmt.Errorf("%s's term began before %s's ended: two leaders at once", terms[i].w.name, terms[i-1].w.name)
		}
		if terms[i].token <= terms[i-1].token {
			return fmt.Errorf("fencing token of %s's term (%s) is not above the previous one (%s)", terms[i].w.name, demo.Hex(terms[i].token), demo.Hex(terms[i-1].token))
		}
	}
	d.out.Printf("done: %d terms, never two leaders at once, fencing tokens increasing", len(terms))
	return nil
}

func isStart(not *worker) func(event) bool {
	return func(e event) bool { return e.kind == termStarted && e.w != not }
}

func isEnd(w *worker) func(event) bool {
	return func(e event) bool { return e.kind == termEnded && e.w == w }
}

func isTick(w *worker, n int) func(event) bool {
	return func(e event) bool { return e.kind == ticked && e.w == w && e.tick >= n }
}

// waitElection re-reads the election's participants at every change of its
// children until cond holds.
func waitElection(ctx context.Context, sess *session.Session, what string, cond func([]recipes.Participant) bool) ([]recipes.Participant, error) {
	full, err := sess.Path(*electionPath)
	if err != nil {
		return nil, err
	}
	for {
		var changed <-chan zk.Event
		_, _, ch, err := sess.Conn().ChildrenW(full)
		switch {
		case err == nil:
			changed = ch
		case errors.Is(err, zk.ErrNoNode):
			_, _, ch, err = sess.Conn().ExistsW(full)
			if err != nil {
				return nil, fmt.Errorf("waiting for %s: %w", what, err)
			}
			changed = ch
		default:
			return nil, fmt.Errorf("waiting for %s: %w", what, err)
		}
		ps, err := leader.Participants(ctx, sess, *electionPath)
		if err != nil {
			return nil, fmt.Errorf("waiting for %s: %w", what, err)
		}
		if cond(ps) {
			return ps, nil
		}
		if _, err := demo.Wait(ctx, changed, what); err != nil {
			return nil, err
		}
	}
}

func indexOfID(ps []recipes.Participant, id string) int {
	for i, p := range ps {
		if p.ID == id {
			return i
		}
	}
	return -1
}

func formatParticipants(ps []recipes.Participant) string {
	names := make([]string, len(ps))
	for i, p := range ps {
		names[i] = p.ID
		if p.Holds {
			names[i] += " (leader)"
		}
	}
	return strings.Join(names, ", ")
}
