package zksession

import "time"

// The requests of call run on goroutines of the Session (see call.go). A
// goroutine started per request would start on a small stack and grow it
// (copying it) on the way into go-zookeeper, for every request: about 6 %
// of the client's CPU under a contended lock (CPU profile of lockload -vs-zk). So a request goes to a
// parked worker whose stack has grown already, and a new worker starts only
// when none is parked. A worker parks again after its request (see below
// for how many stay), and exits when the Session closes. Close waits for
// every worker (workers), after the requests (wg).

// Parked workers: coreIdleWorkers stay parked for as long as the Session
// lives, enough for the requests a process usually has in flight on one
// session; up to maxIdleWorkers more stay parked for idleWorkerLinger after
// their request, so that a service with a lock per key and dozens of
// requests in flight keeps its workers (a new goroutine per request costs
// it a quarter more CPU per lock cycle), while a burst (a thousand calls
// blocked by a partition) leaves no parked goroutines a second after it is
// over. A parked worker keeps its grown stack (the garbage collector shrinks
// it while it is parked).
const (
	coreIdleWorkers  = 4
	maxIdleWorkers   = 256
	idleWorkerLinger = time.Second
)

// runJob runs job on a worker of the Session. The caller holds a count of
// s.wg for the job (taken while the Session was not closing), which keeps
// Close from waiting on s.workers before this worker is counted.
func (s *Session) runJob(job func()) {
	select {
	case s.jobs <- job:
		return
	default:
	}
	s.workers.Add(1)
	go s.worker(job)
}

// worker runs job, then the jobs it is handed while parked.
func (s *Session) worker(job func()) {
	defer s.workers.Done()
	var linger *time.Timer // made the first time this worker lingers
	defer func() {
		if linger != nil {
			linger.Stop()
		}
	}()
	for {
		job()
		job = nil // keep nothing of the last request while parked
		n := s.idle.Add(1)
		if n > maxIdleWorkers {
			s.idle.Add(-1)
			return
		}
		var expired <-chan time.Time
		if n > coreIdleWorkers {
			if linger == nil {
				linger = time.NewTimer(idleWorkerLinger)
			} else {
				linger.Reset(idleWorkerLinger)
			}
			expired = linger.C
		}
		select {
		case job = <-s.jobs:
		case <-s.done:
		case <-expired:
		}
		s.idle.Add(-1)
		if job == nil {
			return // the Session is closing, or the worker lingered long enough
		}
		if linger != nil {
			linger.Stop()
		}
	}
}
