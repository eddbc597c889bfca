package chaos

import (
	"context"
	"fmt"
	"math/rand"
	"strings"
	"sync/atomic"
	"time"

	"github.com/zkrecipes/zkrecipes/internal/testkit/sessiontest"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// Fault kinds, as the report names them.
const (
	FaultCut           = "cut"
	FaultPartition     = "partition past the session timeout"
	FaultKillServing   = "instant kill (serving member)"
	FaultKillBlind     = "instant kill (another member)"
	FaultKillNoServer  = "instant kill (session not connected)"
	FaultKillNotFound  = "instant kill (no credentials)"
	FaultLeaderKill    = "ensemble leader kill+restart"
	FaultMove          = "member moved to a new address"
	FaultFreeze        = "member frozen+thawed"
	FaultGhost         = "swallowed reply (ghost create)"
	FaultGhostNone     = "swallowed reply (no create seen)"
	FaultLatency       = "latency spike"
	FaultDelete        = "third-party delete"
	FaultDeleteNothing = "third-party delete (nothing held)"
)

// plan is one round's fault, drawn in full from the seeded RNG whatever the
// kind, so that a seed gives the same schedule whatever happens at run time.
type plan struct {
	roll    int   // kind: 0-99
	perm    []int // session order: targets are the first k holders in it
	k       int   // 1-3 targets for cuts and latency
	dwell   time.Duration
	freeze  time.Duration
	extra   time.Duration // held past the loss, for partitions; down time for kills
	blind   bool
	member  int // 0-2 a member, 3 the ensemble leader
	recipe  int // index into Recipes()
	pick    int
	latency time.Duration
	gap     time.Duration
}

func drawPlan(rng *rand.Rand, cfg Config) plan {
	span := int64(cfg.DwellMax-cfg.DwellMin) + 1
	p := plan{
		roll:    rng.Intn(100),
		perm:    rng.Perm(cfg.Sessions),
		k:       1 + rng.Intn(3),
		dwell:   cfg.DwellMin + time.Duration(rng.Int63n(span)),
		freeze:  300*time.Millisecond + time.Duration(rng.Int63n(int64(cfg.SessionTimeout+cfg.SessionTimeout/2))),
		extra:   time.Duration(rng.Int63n(int64(300 * time.Millisecond))),
		blind:   rng.Intn(2) == 0,
		member:  rng.Intn(4),
		recipe:  rng.Intn(len(Recipes())),
		pick:    rng.Intn(1 << 20),
		latency: 50*time.Millisecond + time.Duration(rng.Int63n(int64(cfg.SessionTimeout/2))),
		gap:     100*time.Millisecond + time.Duration(rng.Int63n(int64(300*time.Millisecond))),
	}
	if p.k > cfg.Sessions {
		p.k = cfg.Sessions
	}
	return p
}

// wait waits d or until ctx ends; false if ctx ended.
func wait(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// inject runs one round's fault, holds it and heals it. An error means the
// ensemble could not be brought back.
func (r *run) inject(ctx context.Context, round int, p plan) (*FaultEvent, error) {
	f := &FaultEvent{Round: round, At: r.rec.now()}
	defer func() { f.End = r.rec.now() }()
	// Targets: the first sessions in the drawn order that hold something
	// now (so that faults bite), then the others.
	var order, idle []int
	for _, i := range p.perm {
		if r.rec.holding(i) {
			order = append(order, i)
		} else {
			idle = append(idle, i)
		}
	}
	order = append(order, idle...)
	target := r.clients[order[0]]
	targets := order[:p.k]
	switch x := p.roll; {
	case x < 16:
		f.Kind, f.Sessions = FaultCut, targets
		for _, i := range targets {
			for _, px := range r.clients[i].current() {
				px.Cut()
			}
		}
		wait(ctx, p.dwell)
	case x < 28:
		f.Kind, f.Sessions = FaultPartition, []int{target.idx}
		ep := sessiontest.Core(target.sess).Epoch()
		for _, px := range target.current() {
			px.Partition()
		}
		lost := time.NewTimer(4 * r.cfg.SessionTimeout)
		select {
		case <-ep.Lost():
			wait(ctx, p.extra)
		case <-lost.C:
			f.Detail = "the client did not declare its session lost within 4 timeouts"
		case <-ctx.Done():
		}
		lost.Stop()
		for _, px := range target.current() {
			px.Heal()
		}
		wait(ctx, p.dwell/2)
	case x < 44:
		r.kill(ctx, f, target, p.blind)
		wait(ctx, p.dwell)
	case x < 48:
		f.Kind = FaultLeaderKill
		m, err := r.ens.Leader()
		if err != nil {
			return f, fmt.Errorf("chaos: round %d: %w", round, err)
		}
		f.Detail = fmt.Sprintf("member %d", m)
		if err := r.ens.Member(m).Kill(); err != nil {
			return f, fmt.Errorf("chaos: round %d: kill member %d: %w", round, m, err)
		}
		wait(ctx, 200*time.Millisecond+p.extra*2)
		if err := r.ens.Member(m).Restart(); err != nil {
			return f, fmt.Errorf("chaos: round %d: restart member %d: %w", round, m, err)
		}
		if err := r.ready(); err != nil {
			return f, fmt.Errorf("chaos: round %d: after restarting member %d: %w", round, m, err)
		}
	case x < 54:
		if err := r.move(f, round, p.member); err != nil {
			return f, err
		}
	case x < 62:
		f.Kind = FaultFreeze
		m := p.member
		if m == 3 {
			l, err := r.ens.Leader()
			if err != nil {
				return f, fmt.Errorf("chaos: round %d: %w", round, err)
			}
			m = l
		}
		f.Detail = fmt.Sprintf("member %d for %v", m, p.freeze.Round(time.Millisecond))
		if err := r.ens.Member(m).Freeze(); err != nil {
			return f, fmt.Errorf("chaos: round %d: freeze member %d: %w", round, m, err)
		}
		wait(ctx, p.freeze)
		if err := r.ens.Member(m).Thaw(); err != nil {
			return f, fmt.Errorf("chaos: round %d: thaw member %d: %w", round, m, err)
		}
		if err := r.ready(); err != nil {
			return f, fmt.Errorf("chaos: round %d: after thawing member %d: %w", round, m, err)
		}
	case x < 75:
		r.ghost(ctx, f, target, p.dwell)
	case x < 88:
		f.Kind, f.Sessions = FaultLatency, targets
		f.Detail = p.latency.Round(time.Millisecond).String()
		for _, i := range targets {
			for _, px := range r.clients[i].current() {
				px.SetLatency(p.latency)
			}
		}
		wait(ctx, p.dwell)
		for _, i := range targets {
			for _, px := range r.clients[i].current() {
				px.SetLatency(0)
			}
		}
	default:
		r.thirdPartyDelete(f, Recipes()[p.recipe], p.pick)
		wait(ctx, p.dwell)
	}
	return f, nil
}

// ready waits until the ensemble has every member serving and one leader.
func (r *run) ready() error {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	return r.ens.WaitReady(ctx)
}

// kill ends target's session on the server at once (zktest.ExpireSession),
// through the member that serves it or, when blind, through another one.
// Through the serving member the client's connection is closed as the kill
// attaches, before the session's nodes go; through another member the client
// learns of it when its nodes are already gone.
func (r *run) kill(ctx context.Context, f *FaultEvent, target *client, blind bool) {
	f.Sessions = []int{target.idx}
	id := target.sess.SessionID()
	f.SessionID = id
	var creds zktest.SessionCreds
	found := false
	for _, px := range target.allProxies() {
		for _, c := range px.Sessions() {
			if c.ID == id {
				creds, found = c, true
			}
		}
	}
	if !found {
		f.Kind = FaultKillNotFound
		return
	}
	servers := r.ens.Servers()
	serving := r.servingMember(ctx, id)
	var order []string
	switch {
	case serving < 0:
		f.Kind = FaultKillNoServer
		order = servers
	case blind:
		f.Kind, f.Blind = FaultKillBlind, true
		for i, s := range servers {
			if i != serving {
				order = append(order, s)
			}
		}
		order = append(order, servers[serving])
	default:
		f.Kind = FaultKillServing
		order = append([]string{servers[serving]}, servers[:serving]...)
		order = append(order, servers[serving+1:]...)
	}
	f.Detail = fmt.Sprintf("session 0x%x of s%d, serving member %d", id, target.idx, serving)
	kctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := zktest.ExpireSession(kctx, order, creds); err != nil {
		f.Detail += ": " + err.Error()
	}
}

// servingMember returns the member whose connections include session id
// (the `cons` four-letter word), or -1.
func (r *run) servingMember(ctx context.Context, id int64) int {
	needle := fmt.Sprintf("sid=0x%x", id)
	for i, addr := range r.ens.Servers() {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		out, err := zktest.FourLetterWord(cctx, addr, "cons")
		cancel()
		if err == nil && strings.Contains(out, needle) {
			return i
		}
	}
	return -1
}

// ghost swallows the reply to target's next create (or multi) on the recipe
// paths: the request reaches the server, the reply is dropped and the
// connection closed, so the client sees a connection error for a create that
// happened.
func (r *run) ghost(ctx context.Context, f *FaultEvent, target *client, dwell time.Duration) {
	f.Kind, f.Sessions = FaultGhostNone, []int{target.idx}
	var fired atomic.Bool
	var at atomic.Int64
	var detail atomic.Pointer[string]
	done := make(chan struct{})
	prefix := r.cfg.Root + "/"
	hook := func(req zktest.Request) zktest.Action {
		switch req.Op {
		case zktest.OpCreate, zktest.OpCreate2, zktest.OpMulti:
		default:
			return zktest.Forward
		}
		if !strings.HasPrefix(req.Path, prefix) || !fired.CompareAndSwap(false, true) {
			return zktest.Forward
		}
		at.Store(int64(r.rec.now()))
		d := fmt.Sprintf("%s %s", zktest.OpName(req.Op), req.Path)
		detail.Store(&d)
		close(done)
		return zktest.SwallowReply
	}
	for _, px := range target.current() {
		px.OnRequest(hook)
	}
	t := time.NewTimer(2 * dwell)
	select {
	case <-done:
	case <-t.C:
	case <-ctx.Done():
	}
	t.Stop()
	for _, px := range target.current() {
		px.OnRequest(nil)
	}
	// A hook call may still be running: read what it stored only through
	// the atomics, and only once it has stored both.
	if fired.Load() {
		select {
		case <-done:
			f.Kind, f.At, f.Detail = FaultGhost, time.Duration(at.Load()), *detail.Load()
			wait(ctx, dwell/2)
		case <-ctx.Done():
		}
	}
}

// thirdPartyDelete deletes, through the observer, a node of recipe: half of
// the time the first in line (a holder), else one picked at random, a
// waiter's as often as not (for the semaphore, one of the lease nodes).
func (r *run) thirdPartyDelete(f *FaultEvent, recipe string, pick int) {
	f.Kind = FaultDeleteNothing
	dir := r.cfg.Root + "/" + recipe
	if recipe == RecipeSemaphore {
		dir += "/leases"
	}
	children, err := r.obs.sortedChildren(dir)
	if err != nil || len(children) == 0 {
		f.Detail = recipe
		return
	}
	victim := children[0]
	if recipe == RecipeSemaphore || pick%2 == 1 {
		victim = children[(pick/2)%len(children)]
	}
	node := dir + "/" + victim
	f.At = r.rec.now()
	if err := r.obs.conn.Delete(node, -1); err != nil {
		f.Detail = fmt.Sprintf("%s: %v", node, err)
		return
	}
	f.Kind, f.Node, f.Detail = FaultDelete, node, node
}
