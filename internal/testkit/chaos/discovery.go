package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/internal/testkit/sessiontest"
	"github.com/zkrecipes/zkrecipes/recipes/discovery"
	"github.com/zkrecipes/zkrecipes/session"
)

// Service registration: every session registers one Dynamic instance
// (ID "s<i>") of the service regService under Root+"-services"
// (discovery.Register) and keeps a discovery.Cache of that service. While
// each round's fault is held, the run updates a session's instance every
// 50 to 250 ms (Registration.Update, with a ctx of 0.2 to 2 session
// timeouts, recorded as a bounded call). At the end of every round, after
// the heal and the pause, within regConverge: every registration whose
// session is live is on the server, owned by that session and holding the
// registration's data (the observer reads the service's children after a
// sync), no other instance is, and every cache's Instances equal the
// server's. Throughout the run a raw connection of its own (the watcher)
// lists the service's children at every change; a registration absent from
// that list while its session was connected (Connected or Reconnected) is an
// outage, and one longer than regOutageBound is a violation: a registration
// comes back one request after its client reconnects.

// regService is the service every session registers an instance of.
const regService = "chaos"

// regConverge bounds how long after a round's pause the registrations and
// their caches may take to match the server: as cacheConverge.
const regConverge = cacheConverge

// regOutageBound bounds one outage: the time a registration is absent from
// the watcher's list while its client is connected. A client that is
// connected re-creates its node with one request; what the bound allows for
// is the client learning of a kill through another member (its connection
// is closed about when the node goes), the watcher's notification, and a
// busy machine. The time the watcher's own connection was down is deducted.
const regOutageBound = 10 * time.Second

// RegistrationStats is what the run found of the registrations and their
// caches.
type RegistrationStats struct {
	// Rounds is the number of rounds at whose end the registrations and
	// caches were compared with the server, and Converge how long they took
	// to match it.
	Rounds   int
	Converge Dist
	// Absent counts, over the rounds' first looks, registrations of a live
	// session that were not yet on the server as they should be (missing,
	// owned by an older session, or with older data); Mismatches, caches
	// that differed from the server.
	Absent, Mismatches int
	// Outages are the times a registration was absent from the server while
	// its client was connected (the watcher's blind time deducted), and
	// OutagesOver how many lasted longer than regOutageBound.
	Outages     Dist
	OutagesOver int
	// Updates is the number of Registration.Update calls.
	Updates int
}

// String formats the figures for the report.
func (s RegistrationStats) String() string {
	return fmt.Sprintf("registrations (one instance of %q per session, a discovery cache each): compared with the server at the end of %d rounds; time to match: %s\n"+
		"  at the first look: %d registrations missing or stale, %d caches differing; %d updates\n"+
		"  outages (absent from the server while the client was connected): %s; %d longer than %v (violations)",
		regService, s.Rounds, s.Converge, s.Absent, s.Mismatches, s.Updates, s.Outages, s.OutagesOver, regOutageBound)
}

// servicesPath is the base path of the registrations.
func servicesPath(root string) string { return root + "-services" }

// servicePath is the node of the service, whose children are the
// instances.
func servicePath(root string) string { return servicesPath(root) + "/" + regService }

type regSet struct {
	rec   *recorder
	dir   string
	per   []*sessReg
	watch *regWatcher
	rng   *rand.Rand

	since, until time.Duration // the span the outages are measured in

	stats RegistrationStats
	took  []time.Duration
	bad   []Violation
}

// sessReg is one session's registration, cache and connection states.
type sessReg struct {
	c     *client
	id    string
	reg   *discovery.Registration
	cache *discovery.Cache
	sub   *session.Subscription
	n     int // updates so far (the churn's goroutine only)

	mu     sync.Mutex
	states []stateAt
	done   chan struct{}
}

// stateAt is a session's state transition, on the run's clock.
type stateAt struct {
	at    time.Duration
	state session.State
}

// startRegistrations starts the watcher, then every session's state
// recorder, registration and cache, and waits (at most 30 s) until every
// registration is on the server and the watcher has seen it.
func (r *run) startRegistrations(ctx context.Context) (*regSet, error) {
	rs := &regSet{rec: r.rec, dir: servicePath(r.cfg.Root), rng: rand.New(rand.NewSource(r.cfg.Seed + 3))}
	w, err := dialWatcher(ctx, r.ens.Servers(), r.book.dial, rs.dir, r.rec)
	if err != nil {
		return nil, err
	}
	rs.watch = w
	for _, c := range r.clients {
		sr := &sessReg{c: c, id: fmt.Sprintf("s%d", c.idx), done: make(chan struct{})}
		sr.sub = c.sess.Subscribe()
		sr.states = append(sr.states, stateAt{r.rec.now(), sr.sub.Initial().State})
		go sr.follow(r.rec)
		rs.per = append(rs.per, sr)
		sr.reg, err = discovery.Register(c.sess, servicesPath(r.cfg.Root), discovery.Instance{
			Name: regService, ID: sr.id, Address: "127.0.0.1", Port: 20000 + c.idx,
			Payload: json.RawMessage(`{"n":0}`),
		})
		if err != nil {
			rs.close()
			return nil, fmt.Errorf("chaos: session %d: %w", c.idx, err)
		}
		sr.cache, err = discovery.NewCache(c.sess, servicesPath(r.cfg.Root), regService, discovery.WithEvents(false))
		if err != nil {
			rs.close()
			return nil, fmt.Errorf("chaos: session %d: %w", c.idx, err)
		}
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for _, sr := range rs.per {
		if err := sr.reg.Wait(wctx); err != nil {
			rs.close()
			return nil, fmt.Errorf("chaos: session %d: registration: %w", sr.c.idx, err)
		}
	}
	for !rs.watch.seesAll(rs.per) {
		if !wait(wctx, 20*time.Millisecond) {
			rs.close()
			return nil, fmt.Errorf("chaos: the registrations' watcher did not see every instance: %w", wctx.Err())
		}
	}
	rs.since = r.rec.now()
	return rs, nil
}

// follow records the session's state transitions until the subscription
// is closed.
func (sr *sessReg) follow(rec *recorder) {
	defer close(sr.done)
	for ev := range sr.sub.C() {
		sr.mu.Lock()
		sr.states = append(sr.states, stateAt{ev.At.Sub(rec.base), ev.State})
		sr.mu.Unlock()
	}
}

// close ends the outage span, unregisters every instance (at once: each
// Close may wait a few seconds for its delete) and closes the caches, the
// state recorders and the watcher.
func (rs *regSet) close() {
	if rs.until == 0 {
		rs.until = rs.rec.now()
	}
	var wg sync.WaitGroup
	for _, sr := range rs.per {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if sr.reg != nil {
				sr.reg.Close()
			}
			if sr.cache != nil {
				sr.cache.Close()
			}
		}()
	}
	wg.Wait()
	for _, sr := range rs.per {
		sr.sub.Close()
		<-sr.done
	}
	if rs.watch != nil {
		rs.watch.close()
	}
}

// churn updates a session's instance every 50 to 250 ms until stop, each
// Update bounded by a ctx of 0.2 to 2 session timeouts that stop also ends,
// and records each call.
func (rs *regSet) churn(cfg Config, stop <-chan struct{}) {
	base, cancel := context.WithCancel(context.Background())
	var stoppedAt atomic.Int64
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		select {
		case <-stop:
			stoppedAt.Store(int64(rs.rec.now()))
			cancel()
		case <-base.Done():
		}
	}()
	defer func() { cancel(); <-ended }()
	t := time.NewTimer(time.Duration(rs.rng.Int63n(int64(250 * time.Millisecond))))
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-stop:
			return
		}
		sr := rs.per[rs.rng.Intn(len(rs.per))]
		lo := cfg.SessionTimeout / 5
		timeout := lo + time.Duration(rs.rng.Int63n(int64(2*cfg.SessionTimeout-lo)))
		sr.n++
		inst := sr.reg.Instance()
		inst.Payload = json.RawMessage(fmt.Sprintf(`{"n":%d}`, sr.n))
		ctx, cancelCall := context.WithTimeout(base, timeout)
		dl, _ := ctx.Deadline()
		start := rs.rec.now()
		probe := rs.rec.probeEnd(ctx)
		err := sr.reg.Update(ctx, inst)
		ret := rs.rec.now()
		bound := dl.Sub(rs.rec.base)
		if s := time.Duration(stoppedAt.Load()); s != 0 && s < bound {
			bound = s
		}
		rs.rec.call(Call{Op: "discovery.Update", Worker: fmt.Sprintf("s%d/discovery", sr.c.idx), Start: start, Return: ret,
			Bound: bound, Ended: probe.ended(ret), Err: errText(err)})
		cancelCall()
		rs.stats.Updates++
		t.Reset(50*time.Millisecond + time.Duration(rs.rng.Int63n(int64(200*time.Millisecond))))
	}
}

// regNode is an instance's node on the server: its data, as an Instance
// reads and writes it again, and its owner.
type regNode struct {
	data  []byte
	owner int64
}

// normal returns inst's JSON, the form registrations and caches are
// compared in.
func normal(inst discovery.Instance) []byte {
	b, err := json.Marshal(inst)
	if err != nil {
		return []byte("unmarshalable: " + err.Error())
	}
	return b
}

// serverState reads the service's instances after a sync, by ID.
func (rs *regSet) serverState(o *observer) (map[string]regNode, error) {
	out := map[string]regNode{}
	if _, err := o.conn.Sync(rs.dir); err != nil && !errors.Is(err, zk.ErrNoNode) {
		return nil, err
	}
	names, _, err := o.conn.Children(rs.dir)
	if errors.Is(err, zk.ErrNoNode) {
		return out, nil
	}
	if err != nil {
		return nil, err
	}
	type got struct {
		name string
		data []byte
		st   *zk.Stat
		err  error
	}
	ch := make(chan got, len(names))
	for _, name := range names { // in parallel: a round's end waits for one round trip, not one per instance
		go func() {
			data, st, err := o.conn.Get(rs.dir + "/" + name)
			ch <- got{name, data, st, err}
		}()
	}
	var firstErr error
	for range names {
		g := <-ch
		switch {
		case errors.Is(g.err, zk.ErrNoNode):
			continue
		case g.err != nil:
			firstErr = g.err
			continue
		}
		var inst discovery.Instance
		if err := inst.UnmarshalJSON(g.data); err != nil {
			out[g.name] = regNode{[]byte(fmt.Sprintf("%q does not parse: %v", g.data, err)), g.st.EphemeralOwner}
			continue
		}
		out[g.name] = regNode{normal(inst), g.st.EphemeralOwner}
	}
	if firstErr != nil {
		return nil, firstErr
	}
	return out, nil
}

// converge waits until every registration of a live session is on the
// server as it should be and every cache matches the server, at most
// regConverge, and records how long that took or what still differed.
func (rs *regSet) converge(ctx context.Context, o *observer, round int, kind string) {
	start := time.Now()
	deadline := start.Add(regConverge)
	first := true
	for {
		var bad []string
		server, err := rs.serverState(o)
		if err != nil {
			bad = append(bad, fmt.Sprintf("the observer could not read the service's instances: %v", err))
		} else {
			bad = rs.compare(server, first)
			first = false
		}
		if len(bad) == 0 {
			rs.stats.Rounds++
			rs.took = append(rs.took, time.Since(start))
			return
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			rs.stats.Rounds++
			rs.took = append(rs.took, time.Since(start))
			for _, b := range bad {
				rs.bad = append(rs.bad, Violation{Kind: "registration or discovery cache not converged", Recipe: "discovery", At: rs.rec.now(),
					Detail: fmt.Sprintf("round %d (%s): %s, %v after the round", round, kind, b, regConverge)})
			}
			return
		}
		wait(ctx, 20*time.Millisecond)
	}
}

// compare says how the registrations and caches differ from the server;
// first counts the differences into the stats.
func (rs *regSet) compare(server map[string]regNode, first bool) []string {
	var bad []string
	known := map[string]bool{}
	for _, sr := range rs.per {
		known[sr.id] = true
		ep := sessiontest.Core(sr.c.sess).Epoch()
		if ep.Err() != nil {
			continue // no live session: nothing to keep registered now
		}
		n, ok := server[sr.id]
		want := normal(sr.reg.Instance())
		var d string
		switch {
		case !ok:
			d = "not on the server"
		case n.owner != ep.SessionID():
			d = fmt.Sprintf("owned by session 0x%x on the server", n.owner)
		case !bytes.Equal(n.data, want):
			d = fmt.Sprintf("holds %s on the server, the registration %s", n.data, want)
		}
		if d != "" {
			bad = append(bad, fmt.Sprintf("session %d (0x%x, live), registration %s: %s", sr.c.idx, ep.SessionID(), sr.id, d))
			if first {
				rs.stats.Absent++
			}
		}
	}
	for id := range server {
		if !known[id] {
			bad = append(bad, fmt.Sprintf("instance %s on the server, registered by no session", id))
		}
	}
	for _, sr := range rs.per {
		if d := instancesDiffer(sr.cache.Instances(), server); d != "" {
			bad = append(bad, fmt.Sprintf("session %d, discovery cache: %s", sr.c.idx, d))
			if first {
				rs.stats.Mismatches++
			}
		}
	}
	return bad
}

// instancesDiffer says how a cache's instances differ from the server's
// ("" if they match).
func instancesDiffer(got []discovery.Instance, server map[string]regNode) string {
	if len(got) != len(server) {
		ids := make([]string, 0, len(got))
		for _, in := range got {
			ids = append(ids, in.ID)
		}
		return fmt.Sprintf("%d instances cached %v, %d on the server %v", len(got), ids, len(server), sortedKeys(server))
	}
	for _, in := range got {
		n, ok := server[in.ID]
		if !ok {
			return in.ID + " cached, not on the server"
		}
		if b := normal(in); !bytes.Equal(b, n.data) {
			return fmt.Sprintf("%s cached as %s, %s on the server", in.ID, b, n.data)
		}
	}
	return ""
}

// fill adds the registrations' figures and violations to rep: the
// convergence at the rounds' ends and the outages.
func (rs *regSet) fill(rep *Report, faults []FaultEvent) {
	rs.stats.Converge = distOf(rs.took)
	var outs []time.Duration
	for _, sr := range rs.per {
		for _, o := range rs.outages(sr) {
			outs = append(outs, o.length)
			if o.length <= regOutageBound {
				continue
			}
			rs.stats.OutagesOver++
			var around []string
			for _, f := range faults {
				if f.At <= o.to && f.End >= o.from-2*time.Second {
					around = append(around, fmt.Sprintf("round %d: %s %s", f.Round, f.Kind, f.Detail))
				}
			}
			rep.addViolation("registration absent while connected", "discovery", o.from,
				fmt.Sprintf("session %d's registration %s was absent from the server from %v to %v while its session was connected (%v, the watcher's blind time deducted; faults around it: %s)",
					sr.c.idx, sr.id, o.from.Round(time.Millisecond), o.to.Round(time.Millisecond), o.length.Round(time.Millisecond), strings.Join(around, "; ")))
		}
	}
	rs.stats.Outages = distOf(outs)
	rep.Registrations = rs.stats
	rep.Violations = append(rep.Violations, rs.bad...)
}

// outage is a span in which a registration was absent from the watcher's
// list while its client was connected.
type outage struct {
	from, to, length time.Duration
}

// outages merges a session's state transitions with the watcher's lists,
// from rs.since to rs.until.
func (rs *regSet) outages(sr *sessReg) []outage {
	type step struct {
		at        time.Duration
		connected *bool
		present   *bool
	}
	var steps []step
	sr.mu.Lock()
	for _, s := range sr.states {
		up := s.state == session.Connected || s.state == session.Reconnected
		steps = append(steps, step{at: s.at, connected: &up})
	}
	sr.mu.Unlock()
	snaps, blind := rs.watch.snapshot()
	for _, s := range snaps {
		in := s.ids[sr.id]
		steps = append(steps, step{at: s.at, present: &in})
	}
	sort.SliceStable(steps, func(i, j int) bool { return steps[i].at < steps[j].at })
	var out []outage
	connected, present := false, true
	open, from := false, time.Duration(0)
	for _, s := range steps {
		if s.at > rs.until {
			break
		}
		if s.connected != nil {
			connected = *s.connected
		}
		if s.present != nil {
			present = *s.present
		}
		at := max(s.at, rs.since)
		switch down := connected && !present; {
		case down && !open:
			open, from = true, at
		case !down && open:
			open = false
			out = append(out, outage{from, at, at - from - stalledDuring(blind, from, at)})
		}
	}
	if open {
		out = append(out, outage{from, rs.until, rs.until - from - stalledDuring(blind, from, rs.until)})
	}
	var kept []outage
	for _, o := range out {
		if o.length > 0 {
			kept = append(kept, o)
		}
	}
	return kept
}

// regWatcher lists the service's children at every change, on a raw
// connection of its own whose state it follows: while that connection is
// down (until its first list after it is back) its view is old, and that
// time is not counted against a registration.
type regWatcher struct {
	conn *zk.Conn
	dir  string
	rec  *recorder
	poke chan struct{}
	stop chan struct{}
	done chan struct{}

	mu     sync.Mutex
	snaps  []regSnap
	blind  []stall
	down   bool
	downAt time.Duration
}

// regSnap is one list of the service's children.
type regSnap struct {
	at  time.Duration
	ids map[string]bool
}

// dialWatcher connects the watcher (each member dialed with dial, which
// follows members that move) and starts its loop.
func dialWatcher(ctx context.Context, servers []string, dial zk.Dialer, dir string, rec *recorder) (*regWatcher, error) {
	w := &regWatcher{dir: dir, rec: rec, poke: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	conn, events, err := zk.Connect(servers, 4*time.Second, zk.WithLogger(nopLogger{}), zk.WithDialer(dial),
		zk.WithEventCallback(w.event))
	if err != nil {
		return nil, fmt.Errorf("chaos: registrations' watcher: %w", err)
	}
	for ready := false; !ready; {
		select {
		case ev := <-events:
			ready = ev.State == zk.StateHasSession
		case <-ctx.Done():
			conn.Close()
			return nil, fmt.Errorf("chaos: registrations' watcher: no session: %w", ctx.Err())
		}
	}
	w.conn = conn
	go w.run()
	return w, nil
}

// event follows the connection's state (on go-zookeeper's goroutine: it
// must not block).
func (w *regWatcher) event(ev zk.Event) {
	if ev.Type != zk.EventSession {
		return
	}
	switch ev.State {
	case zk.StateDisconnected, zk.StateExpired:
		w.mu.Lock()
		if !w.down {
			w.down, w.downAt = true, w.rec.now()
		}
		w.mu.Unlock()
	case zk.StateHasSession:
		select {
		case w.poke <- struct{}{}:
		default:
		}
	}
}

// run lists the service's children, and again at each notification or
// reconnection, until stop.
func (w *regWatcher) run() {
	defer close(w.done)
	retry := func() bool {
		t := time.NewTimer(50 * time.Millisecond)
		defer t.Stop()
		select {
		case <-t.C:
			return true
		case <-w.poke:
			return true
		case <-w.stop:
			return false
		}
	}
	for {
		names, _, ch, err := w.conn.ChildrenW(w.dir)
		if errors.Is(err, zk.ErrNoNode) {
			w.record(nil)
			ok, _, ech, err := w.conn.ExistsW(w.dir)
			switch {
			case err != nil:
				if !retry() {
					return
				}
				continue
			case ok:
				continue
			}
			ch = ech
		} else if err != nil {
			if !retry() {
				return
			}
			continue
		} else {
			w.record(names)
		}
		select {
		case <-ch:
		case <-w.poke:
		case <-w.stop:
			return
		}
	}
}

// record keeps a list read now; a connection that was down is back.
func (w *regWatcher) record(names []string) {
	s := regSnap{at: w.rec.now(), ids: map[string]bool{}}
	for _, n := range names {
		s.ids[n] = true
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.down {
		w.blind = append(w.blind, stall{w.downAt, s.at})
		w.down = false
	}
	w.snaps = append(w.snaps, s)
}

// seesAll reports whether the latest list holds every registration.
func (w *regWatcher) seesAll(per []*sessReg) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.snaps) == 0 {
		return false
	}
	last := w.snaps[len(w.snaps)-1]
	for _, sr := range per {
		if !last.ids[sr.id] {
			return false
		}
	}
	return true
}

// snapshot returns the lists and the blind spans so far (one still under
// way ends now).
func (w *regWatcher) snapshot() ([]regSnap, []stall) {
	w.mu.Lock()
	defer w.mu.Unlock()
	blind := append([]stall(nil), w.blind...)
	if w.down {
		blind = append(blind, stall{w.downAt, w.rec.now()})
	}
	return append([]regSnap(nil), w.snaps...), blind
}

// close stops the loop and closes the connection.
func (w *regWatcher) close() {
	close(w.stop)
	w.conn.Close()
	<-w.done
}
