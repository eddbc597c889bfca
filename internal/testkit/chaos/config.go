package chaos

import (
	"fmt"
	"time"
)

// SemaphoreMax is the maximum of the run's semaphore.
const SemaphoreMax = 3

// Config describes a run. The zero value of every field means its default.
type Config struct {
	// Rounds is the number of fault rounds (default 200).
	Rounds int
	// Seed drives the fault schedule and every worker's choices (default:
	// the time at start). The report prints it; the same seed replays the
	// same schedule of faults.
	Seed int64
	// Sessions is the number of client sessions (default 12, at least 2).
	// Even-numbered sessions use the standard loss policy, odd-numbered ones
	// session-only.
	Sessions int
	// SessionTimeout is every client session's timeout (default 1.5 s).
	SessionTimeout time.Duration
	// Tolerance is how late after its ctx ended a blocking call may return
	// before it counts as a violation (default 100 ms; see doc.go).
	Tolerance time.Duration
	// DwellMin and DwellMax bound how long a fault is held, and a round lasts
	// (defaults 0.5 s and 1.5 s).
	DwellMin, DwellMax time.Duration
	// Root is the path under which the recipes live (default "/chaos").
	Root string
	// Logf, if not nil, receives progress lines (every 10 rounds, or every
	// round with Verbose).
	Logf func(format string, args ...any)
	// Verbose logs every fault.
	Verbose bool
	// Dump, if not empty, is a file to write the raw records to, as JSON
	// (holds, faults, fenced writes, failed or late calls, server snapshots,
	// first-in-line nodes, stalls), for looking into a finding.
	Dump string
}

func (c Config) withDefaults() (Config, error) {
	if c.Rounds == 0 {
		c.Rounds = 200
	}
	if c.Seed == 0 {
		c.Seed = time.Now().UnixNano()
	}
	if c.Sessions == 0 {
		c.Sessions = 12
	}
	if c.SessionTimeout == 0 {
		c.SessionTimeout = 1500 * time.Millisecond
	}
	if c.Tolerance == 0 {
		c.Tolerance = 100 * time.Millisecond
	}
	if c.DwellMin == 0 {
		c.DwellMin = 500 * time.Millisecond
	}
	if c.DwellMax == 0 {
		c.DwellMax = 1500 * time.Millisecond
	}
	if c.Root == "" {
		c.Root = "/chaos"
	}
	switch {
	case c.Rounds < 0:
		return c, fmt.Errorf("chaos: %d rounds", c.Rounds)
	case c.Sessions < 2:
		return c, fmt.Errorf("chaos: %d sessions: at least 2", c.Sessions)
	case c.SessionTimeout < 500*time.Millisecond:
		return c, fmt.Errorf("chaos: session timeout %v below the servers' minimum of 500ms", c.SessionTimeout)
	case c.DwellMax < c.DwellMin:
		return c, fmt.Errorf("chaos: dwell max %v below min %v", c.DwellMax, c.DwellMin)
	case c.Tolerance < 0:
		return c, fmt.Errorf("chaos: negative tolerance %v", c.Tolerance)
	}
	return c, nil
}
