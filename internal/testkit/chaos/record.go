package chaos

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zkrecipes/zkrecipes/recipes"
	"github.com/zkrecipes/zkrecipes/session"
)

// The recipes of a run, also the names of their paths under Root.
const (
	RecipeMutex     = "mutex"
	RecipeReentrant = "reentrant"
	RecipeNonFair   = "nonfair"
	RecipeRWLock    = "rwlock"
	RecipeSemaphore = "semaphore"
	RecipeLeader    = "leader"
)

// Recipes returns every recipe of a run, in report order.
func Recipes() []string {
	return []string{RecipeMutex, RecipeReentrant, RecipeNonFair, RecipeRWLock, RecipeSemaphore, RecipeLeader}
}

// guarded reports whether holders of recipe write the fenced resource (every
// exclusive hold: the semaphore's three holders have nothing to fence).
func guarded(recipe string) bool { return recipe != RecipeSemaphore }

// commits reports whether holders of recipe also write with their lease's
// Commit (a write guarded by the server's check of the lease's node): every
// fenced recipe but the non-fair lock, whose node name every holder shares.
func commits(recipe string) bool { return guarded(recipe) && recipe != RecipeNonFair }

// commitSuffix names the resource of the guarded commits, and their writes'
// recipe in the report ("mutex+commit").
const commitSuffix = "+commit"

// Interval is one hold as its holder saw it: from the moment the acquire
// returned (or leader work started) to the moment the holder stopped (just
// before its release call, or when it noticed Done). Times are monotonic
// offsets from the start of the run.
type Interval struct {
	ID        int
	Recipe    string
	Write     bool // exclusive side: every hold except the semaphore's and rwlock reads
	Worker    string
	Session   int
	Policy    session.LossPolicy
	SessionID int64
	Node      string // full server path of the holder's node
	Token     int64
	Start     time.Duration
	End       time.Duration
	Lost      bool   // ended by a loss (Done), not by the holder's release
	Cause     string // the lease's Err when lost
	Shutdown  bool   // ended because the run stopped
	Open      bool   // never ended (a worker that did not return)
	// SessionEnded: the session of SessionID was no longer live when the
	// run stopped (lost, expired or killed at some point), so its nodes may
	// have gone while the hold lasted; set by the run before the check.
	SessionEnded bool
}

// causeSessionLost is the Cause of a hold ended by its session's loss.
const causeSessionLost = "session lost"

// causeOf names why a lease ended, from the cause of its context (the first
// reason, which later updates such as "lost after suspended" do not change).
func causeOf(err error) string {
	switch {
	case err == nil:
		return "no cause"
	case errors.Is(err, session.ErrSuspended):
		return "suspended"
	case errors.Is(err, session.ErrLost):
		return causeSessionLost
	case errors.Is(err, recipes.ErrNodeDeleted):
		return "node deleted"
	case errors.Is(err, session.ErrClosed):
		return "closed"
	}
	return "other: " + err.Error()
}

// FaultEvent is one injected fault.
type FaultEvent struct {
	Round    int
	Kind     string
	At, End  time.Duration // injection began, fault healed (or injection returned)
	Sessions []int         // session indices hit; nil: every session (member faults)
	// SessionID and Blind, for kills: the session killed, and whether the
	// kill went through a member that did not serve it (no warning possible).
	SessionID int64
	Blind     bool
	Node      string // third-party delete: the node deleted
	Detail    string
}

// hits reports whether the fault can have affected session i.
func (f *FaultEvent) hits(i int) bool {
	if f.Sessions == nil {
		return true
	}
	for _, s := range f.Sessions {
		if s == i {
			return true
		}
	}
	return false
}

// Write is one attempt of a holder to write the fenced resource.
type Write struct {
	Interval  int // the writer's Interval.ID
	Recipe    string
	Token     int64
	At        time.Duration
	Accepted  bool
	Version   int32 // the resource's version after an accepted write
	Refused   bool  // the stored token was higher than ours
	Stored    int64 // the stored token when refused
	LeaseLive bool  // the writer's lease had not ended when the answer came
	Err       string
}

// Call is one blocking call bounded by a context.
type Call struct {
	Op     string
	Worker string
	Start  time.Duration
	Return time.Duration
	Bound  time.Duration // when its ctx was due to end (deadline or the run's stop)
	// Ended is when this process had ended the ctx (see endProbe): later
	// than Bound by the delay of the runtime's timer and scheduler; 0 if
	// the ctx had not ended when the call returned.
	Ended time.Duration
	Err   string
}

// Overshoot is how long after its ctx was due to end the call returned (0
// if before): the raw figure.
func (c Call) Overshoot() time.Duration {
	if c.Return > c.Bound {
		return c.Return - c.Bound
	}
	return 0
}

// Late is how long after its ctx had ended in this process the call
// returned: from Ended, or from Bound if that is later (0 if the ctx had not
// ended when the call returned). No code can see a ctx end before the
// runtime ends it, so this is what the library is judged by.
func (c Call) Late() time.Duration {
	if c.Ended == 0 {
		return 0
	}
	if from := max(c.Bound, c.Ended); c.Return > from {
		return c.Return - from
	}
	return 0
}

// endProbe records when a call's ctx ends in this process. A context's
// deadline is a runtime timer whose function cancels it; until that has run,
// ctx.Done is open and ctx.Err is nil, so nothing in the library can know
// that the ctx has ended. On a busy machine that timer runs late: timers
// live on the scheduler's Ps, and a P whose thread the kernel does not run
// runs none of its timers while the other P (where the canary may be) runs
// on, so the canary does not see that delay. The probe is a function
// registered with context.AfterFunc on the call's ctx: the cancellation
// starts it on a goroutine, and it notes the time. That goroutine is readied
// by the same cancellation as the call's own, so a delay before it runs is
// one the call's goroutine has too, not one of the library.
type endProbe struct {
	rec  *recorder
	at   atomic.Int64 // the time it ended, 0 until known
	stop func() bool
}

// probeEnd starts watching ctx; call ended once the call has returned.
func (r *recorder) probeEnd(ctx context.Context) *endProbe {
	p := &endProbe{rec: r}
	p.stop = context.AfterFunc(ctx, func() { p.at.CompareAndSwap(0, int64(r.now())) })
	return p
}

// ended returns when the ctx ended in this process, for a call that
// returned at ret: 0 if it had not ended by then. If it had but the probe
// ran only after ret (or has not run yet), the call returned before a
// goroutine readied by the same end of ctx: it counts as returned when the
// ctx ended (ended returns ret).
func (p *endProbe) ended(ret time.Duration) time.Duration {
	if p.stop() {
		return 0 // not ended: the probe will not run
	}
	p.at.CompareAndSwap(0, int64(ret))
	return min(time.Duration(p.at.Load()), ret)
}

// ServerSample is a snapshot of the semaphore's lease nodes, taken by the
// observer, that held more nodes than the maximum.
type ServerSample struct {
	At       time.Duration
	Path     string
	Count    int
	Children []string // in sequence order
	// Excess are the full paths of the nodes past the maximum in sequence
	// order: each was created while at least SemaphoreMax other lease nodes
	// existed, so none of them may be a holder's node.
	Excess []string
}

// recorder collects what happens during a run. It is safe for concurrent use.
type recorder struct {
	base time.Time

	mu        sync.Mutex
	intervals []*Interval
	faults    []*FaultEvent
	writes    []Write
	calls     []Call
	server    []ServerSample
	semMax    int // most lease nodes seen at once on the server
	semReads  int
	stopAt    time.Duration
	stopped   bool
}

func newRecorder() *recorder { return &recorder{base: time.Now()} }

// now returns the monotonic time since the run began.
func (r *recorder) now() time.Duration { return time.Since(r.base) }

func (r *recorder) begin(iv Interval) *Interval {
	r.mu.Lock()
	defer r.mu.Unlock()
	iv.ID = len(r.intervals)
	iv.Open = true
	p := &iv
	r.intervals = append(r.intervals, p)
	return p
}

// end closes iv at time at.
func (r *recorder) end(iv *Interval, at time.Duration, lost bool, cause error, shutdown bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	iv.End = at
	iv.Open = false
	iv.Lost = lost
	iv.Shutdown = shutdown
	if lost {
		iv.Cause = causeOf(cause)
	}
}

// holding reports whether session i holds something now.
func (r *recorder) holding(i int) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for j := len(r.intervals) - 1; j >= 0; j-- {
		if iv := r.intervals[j]; iv.Open && iv.Session == i {
			return true
		}
	}
	return false
}

func (r *recorder) fault(f *FaultEvent) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.faults = append(r.faults, f)
}

func (r *recorder) write(w Write) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.writes = append(r.writes, w)
}

func (r *recorder) call(c Call) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, c)
}

func (r *recorder) serverCount(path string, children []string, max int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.semReads++
	if len(children) > r.semMax {
		r.semMax = len(children)
	}
	if len(children) > max {
		c := append([]string(nil), children...)
		sortBySeq(c)
		var excess []string
		for _, n := range c[max:] {
			excess = append(excess, path+"/"+n)
		}
		r.server = append(r.server, ServerSample{At: r.now(), Path: path, Count: len(children), Children: c, Excess: excess})
	}
}

// stop records the moment the run tells its workers to stop.
func (r *recorder) stop() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.stopped {
		r.stopped, r.stopAt = true, r.now()
	}
}

// bound returns when a ctx with the given deadline ends: its deadline or the
// run's stop, whichever came first.
func (r *recorder) bound(deadline time.Time) time.Duration {
	b := deadline.Sub(r.base)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped && r.stopAt < b {
		return r.stopAt
	}
	return b
}

// stopTime returns when the run stopped its workers (ok false before).
func (r *recorder) stopTime() (time.Duration, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stopAt, r.stopped
}

// snapshot copies everything recorded so far.
func (r *recorder) snapshot() ([]Interval, []FaultEvent, []Write, []Call, []ServerSample, int, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	ivs := make([]Interval, len(r.intervals))
	for i, iv := range r.intervals {
		ivs[i] = *iv
	}
	fs := make([]FaultEvent, len(r.faults))
	for i, f := range r.faults {
		fs[i] = *f
	}
	return ivs, fs, append([]Write(nil), r.writes...), append([]Call(nil), r.calls...),
		append([]ServerSample(nil), r.server...), r.semMax, r.semReads
}
