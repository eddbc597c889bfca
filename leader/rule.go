package leader

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cenkalti/backoff/v4"
	"go.uber.org/zap"
)

// The pacing of Run and of a Selector that campaigns again after a term (the
// rule in the package documentation). A term that lasted at least minTerm is
// followed by a new campaign at once; a shorter one by a pause that starts
// at firstPause and doubles after every further short term up to maxPause,
// and that a term of at least minTerm resets.
const (
	minTerm    = time.Second
	firstPause = 100 * time.Millisecond
	maxPause   = 30 * time.Second
)

// pacer decides the pause before the next campaign from how long the last
// term lasted. It is used by one goroutine.
type pacer struct{ bo *backoff.ExponentialBackOff }

func newPacer() *pacer {
	bo := backoff.NewExponentialBackOff()
	bo.InitialInterval = firstPause
	bo.Multiplier = 2
	bo.RandomizationFactor = 0 // the election serializes the work anyway
	bo.MaxInterval = maxPause
	bo.MaxElapsedTime = 0 // never gives up
	bo.Reset()
	return &pacer{bo: bo}
}

// pause returns how long to wait before campaigning again after a term that
// lasted d.
func (p *pacer) pause(d time.Duration) time.Duration {
	if d >= minTerm {
		p.bo.Reset()
		return 0
	}
	return p.bo.NextBackOff()
}

// call runs work under the term's context and returns its error and the
// term's cause at the moment work returned (nil when it returned while still
// leading). A panic is recovered, logged with its stack at error level, and
// returned as an error matching ErrPanicked; it ends the term with that
// error if the term was still live.
func (e *elector) call(t *Term, work func(context.Context) error) (werr, cause error) {
	defer func() {
		if v := recover(); v != nil { // Go ≥ 1.21: panic(nil) recovers a *runtime.PanicNilError
			werr = e.panicError(v)
			cause = t.Err()
			t.end(werr)
			e.lg.Error("leader work panicked", zap.String("node", t.Node()), zap.Int64("token", t.Token()),
				zap.String("panic", fmt.Sprint(v)), zap.Stack("stack"))
		}
	}()
	werr = work(t.Context())
	return werr, t.Err()
}

// panicError turns a recovered panic value into an error matching
// ErrPanicked that carries the value (and wraps it when it is an error).
func (e *elector) panicError(v any) error {
	if err, ok := v.(error); ok {
		return e.errf(fmt.Errorf("%w: %w", ErrPanicked, err))
	}
	return e.errf(fmt.Errorf("%w: %v", ErrPanicked, v))
}

// ended logs the end of a term whose work returned werr, the term's cause
// being cause when it returned (nil: it returned while leading). An error of
// work's own is logged at error level; an error that only reports the end of
// the term (its context's) at info level, with the cause.
func (e *elector) ended(t *Term, werr, cause error) {
	fields := []zap.Field{zap.String("node", t.Node()), zap.Int64("token", t.Token()),
		zap.Duration("lasted", time.Since(t.Started())), zap.NamedError("cause", t.Err())}
	switch {
	case errors.Is(werr, ErrPanicked):
		// Logged with its stack by call.
		e.lg.Info("leadership ended", fields...)
	case werr != nil && !endedBy(werr, cause):
		e.lg.Error("leader work failed", append(fields, zap.Error(werr))...)
	default:
		e.lg.Info("leadership ended", append(fields, zap.Error(werr))...)
	}
}

// endedBy reports whether werr, returned by work after its term had ended
// with cause, merely reports that end: its context's error or cause.
func endedBy(werr, cause error) bool {
	return cause != nil && (errors.Is(werr, context.Canceled) || errors.Is(werr, cause))
}

// waitPause waits for d before the next campaign, or until ctx ends or the
// session is closed (the campaign then returns why).
func (e *elector) waitPause(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	e.lg.Info("term ended early; campaigning again after a pause", zap.Duration("pause", d))
	_ = sleep(ctx, e.sess, d)
}
