package chaos

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// Report is what a run found.
type Report struct {
	Seed           int64
	RoundsAsked    int
	Rounds         int // rounds run
	Sessions       int
	SessionTimeout time.Duration
	Tolerance      time.Duration
	Wall           time.Duration

	Faults       map[string]int // by kind
	Acquisitions map[string]int // by recipe (rwlock by side)

	// Violations of the invariants; a correct run has none.
	Violations []Violation
	// Overlaps that are not violations, by reason (see doc.go), with the
	// longest of each and the first few in full.
	Excused map[string]*Excused

	Losses      map[string]int  // holds ended by a loss, by cause
	LossLatency map[string]Dist // fault to the holder's notice, by fault kind
	LongestGap  map[string]Gap  // by recipe
	// Orphans are nodes first in line for 5 s or more that no hold used
	// (liveness: the lock was stuck until its owner's session ended).
	Orphans []string
	// Diverged are nodes that one member showed, after a sync, for 5 s or
	// more while the other members did not.
	Diverged []Divergence
	// Overshoot is how late each kind of call returned after this process
	// had ended its ctx (Call.Late), stalls deducted.
	Overshoot map[string]Dist
	// OvershootRaw is how late every call returned after its ctx was due
	// to end, nothing deducted, and OverTolerance the number of calls later
	// than the tolerance by that measure.
	OvershootRaw Dist
	// CtxEndLag is, over the calls that returned after their ctx was due
	// to end, how long after that this process ended the ctx (Call.Ended):
	// the runtime's timer and scheduling delay, not counted against a call.
	CtxEndLag Dist
	// CallErrors counts the errors of each kind of call, by error text
	// (numbers and quoted paths stripped).
	CallErrors    map[string]map[string]int
	OverTolerance int
	// Stalls are the canary's: times this process was not scheduled for
	// more than canaryPeriod past a wake-up.
	Stalls Dist
	Writes map[string]WriteStats

	TokenChecks          int
	MaxSemaphoreHolders  int // most semaphore holds at once, from the intervals
	ServerSemaphoreMax   int // most lease nodes at once, on the server
	ServerSemaphoreReads int
	ServerExcessNodes    int // lease nodes seen past the maximum (created over it; never holders)
	LeftNodes            int
	GoroutinesBaseline   int
	GoroutinesAfter      int
	SessionCloseMax      time.Duration
	// CacheRounds is the number of rounds at whose end the caches were
	// compared with the server, and CacheConverge how long they took to
	// match it.
	CacheRounds   int
	CacheConverge Dist
	// Registrations and Trees are the figures of the service registrations
	// and the tree caches (see discovery.go and tree.go).
	Registrations RegistrationStats
	Trees         TreeStats

	overlapped map[int]bool // interval IDs that another hold began during
}

// Violation is one broken invariant.
type Violation struct {
	Kind   string
	Recipe string
	At     time.Duration
	Detail string
}

// Excused counts overlaps of one reason.
type Excused struct {
	Count   int
	Longest time.Duration
	Samples []string
}

// Dist summarises durations.
type Dist struct {
	N             int
	P50, P99, Max time.Duration
}

// Gap is the longest time without a holder.
type Gap struct {
	Length time.Duration
	From   time.Duration
	Faults []string // faults injected during it (or just before)
}

// WriteStats counts the attempts to write the fenced resource.
type WriteStats struct {
	Accepted    int
	RefusedLive int // refused (a higher token was stored) while the lease was live
	RefusedLate int // refused after the lease had ended during the attempt
	Failed      int // connection errors, ctx ended: the outcome is unknown or nothing happened
}

func newReport(cfg Config) *Report {
	return &Report{
		Seed: cfg.Seed, RoundsAsked: cfg.Rounds, Sessions: cfg.Sessions,
		SessionTimeout: cfg.SessionTimeout, Tolerance: cfg.Tolerance,
		Faults: map[string]int{}, Acquisitions: map[string]int{}, Excused: map[string]*Excused{},
		Losses: map[string]int{}, LossLatency: map[string]Dist{}, LongestGap: map[string]Gap{},
		Overshoot: map[string]Dist{}, CallErrors: map[string]map[string]int{}, Writes: map[string]WriteStats{}, overlapped: map[int]bool{},
	}
}

func (r *Report) addViolation(kind, recipe string, at time.Duration, detail string) {
	r.Violations = append(r.Violations, Violation{Kind: kind, Recipe: recipe, At: at, Detail: detail})
}

// overlap records that b acquired while a still held, excused by reason or
// (reason "") a violation.
func (r *Report) overlap(a, b Interval, reason string) {
	r.overlapped[a.ID] = true
	by := a.End - b.Start
	detail := fmt.Sprintf("%s acquired at %v while\n      %s still held (for %v more)\n      newcomer: %s",
		b.Worker, b.Start, describe(a), by, describe(b))
	if reason == "" {
		kind := "two holders at once"
		switch {
		case a.Recipe == RecipeLeader:
			kind = "two leaders' work at once"
		case a.Recipe == RecipeRWLock && a.Write != b.Write:
			kind = "a reader during a write"
		case a.Recipe == RecipeSemaphore:
			kind = "more semaphore holders than the maximum"
		}
		r.addViolation(kind, a.Recipe, b.Start, detail)
		return
	}
	e := r.Excused[reason]
	if e == nil {
		e = &Excused{}
		r.Excused[reason] = e
	}
	e.Count++
	if by > e.Longest {
		e.Longest = by
	}
	if len(e.Samples) < 3 {
		e.Samples = append(e.Samples, detail)
	}
}

func distOf(ds []time.Duration) Dist {
	if len(ds) == 0 {
		return Dist{}
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	q := func(p float64) time.Duration { return s[int(p*float64(len(s)-1))] }
	return Dist{N: len(s), P50: q(0.5), P99: q(0.99), Max: s[len(s)-1]}
}

func (d Dist) String() string {
	if d.N == 0 {
		return "none"
	}
	ms := func(x time.Duration) string { return x.Round(time.Millisecond).String() }
	return fmt.Sprintf("n=%d p50=%s p99=%s max=%s", d.N, ms(d.P50), ms(d.P99), ms(d.Max))
}

func sortedKeys[V any](m map[string]V) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// String formats the report for people.
func (r *Report) String() string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	ms := func(x time.Duration) string { return x.Round(time.Millisecond).String() }
	p("chaos run: seed %d (replay: -seed %d), %d/%d rounds, %d sessions (even: standard, odd: session-only), session timeout %v, wall time %v",
		r.Seed, r.Seed, r.Rounds, r.RoundsAsked, r.Sessions, r.SessionTimeout, r.Wall.Round(time.Second))
	p("faults:")
	for _, k := range sortedKeys(r.Faults) {
		p("  %-42s %d", k, r.Faults[k])
	}
	p("acquisitions:")
	total := 0
	for _, k := range sortedKeys(r.Acquisitions) {
		p("  %-42s %d", k, r.Acquisitions[k])
		total += r.Acquisitions[k]
	}
	p("  %-42s %d", "total", total)
	p("VIOLATIONS: %d", len(r.Violations))
	for i, v := range r.Violations {
		if i == 50 {
			p("  ... %d more", len(r.Violations)-50)
			break
		}
		p("  [%s] %s at %v: %s", v.Kind, v.Recipe, v.At, v.Detail)
	}
	p("overlaps that are not violations (see doc.go):")
	if len(r.Excused) == 0 {
		p("  none")
	}
	for _, k := range sortedKeys(r.Excused) {
		e := r.Excused[k]
		p("  %-50s %d (longest %s)", k, e.Count, ms(e.Longest))
		for _, s := range e.Samples {
			p("    e.g. %s", s)
		}
	}
	p("losses reported to holders, by cause:")
	for _, k := range sortedKeys(r.Losses) {
		p("  %-42s %d", k, r.Losses[k])
	}
	p("time from fault injection to the holder's Done/ctx end:")
	for _, k := range sortedKeys(r.LossLatency) {
		p("  %-42s %s", k, r.LossLatency[k])
	}
	p("longest time without any holder:")
	for _, k := range Recipes() {
		g := r.LongestGap[k]
		p("  %-42s %s from %v (faults around it: %s)", k, ms(g.Length), g.From.Round(time.Millisecond), strings.Join(g.Faults, ", "))
	}
	p("nodes first in line for %v or more that no holder held (liveness): %d", orphanAfter, len(r.Orphans))
	for _, o := range r.Orphans {
		p("  %s", o)
	}
	p("nodes one member served (after a sync) for %v or more that the other members did not: %d", orphanAfter, len(r.Diverged))
	for _, d := range r.Diverged {
		p("  member %d: %s from %v to at least %v (%d rounds)", d.Member, d.Node, d.First.Round(time.Millisecond), d.Last.Round(time.Millisecond), d.Rounds)
	}
	p("fenced resource writes (accepted / refused while live / refused after the lease ended / failed):")
	for _, k := range sortedKeys(r.Writes) {
		w := r.Writes[k]
		p("  %-42s %d / %d / %d / %d", k, w.Accepted, w.RefusedLive, w.RefusedLate, w.Failed)
	}
	p("fencing tokens checked to grow: %d holds", r.TokenChecks)
	p("semaphore (max %d): at most %d holders at once in the intervals; on the server (%d reads) at most %d lease nodes,",
		SemaphoreMax, r.MaxSemaphoreHolders, r.ServerSemaphoreReads, r.ServerSemaphoreMax)
	p("  %d nodes seen past the maximum in sequence order (created over it, deleted by their creator; a holder's would be a violation)",
		r.ServerExcessNodes)
	p("process stalls seen by the canary (%v timer): %s", canaryPeriod, r.Stalls)
	p("calls: how late after their ctx was due to end they returned: all calls, raw: %s; %d over the tolerance of %v by that measure",
		r.OvershootRaw, r.OverTolerance, r.Tolerance)
	p("  of those that returned after it was due, how long after that this process ended the ctx (not counted): %s", r.CtxEndLag)
	p("  per call, from when this process ended the ctx, stalls deducted (a violation if over the tolerance):")
	for _, k := range sortedKeys(r.Overshoot) {
		p("    %-40s %s", k, r.Overshoot[k])
	}
	p("errors returned by calls (numbers and paths stripped):")
	for _, op := range sortedKeys(r.CallErrors) {
		m := r.CallErrors[op]
		ks := sortedKeys(m)
		sort.Slice(ks, func(i, j int) bool { return m[ks[i]] > m[ks[j]] })
		for i, k := range ks {
			if i == 6 {
				p("    ... %d more kinds", len(ks)-6)
				break
			}
			p("  %-28s %6d  %s", op, m[k], k)
		}
	}
	p("caches (a children and a node cache per session): compared with the server at the end of %d rounds; time to match: %s",
		r.CacheRounds, r.CacheConverge)
	p("%s", r.Registrations)
	p("%s", r.Trees)
	p("after close: %d nodes left, goroutines %d (baseline %d), slowest session Close %s",
		r.LeftNodes, r.GoroutinesAfter, r.GoroutinesBaseline, ms(r.SessionCloseMax))
	return b.String()
}
