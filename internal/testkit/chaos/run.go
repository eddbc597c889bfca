package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand"
	"os"
	"runtime"
	"sort"
	"sync"
	"time"

	"github.com/zkrecipes/zkrecipes/internal/testkit/sessiontest"
	"github.com/zkrecipes/zkrecipes/session"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// run is one chaos run in progress.
type run struct {
	cfg     Config
	rec     *recorder
	ens     *zktest.Ensemble
	obs     *observer
	mem     *members
	book    *book
	clients []*client
	proxies []*zktest.Proxy // every proxy made, closed at the end
}

func (r *run) logf(format string, args ...any) {
	if r.cfg.Logf != nil {
		r.cfg.Logf(format, args...)
	}
}

// Run starts a 3-member ensemble, runs cfg.Rounds rounds of faults against
// sessions using every recipe at once, stops everything, checks the
// invariants and returns the report. ctx ends the rounds early (the checks
// still run). An error means the run could not be set up or the ensemble
// could not be brought back after a fault; the report then holds what was
// recorded so far.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	began := time.Now()
	r := &run{cfg: cfg, rec: newRecorder()}
	r.ens, err = zktest.StartEnsemble(3)
	if err != nil {
		return nil, fmt.Errorf("chaos: %w", err)
	}
	defer r.ens.Stop()
	r.book = newBook(r.ens.Servers())
	// The baseline is taken before the observers connect: their
	// go-zookeeper goroutines start a little after their session exists,
	// and they are closed before the goroutines are counted again.
	baseline := runtime.NumGoroutine()
	octx, cancel := context.WithTimeout(ctx, 30*time.Second)
	r.obs, err = dialObserver(octx, r.ens.Servers(), r.book.dial)
	cancel()
	if err != nil {
		return nil, err
	}
	defer r.obs.close()
	for _, p := range []string{cfg.Root, cfg.Root + "-guard"} {
		if err := r.obs.ensure(p, nil); err != nil {
			return nil, err
		}
	}
	for _, rc := range Recipes() {
		if guarded(rc) {
			if err := r.obs.ensure(cfg.Root+"-guard/"+rc, []byte("0")); err != nil {
				return nil, err
			}
		}
		if commits(rc) {
			if err := r.obs.ensure(cfg.Root+"-guard/"+rc+commitSuffix, []byte("0")); err != nil {
				return nil, err
			}
		}
	}
	mctx, mcancel := context.WithTimeout(ctx, 30*time.Second)
	r.mem, err = dialMembers(mctx, r.ens.Servers(), r.book.dial)
	mcancel()
	if err != nil {
		return nil, err
	}
	defer r.mem.close()

	var runErr error
	report := r.drive(ctx, &runErr)
	report.Wall = time.Since(began)

	// Nothing left behind: no node under any recipe path, no goroutine.
	var paths []string
	for _, rc := range Recipes() {
		paths = append(paths, cfg.Root+"/"+rc)
	}
	paths = append(paths, servicePath(cfg.Root))
	var left []string
	var lerr error
	deadline := time.Now().Add(20 * time.Second)
	for {
		left, lerr = r.obs.leftovers(paths)
		if (lerr == nil && len(left) == 0) || time.Now().After(deadline) {
			break
		}
		wait(context.Background(), 100*time.Millisecond)
	}
	if lerr != nil {
		report.addViolation("nodes left behind", "", 0, fmt.Sprintf("cannot list the recipe paths: %v", lerr))
	}
	for _, n := range left {
		report.addViolation("nodes left behind", "", 0, n+" still exists 20s after every session closed")
	}
	report.LeftNodes = len(left)
	r.mem.close()
	r.obs.close()
	var extra int
	deadline = time.Now().Add(20 * time.Second)
	for {
		extra = runtime.NumGoroutine() - baseline
		if extra <= 0 || time.Now().After(deadline) {
			break
		}
		wait(context.Background(), 100*time.Millisecond)
	}
	report.GoroutinesBaseline, report.GoroutinesAfter = baseline, baseline+extra
	if extra > 0 {
		buf := make([]byte, 1<<20)
		n := runtime.Stack(buf, true)
		report.addViolation("goroutines left behind", "", 0,
			fmt.Sprintf("%d goroutines above the %d before the observers and sessions started, 20s after they closed; stacks:\n%s", extra, baseline, buf[:n]))
	}
	report.Wall = time.Since(began)
	return report, runErr
}

// drive connects the sessions, starts the workers, runs the rounds, stops
// everything and checks what was recorded.
func (r *run) drive(ctx context.Context, runErr *error) *Report {
	cfg := r.cfg
	stopCtx, stopWorkers := context.WithCancel(context.Background())
	defer stopWorkers()
	w := &workers{cfg: cfg, rec: r.rec, stop: stopCtx}
	defer func() {
		for _, p := range r.proxies {
			p.Close()
		}
	}()
	closeSessions := func() []time.Duration {
		var took []time.Duration
		for _, c := range r.clients {
			start := time.Now()
			c.sess.Close()
			took = append(took, time.Since(start))
		}
		return took
	}
	fail := func(err error) *Report {
		*runErr = err
		closeSessions()
		return newReport(cfg)
	}
	names, err := r.book.sessionServers()
	if err != nil {
		return fail(err)
	}
	for i := 0; i < cfg.Sessions; i++ {
		c := &client{idx: i, policy: session.Standard}
		if i%2 == 1 {
			c.policy = session.SessionOnly
		}
		for m, addr := range r.ens.Servers() {
			p, err := zktest.NewProxy(addr)
			if err != nil {
				return fail(fmt.Errorf("chaos: %w", err))
			}
			r.proxies = append(r.proxies, p)
			c.setProxy(m, addr, p)
		}
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		s, err := session.Connect(cctx, names, session.WithSessionTimeout(cfg.SessionTimeout), session.WithLossPolicy(c.policy),
			session.WithResolver(&r.book.names), session.WithDialer(c.dial))
		cancel()
		if err != nil {
			return fail(fmt.Errorf("chaos: session %d: %w", i, err))
		}
		c.sess = s
		r.clients = append(r.clients, c)
	}

	caches, err := startCaches(r.obs, r.clients, cfg.Root)
	if err != nil {
		return fail(err)
	}
	cacheRNG := rand.New(rand.NewSource(cfg.Seed + 1)) // apart from the faults' RNG: the schedule replays as before
	regs, err := r.startRegistrations(ctx)
	if err != nil {
		caches.close()
		return fail(err)
	}
	trees, err := r.startTrees()
	if err != nil {
		regs.close()
		caches.close()
		return fail(err)
	}
	var cacheTook []time.Duration
	var cacheBad []Violation

	stopObs := make(chan struct{})
	var obsWG sync.WaitGroup
	obsWG.Add(2)
	go func() {
		defer obsWG.Done()
		r.obs.watchCount(stopObs, cfg.Root+"/"+RecipeSemaphore+"/leases", SemaphoreMax, r.rec)
	}()
	can := &canary{rec: r.rec}
	go func() {
		defer obsWG.Done()
		can.run(stopObs)
	}()

	var wg sync.WaitGroup
	var errMu sync.Mutex
	var workerErrs []error
	start := func(fn func() error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := fn(); err != nil {
				errMu.Lock()
				workerErrs = append(workerErrs, err)
				errMu.Unlock()
			}
		}()
	}
	for _, c := range r.clients {
		base := cfg.Seed + int64(c.idx+1)*1000
		for k, rc := range []string{RecipeMutex, RecipeReentrant, RecipeNonFair} {
			start(func() error { return w.runMutex(c, rc, base+int64(k)) })
		}
		start(func() error { return w.runRWLock(c, base+10) })
		start(func() error { return w.runSemaphore(c, base+11) })
		start(func() error { return w.runLeader(c, base+12) })
	}

	rng := rand.New(rand.NewSource(cfg.Seed))
	rounds := 0
	firsts := map[string][]FirstSeen{}
	div := &divergences{seen: map[string]*Divergence{}}
	for round := 1; round <= cfg.Rounds && ctx.Err() == nil; round++ {
		p := drawPlan(rng, cfg)
		stopChurn, churned := make(chan struct{}), make(chan struct{})
		go func() { defer close(churned); caches.churn(r.obs, cacheRNG, stopChurn) }()
		var churns sync.WaitGroup
		churns.Add(2)
		go func() { defer churns.Done(); trees.churn(r.obs, stopChurn) }()
		go func() { defer churns.Done(); regs.churn(cfg, stopChurn) }()
		f, err := r.inject(ctx, round, p)
		close(stopChurn)
		<-churned
		churns.Wait()
		r.rec.fault(f)
		rounds = round
		if cfg.Verbose {
			r.logf("round %d: %s %s (%v)", round, f.Kind, f.Detail, (f.End - f.At).Round(time.Millisecond))
		} else if round%10 == 0 {
			r.logf("round %d/%d at %v", round, cfg.Rounds, r.rec.now().Round(time.Second))
		}
		if err != nil {
			*runErr = err
			break
		}
		wait(ctx, p.gap)
		for _, rc := range Recipes() {
			dir := cfg.Root + "/" + rc
			if rc == RecipeSemaphore {
				dir += "/leases"
			} else if fs, ok := r.obs.first(dir, r.rec.now()); ok {
				fs.Server = r.obs.conn.Server()
				firsts[rc] = append(firsts[rc], fs)
			}
			div.observe(r.rec.now(), dir, r.mem.view(dir, 2*time.Second))
		}
		var conv sync.WaitGroup // the registrations and trees are compared at the same time as the caches
		conv.Add(2)
		go func() { defer conv.Done(); regs.converge(ctx, r.obs, round, f.Kind) }()
		go func() { defer conv.Done(); trees.converge(ctx, r.obs, round, f.Kind) }()
		took, bad := caches.converge(ctx, r.obs)
		conv.Wait()
		cacheTook = append(cacheTook, took)
		for _, b := range bad {
			cacheBad = append(cacheBad, Violation{Kind: "cache not converged", Recipe: "cache", At: r.rec.now(),
				Detail: fmt.Sprintf("round %d (%s): %s, %v after the round", round, f.Kind, b, cacheConverge)})
		}
	}
	for _, b := range caches.replayCheck() {
		cacheBad = append(cacheBad, Violation{Kind: "cache events", Recipe: "cache", At: r.rec.now(), Detail: b})
	}
	trees.replayCheck()

	owners := map[int64]int{}
	for _, c := range r.clients {
		for _, px := range c.allProxies() {
			for _, s := range px.Sessions() {
				owners[s.ID] = c.idx
			}
		}
	}
	r.rec.stop()
	stopWorkers()
	joined := make(chan struct{})
	go func() { wg.Wait(); close(joined) }()
	hung := false
	select {
	case <-joined:
	case <-time.After(60 * time.Second):
		hung = true
	}
	caches.close()
	regs.close()
	trees.close()
	// The sessions still live at the end: a hold on any other session may
	// have outlived its session's end on the server (see sessionWindow).
	live := map[int64]bool{}
	for _, c := range r.clients {
		if ep := sessiontest.Core(c.sess).Epoch(); ep.Err() == nil {
			live[ep.SessionID()] = true
		}
	}
	closeTimes := closeSessions()
	if hung {
		<-joined // Close ends every lease and wait: the workers return now
	}
	close(stopObs)
	obsWG.Wait()

	ivs, faults, writes, calls, server, semMax, semReads := r.rec.snapshot()
	stalls := can.snapshot()
	for i := range ivs {
		ivs[i].SessionEnded = !live[ivs[i].SessionID]
	}
	rep := check(cfg, ivs, faults, writes, calls, stalls)
	if cfg.Dump != "" {
		if err := dump(cfg.Dump, ivs, faults, writes, calls, server, firsts, stalls); err != nil {
			rep.addViolation("dump", "", 0, err.Error()) // not a safety finding, but not to be missed
		}
	}
	rep.Rounds = rounds
	rep.ServerSemaphoreMax, rep.ServerSemaphoreReads = semMax, semReads
	checkServer(rep, ivs, server)
	checkOrphans(rep, ivs, faults, firsts, owners)
	rep.Diverged = div.persistent()
	rep.CacheRounds, rep.CacheConverge = len(cacheTook), distOf(cacheTook)
	rep.Violations = append(rep.Violations, cacheBad...)
	regs.fill(rep, faults)
	trees.fill(rep)
	if hung {
		rep.addViolation("workers did not stop", "", 0, "a worker was still blocked 60s after the run stopped (its calls' ctx had ended)")
	}
	errMu.Lock()
	for _, err := range workerErrs {
		rep.addViolation("worker error", "", 0, err.Error())
	}
	errMu.Unlock()
	sort.Slice(closeTimes, func(i, j int) bool { return closeTimes[i] < closeTimes[j] })
	if len(closeTimes) > 0 {
		rep.SessionCloseMax = closeTimes[len(closeTimes)-1]
	}
	return rep
}

// dump writes the raw records to path as JSON.
func dump(path string, ivs []Interval, faults []FaultEvent, writes []Write, calls []Call,
	server []ServerSample, firsts map[string][]FirstSeen, stalls []stall) error {
	var notable []Call
	for _, c := range calls {
		if c.Err != "" || c.Overshoot() > 0 {
			notable = append(notable, c)
		}
	}
	type span struct{ From, To time.Duration }
	var st []span
	for _, s := range stalls {
		st = append(st, span{s.from, s.to})
	}
	b, err := json.Marshal(map[string]any{
		"intervals": ivs, "faults": faults, "writes": writes, "calls": notable,
		"server": server, "firsts": firsts, "stalls": st,
	})
	if err != nil {
		return fmt.Errorf("chaos: dump: %w", err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		return fmt.Errorf("chaos: dump: %w", err)
	}
	return nil
}
