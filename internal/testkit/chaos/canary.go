package chaos

import (
	"sync"
	"time"
)

// canaryPeriod is how often the canary asks to be woken.
const canaryPeriod = 5 * time.Millisecond

// canary measures how long this process goes without being scheduled: it asks
// to be woken every canaryPeriod and records every wake-up later than that by
// more than a period as a stall [due, woken]. No goroutine of the library can
// return from a call during such a stall either, so the checker does not count
// a stall's overlap with a call's overshoot against the library (see doc.go).
type canary struct {
	rec *recorder

	mu     sync.Mutex
	stalls []stall
}

type stall struct{ from, to time.Duration }

func (c *canary) run(stop <-chan struct{}) {
	t := time.NewTimer(canaryPeriod)
	defer t.Stop()
	for {
		due := c.rec.now() + canaryPeriod
		t.Reset(canaryPeriod)
		select {
		case <-t.C:
		case <-stop:
			return
		}
		if now := c.rec.now(); now-due > canaryPeriod {
			c.mu.Lock()
			c.stalls = append(c.stalls, stall{due, now})
			c.mu.Unlock()
		}
	}
}

func (c *canary) snapshot() []stall {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]stall(nil), c.stalls...)
}

// stalledDuring returns how much of [from, to] the stalls cover (stalls are
// in time order and do not overlap).
func stalledDuring(stalls []stall, from, to time.Duration) time.Duration {
	var sum time.Duration
	for _, s := range stalls {
		a, b := max(s.from, from), min(s.to, to)
		if b > a {
			sum += b - a
		}
	}
	return sum
}
