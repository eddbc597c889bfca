package chaos

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/zkrecipes/zkrecipes/session"
)

// Reasons an overlap is not a violation (see doc.go).
const (
	ReasonBlindKill   = "unknowable: instant kill through another member"
	ReasonDelete      = "unknowable: third-party delete"
	ReasonSessionOnly = "session-only policy window"
	ReasonServingKill = "race: instant kill through the serving member"
)

// servingKillRace bounds how long after a newcomer acquired a holder killed
// through its own member may still learn of it and count as a race (see
// classify) rather than a violation: a round trip and the scheduling of a
// busy two-core machine. Under the standard policy the holder may learn of
// the kill only at its lease deadline, two thirds of the session timeout
// after its last answered request (the server's close of its connection
// looks like any reset): killRace adds that.
const servingKillRace = time.Second

// killRace is servingKillRace plus the lease deadline of cfg's sessions.
func killRace(cfg Config) time.Duration { return servingKillRace + cfg.SessionTimeout*2/3 }

// nodeWatchDelay is how long a held lease may go without a watch on its own
// node (engine.WithNodeWatch): a lease released sooner need never learn of
// its node's deletion.
const nodeWatchDelay = 100 * time.Millisecond

// deletedWaiterBound is how long a lease granted to a waiter whose node a
// third party had deleted may last: the node watch's 100 ms, and a round
// trip and the scheduling of a busy two-core machine.
const deletedWaiterBound = time.Second

// classify says why holder a (the earlier one) could still hold when b
// acquired: "" when nothing excuses it (a violation). race bounds the
// serving-kill race (killRace).
func classify(a, b Interval, faults []FaultEvent, race time.Duration) string {
	for _, f := range faults {
		if f.At > b.Start || f.End < a.Start {
			continue
		}
		switch {
		case f.Kind == FaultDelete && f.Node == a.Node:
			return ReasonDelete
		case f.Kind == FaultDelete && f.Node == b.Node && b.Lost && b.Cause == "node deleted" &&
			b.End-b.Start <= deletedWaiterBound:
			// B's own node was deleted while B waited, and B was granted
			// all the same, on its predecessor's deletion notice: the
			// node watch documents that such a lease ends within 100 ms
			// and a round trip of the acquire (engine.WithNodeWatch).
			return ReasonDelete
		case f.Kind == FaultDelete && f.Node == b.Node && !b.Lost && b.End-b.Start <= nodeWatchDelay:
			// The same, with B released before the node watch was due:
			// nothing had to tell B (a downgrade's read node deleted as
			// it was placed, then the waiter behind it granted on that
			// deletion, was seen so).
			return ReasonDelete
		case f.Kind == FaultKillBlind && f.SessionID == a.SessionID:
			return ReasonBlindKill
		case f.Kind == FaultKillServing && f.SessionID == a.SessionID && a.End-b.Start <= race:
			// The server closes the victim's connection as it deletes its
			// nodes: the victim hears of it on the wire only about a round
			// trip before the others, and which process's goroutine runs
			// first is up to the scheduler (all sessions share this
			// process and two cores). The library promises no more (see
			// leader.Term.Done); a real expiry has a margin instead.
			return ReasonServingKill
		case f.Kind == FaultKillServing && f.SessionID == b.SessionID && b.Lost && b.End-b.Start <= race:
			// The same race the other way round: the newcomer's node was
			// granted before the kill deleted it, the others were granted
			// on its deletion, and the newcomer's acquire returned after
			// theirs (the scheduler again), with a lease that ended at
			// once.
			return ReasonServingKill
		}
	}
	if a.Policy == session.SessionOnly && sessionWindow(a, b, faults) {
		return ReasonSessionOnly
	}
	return ""
}

// sessionWindow reports whether session-only holder a may have held on past
// its session's end on the server when b acquired. While a's session lives,
// so does its node, and a newcomer that acquires past it is a violation
// under any policy: a disconnect that the session rode out excuses nothing.
// So a's session must have ended: its hold ended with the session's loss;
// or the session was no longer live when the run stopped, and a's hold
// ended by a loss or a fault that disconnects or expires sessions hit it
// between its start and b's acquire (a holder may end its work on its own
// before it learns that its session expired).
func sessionWindow(a, b Interval, faults []FaultEvent) bool {
	if a.Lost && a.Cause == causeSessionLost {
		return true
	}
	if !a.SessionEnded {
		return false
	}
	if a.Lost {
		return true
	}
	for _, f := range faults {
		if f.At <= b.Start && f.End >= a.Start && f.hits(a.Session) && disconnects(f.Kind) {
			return true
		}
	}
	return false
}

// disconnects reports whether a fault of kind can disconnect or expire the
// sessions it hits (all but third-party deletes).
func disconnects(kind string) bool {
	return kind != FaultDelete && kind != FaultDeleteNothing
}

// conflict reports whether a and b may not hold together (the semaphore is
// counted, not paired).
func conflict(a, b Interval) bool {
	if a.Worker == b.Worker {
		return false // one worker's holds: a downgrade's write and read
	}
	return a.Write || b.Write
}

// check judges a run from what was recorded.
func check(cfg Config, ivs []Interval, faults []FaultEvent, writes []Write, calls []Call, stalls []stall) *Report {
	rep := newReport(cfg)
	end := time.Duration(0)
	for _, iv := range ivs {
		if iv.End > end {
			end = iv.End
		}
	}
	byRecipe := map[string][]Interval{}
	for _, iv := range ivs {
		if iv.Open {
			rep.addViolation("interval never ended", iv.Recipe, iv.Start,
				fmt.Sprintf("%s's hold from %v (node %s) never ended: its worker did not return", iv.Worker, iv.Start, iv.Node))
			iv.End = end + time.Hour
		}
		byRecipe[iv.Recipe] = append(byRecipe[iv.Recipe], iv)
		key := iv.Recipe
		if iv.Recipe == RecipeRWLock {
			key += map[bool]string{true: " (write)", false: " (read)"}[iv.Write]
		}
		rep.Acquisitions[key]++
	}
	for _, f := range faults {
		rep.Faults[f.Kind]++
	}
	for _, recipe := range Recipes() {
		list := byRecipe[recipe]
		sort.Slice(list, func(i, j int) bool { return list[i].Start < list[j].Start })
		if recipe == RecipeSemaphore {
			checkCount(rep, list, faults, killRace(cfg))
		} else {
			checkPairs(rep, list, faults, killRace(cfg))
			checkTokens(rep, recipe, list)
		}
		rep.LongestGap[recipe] = longestGap(list, faults)
	}
	checkWrites(rep, ivs, writes)
	checkCalls(rep, cfg, calls, stalls)
	lossLatency(rep, cfg, ivs, faults)
	return rep
}

// checkPairs finds every pair of conflicting holds that overlap: b acquired
// before a had ended.
func checkPairs(rep *Report, list []Interval, faults []FaultEvent, race time.Duration) {
	var active []Interval
	for _, b := range list {
		kept := active[:0]
		for _, a := range active {
			if a.End > b.Start {
				kept = append(kept, a)
			}
		}
		active = kept
		for _, a := range active {
			if !conflict(a, b) {
				continue
			}
			rep.overlap(a, b, classify(a, b, faults, race))
		}
		active = append(active, b)
	}
}

// checkCount checks that no more than SemaphoreMax semaphore holds overlap;
// when more do, the holds that an excuse covers are set aside first.
func checkCount(rep *Report, list []Interval, faults []FaultEvent, race time.Duration) {
	var active []Interval
	for _, b := range list {
		kept := active[:0]
		for _, a := range active {
			if a.End > b.Start {
				kept = append(kept, a)
			}
		}
		active = kept
		if n := len(active) + 1; n > rep.MaxSemaphoreHolders {
			rep.MaxSemaphoreHolders = n
		}
		if len(active)+1 > SemaphoreMax {
			type excused struct {
				a      Interval
				reason string
			}
			var ex []excused
			for _, a := range active {
				if r := classify(a, b, faults, race); r != "" {
					ex = append(ex, excused{a, r})
				}
			}
			if len(active)+1-len(ex) > SemaphoreMax {
				detail := fmt.Sprintf("%s acquired at %v (node %s) while %d others held:", b.Worker, b.Start, b.Node, len(active))
				for _, a := range active {
					detail += fmt.Sprintf("\n      %s", describe(a))
				}
				rep.addViolation("more semaphore holders than the maximum", RecipeSemaphore, b.Start, detail)
			} else {
				for _, e := range ex {
					rep.overlap(e.a, b, e.reason)
				}
			}
		}
		active = append(active, b)
	}
}

// checkTokens checks that every exclusive hold's fencing token is higher than
// the token of every conflicting hold that ended before it began.
func checkTokens(rep *Report, recipe string, list []Interval) {
	var ws []Interval
	for _, iv := range list {
		if iv.Write {
			ws = append(ws, iv)
		}
	}
	byEnd := append([]Interval(nil), ws...)
	sort.Slice(byEnd, func(i, j int) bool { return byEnd[i].End < byEnd[j].End })
	var max Interval
	j := 0
	for _, b := range ws {
		for j < len(byEnd) && byEnd[j].End <= b.Start {
			if byEnd[j].Token > max.Token {
				max = byEnd[j]
			}
			j++
		}
		rep.TokenChecks++
		if max.Token != 0 && b.Token <= max.Token {
			rep.addViolation("fencing token did not grow", recipe, b.Start,
				fmt.Sprintf("%s has token %d, but %s, which ended before, had %d", describe(b), b.Token, describe(max), max.Token))
		}
	}
}

// checkWrites checks the fenced resource: ordered by the versions the server
// gave them, accepted writes carry tokens that never go down; and a write
// refused while its holder's lease was live must belong to a hold that
// another acquired during (an overlap).
func checkWrites(rep *Report, ivs []Interval, writes []Write) {
	byRecipe := map[string][]Write{}
	for _, w := range writes {
		st := rep.Writes[w.Recipe]
		switch {
		case w.Accepted:
			st.Accepted++
			byRecipe[w.Recipe] = append(byRecipe[w.Recipe], w)
		case w.Refused && w.LeaseLive:
			st.RefusedLive++
			// A guarded commit refused by the server while its holder
			// still believed it held is the guard at work (a node deleted
			// before its watch told the holder), not a violation.
			if !rep.overlapped[w.Interval] && !strings.HasSuffix(w.Recipe, commitSuffix) {
				iv := ivs[w.Interval]
				rep.addViolation("fenced write refused", w.Recipe, w.At,
					fmt.Sprintf("%s's write with token %d was refused (stored %d) while its lease was live, though no other hold began during it", describe(iv), w.Token, w.Stored))
			}
		case w.Refused:
			st.RefusedLate++
		default:
			st.Failed++
		}
		rep.Writes[w.Recipe] = st
	}
	for recipe, ws := range byRecipe {
		sort.Slice(ws, func(i, j int) bool { return ws[i].Version < ws[j].Version })
		for i := 1; i < len(ws); i++ {
			if ws[i].Token < ws[i-1].Token {
				rep.addViolation("stale write accepted", recipe, ws[i].At,
					fmt.Sprintf("version %d has token %d after version %d with token %d", ws[i].Version, ws[i].Token, ws[i-1].Version, ws[i-1].Token))
			}
		}
	}
}

// checkServer checks the observer's snapshots of the semaphore's lease nodes
// against the holds: a node past the maximum in sequence order was created
// while at least SemaphoreMax others existed, so its creator must not have
// been granted a lease with it.
func checkServer(rep *Report, ivs []Interval, server []ServerSample) {
	holder := map[string]Interval{}
	for _, iv := range ivs {
		if iv.Recipe == RecipeSemaphore {
			holder[iv.Node] = iv
		}
	}
	seen := map[string]bool{}
	for _, s := range server {
		for _, n := range s.Excess {
			if seen[n] {
				continue
			}
			seen[n] = true
			rep.ServerExcessNodes++
			if iv, ok := holder[n]; ok {
				rep.addViolation("more semaphore holders than the maximum (server)", RecipeSemaphore, s.At,
					fmt.Sprintf("lease node %s was past the first %d of %v on the server, yet %s held with it",
						n, SemaphoreMax, s.Children, describe(iv)))
			}
		}
	}
}

// orphanAfter is how long a node may stay first in line without any hold on
// it before the report lists it.
const orphanAfter = 5 * time.Second

// leftAfter is how long after its hold ended a node may still be on the
// server (its deletion is asynchronous) before it counts as left behind,
// counted from the heal of a fault under way when the hold ended, if any.
const leftAfter = 3 * time.Second

// checkOrphans looks at the nodes first in line of each recipe, identified by
// their czxid (a hold's token: the non-fair lock's node always has the same
// path). A node still first in line leftAfter after the hold on it ended,
// while its session lived, blocks the lock for everyone until that session
// ends: a violation (a node left behind). A node first in line for
// orphanAfter or more that no hold ever used is listed (liveness).
func checkOrphans(rep *Report, ivs []Interval, faults []FaultEvent, firsts map[string][]FirstSeen, owners map[int64]int) {
	holds := map[int64]Interval{}
	for _, iv := range ivs {
		if iv.Recipe != RecipeSemaphore {
			holds[iv.Token] = iv
		}
	}
	ownerOf := func(id int64) string {
		if idx, ok := owners[id]; ok {
			return fmt.Sprintf("s%d", idx)
		}
		return "unknown session"
	}
	for _, recipe := range Recipes() {
		obs := firsts[recipe]
		for i := 0; i < len(obs); {
			j := i
			for j+1 < len(obs) && obs[j+1].Czxid == obs[i].Czxid {
				j++
			}
			o := obs[i]
			servers := map[string]bool{}
			for k := i; k <= j; k++ {
				servers[obs[k].Server] = true
			}
			iv, held := holds[o.Czxid]
			// The deletion may wait for a fault that was under way when the
			// hold ended (a frozen or killed ensemble leader serves nothing):
			// the grace counts from its heal.
			from := iv.End
			for _, f := range faults {
				if f.hits(iv.Session) && disconnects(f.Kind) && f.At <= iv.End+time.Second && f.End >= iv.End && f.End > from {
					from = f.End
				}
			}
			switch {
			case held && !iv.Open && obs[j].At-from > leftAfter:
				rep.addViolation("node left behind by an ended hold", recipe, iv.End,
					fmt.Sprintf("%s: its node %s (czxid %d, data %q, owner 0x%x of %s) was still first in line from %v to at least %v (%d rounds, read from %v), blocking every other holder",
						describe(iv), o.Node, o.Czxid, o.Data, o.Owner, ownerOf(o.Owner),
						o.At.Round(time.Millisecond), obs[j].At.Round(time.Millisecond), j-i+1, sortedKeys(servers)))
			case !held && obs[j].At-o.At >= orphanAfter:
				rep.Orphans = append(rep.Orphans, fmt.Sprintf(
					"%s: %s (czxid %d, data %q, owner 0x%x of %s) first in line from %v to at least %v (%d rounds, read from %v) and never held",
					recipe, o.Node, o.Czxid, o.Data, o.Owner, ownerOf(o.Owner), o.At.Round(time.Millisecond), obs[j].At.Round(time.Millisecond), j-i+1, sortedKeys(servers)))
			}
			i = j + 1
		}
	}
}

// checkCalls checks that every bounded call returned within the tolerance
// after its ctx had ended in this process (Call.Late: not before the runtime
// ended it), not counting the time the canary saw the whole process stalled
// between then and the return.
func checkCalls(rep *Report, cfg Config, calls []Call, stalls []stall) {
	by := map[string][]time.Duration{}
	var raw, lag []time.Duration
	for _, c := range calls {
		o := c.Overshoot()
		raw = append(raw, o)
		if o > cfg.Tolerance {
			rep.OverTolerance++
		}
		if o > 0 {
			// How long after it was due this process ended the ctx (at
			// least o if it had not when the call returned).
			ended := c.Return
			if c.Ended != 0 {
				ended = min(ended, c.Ended)
			}
			lag = append(lag, max(ended-c.Bound, 0))
		}
		late := c.Late()
		stalled := time.Duration(0)
		if late > 0 {
			stalled = stalledDuring(stalls, c.Return-late, c.Return)
		}
		by[c.Op] = append(by[c.Op], late-stalled)
		if late-stalled > cfg.Tolerance {
			rep.addViolation("call returned after its ctx", "", c.Return,
				fmt.Sprintf("%s by %s returned %v after its ctx was due to end and %v after this process had ended it, %v of that with the process stalled (started at %v, ctx due at %v, ended at %v, err %q)",
					c.Op, c.Worker, o.Round(time.Millisecond), late.Round(time.Millisecond), stalled.Round(time.Millisecond), c.Start, c.Bound, c.Ended, c.Err))
		}
	}
	for op, ds := range by {
		rep.Overshoot[op] = distOf(ds)
	}
	rep.CtxEndLag = distOf(lag)
	classes := map[string]string{}
	for _, c := range calls {
		if c.Err == "" {
			continue
		}
		if _, ok := classes[c.Err]; !ok {
			classes[c.Err] = errClass(c.Err)
		}
		m := rep.CallErrors[c.Op]
		if m == nil {
			m = map[string]int{}
			rep.CallErrors[c.Op] = m
		}
		m[classes[c.Err]]++
	}
	rep.OvershootRaw = distOf(raw)
	var ls []time.Duration
	for _, s := range stalls {
		ls = append(ls, s.to-s.from)
	}
	rep.Stalls = distOf(ls)
}

// lossLatency measures, for every hold ended by a loss, the time from the
// fault that hit its session (the latest before the loss; the hold's start
// if the fault came first) to the moment its holder noticed.
func lossLatency(rep *Report, cfg Config, ivs []Interval, faults []FaultEvent) {
	by := map[string][]time.Duration{}
	limit := 4*cfg.SessionTimeout + cfg.DwellMax
	for _, iv := range ivs {
		if !iv.Lost {
			continue
		}
		rep.Losses[iv.Cause]++
		var best *FaultEvent
		for i := range faults {
			f := &faults[i]
			if f.At > iv.End || !f.hits(iv.Session) {
				continue
			}
			if (f.Kind == FaultDelete) != (f.Node == iv.Node) {
				continue // a delete hits the holder of the node, and only it
			}
			if best == nil || f.At > best.At {
				best = f
			}
		}
		from := iv.Start
		if best != nil && best.At > from {
			from = best.At
		}
		if best == nil || iv.End-best.At > limit {
			by["no fault"] = append(by["no fault"], iv.End-iv.Start)
			continue
		}
		by[best.Kind] = append(by[best.Kind], iv.End-from)
		by["all faults"] = append(by["all faults"], iv.End-from)
	}
	for k, ds := range by {
		rep.LossLatency[k] = distOf(ds)
	}
}

// longestGap returns the longest time without any holder of a recipe,
// between its first hold and its last release.
func longestGap(list []Interval, faults []FaultEvent) Gap {
	var g Gap
	if len(list) == 0 {
		return g
	}
	covered := list[0].End
	for _, iv := range list[1:] {
		if d := iv.Start - covered; d > g.Length {
			g = Gap{Length: d, From: covered}
		}
		if iv.End > covered {
			covered = iv.End
		}
	}
	for _, f := range faults {
		if f.At <= g.From+g.Length && f.End >= g.From-2*time.Second {
			g.Faults = append(g.Faults, fmt.Sprintf("round %d: %s", f.Round, f.Kind))
		}
	}
	return g
}

func describe(iv Interval) string {
	side := ""
	if iv.Recipe == RecipeRWLock {
		side = map[bool]string{true: " write", false: " read"}[iv.Write]
	}
	how := "released"
	switch {
	case iv.Lost:
		how = "lost (" + iv.Cause + ")"
	case iv.Shutdown:
		how = "released at shutdown"
	case iv.Open:
		how = "never ended"
	}
	return fmt.Sprintf("%s%s [%v, %v] %s, %s session 0x%x, token %d, node %s",
		iv.Worker, side, iv.Start, iv.End, how, iv.Policy, iv.SessionID, iv.Token, iv.Node)
}

// errClass strips the numbers and quoted paths from an error's text, so that
// errors of one kind count together.
func errClass(s string) string {
	s = regexp.MustCompile(`"[^"]*"`).ReplaceAllString(s, `"…"`)
	s = regexp.MustCompile(`0x[0-9a-f]+`).ReplaceAllString(s, "0x#")
	return regexp.MustCompile(`[0-9]+`).ReplaceAllString(s, "#")
}
