package chaos

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestCheckCallsFromCtxEnd: a call is judged from when this process ended
// its ctx (Call.Ended), not from when the ctx was due to end: a call that
// returned right after a ctx the runtime ended late is no violation, one
// that returned more than the tolerance after the ctx had ended is, however
// late the runtime was, and stalls the canary saw after the end are
// deducted as before.
func TestCheckCallsFromCtxEnd(t *testing.T) {
	ms := time.Millisecond
	cfg := Config{Tolerance: 100 * ms}
	cases := []struct {
		desc      string
		c         Call
		stalls    []stall
		violation bool
		late      time.Duration
	}{
		{"within its ctx", Call{Bound: 1000 * ms, Return: 900 * ms}, nil, false, 0},
		{"ctx not ended in the process when it returned",
			Call{Bound: 1000 * ms, Return: 1150 * ms}, nil, false, 0},
		{"the runtime ended the ctx 210 ms late, returned 8 ms after",
			Call{Bound: 1000 * ms, Ended: 1210 * ms, Return: 1218 * ms}, nil, false, 8 * ms},
		{"ctx ended on time, returned 216 ms after",
			Call{Bound: 1000 * ms, Ended: 1001 * ms, Return: 1216 * ms}, nil, true, 215 * ms},
		{"the runtime ended the ctx 100 ms late, returned 120 ms after",
			Call{Bound: 1000 * ms, Ended: 1100 * ms, Return: 1220 * ms}, nil, true, 120 * ms},
		{"returned 150 ms after the end, 60 ms of it stalled",
			Call{Bound: 1000 * ms, Ended: 1000 * ms, Return: 1150 * ms}, []stall{{1050 * ms, 1110 * ms}}, false, 150 * ms},
		{"a stall before the ctx ended is not deducted twice",
			Call{Bound: 1000 * ms, Ended: 1100 * ms, Return: 1250 * ms}, []stall{{1000 * ms, 1100 * ms}}, true, 150 * ms},
	}
	for _, tc := range cases {
		t.Run(tc.desc, func(t *testing.T) {
			tc.c.Op, tc.c.Worker = "mutex.Lock", "s0/mutex"
			if got := tc.c.Late(); got != tc.late {
				t.Errorf("Late() = %v, want %v", got, tc.late)
			}
			rep := newReport(cfg)
			checkCalls(rep, cfg, []Call{tc.c}, tc.stalls)
			if got := len(rep.Violations) > 0; got != tc.violation {
				t.Errorf("violation = %v, want %v (%v)", got, tc.violation, rep.Violations)
			}
			for _, v := range rep.Violations {
				if !strings.Contains(v.Detail, "after this process had ended it") {
					t.Errorf("violation detail %q does not say when the ctx ended", v.Detail)
				}
			}
		})
	}
}

// TestEndProbe: the probe gives 0 for a ctx that had not ended when the
// call returned, and a time no later than the return for one that had.
func TestEndProbe(t *testing.T) {
	rec := newRecorder()

	ctx, cancel := context.WithCancel(context.Background())
	p := rec.probeEnd(ctx)
	if got := p.ended(rec.now()); got != 0 {
		t.Errorf("ctx not ended: ended = %v, want 0", got)
	}
	cancel()

	ctx, cancel = context.WithCancel(context.Background())
	p = rec.probeEnd(ctx)
	cancel()
	<-ctx.Done()
	ret := rec.now()
	got := p.ended(ret)
	if got == 0 || got > ret {
		t.Errorf("ctx ended before the return at %v: ended = %v", ret, got)
	}
}
