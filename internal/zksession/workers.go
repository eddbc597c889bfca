package zksession

// The requests of call run on goroutines of the Session (see call.go). A
// goroutine started per request would start on a small stack and grow it
// (copying it) on the way into go-zookeeper, for every request: about 6 %
// of the client's CPU under a contended lock (CPU profile of lockload -vs-zk). So a request goes to a
// parked worker whose stack has grown already, and a new worker starts only
// when none is parked. A worker parks again after its request, unless
// maxIdleWorkers are parked already, and exits when the Session closes.
// Close waits for every worker (workers), after the requests (wg).

// maxIdleWorkers bounds the workers a Session keeps parked: enough for the
// requests a process usually has in flight on one session, few enough that a
// burst (a thousand calls blocked by a partition) does not stay as parked
// goroutines once it is over. A parked worker keeps its grown stack (the
// garbage collector shrinks it while it is parked).
const maxIdleWorkers = 4

// job is a request for a worker: a pending call (see launch), which is its
// own job, so that a request costs no closure.
type job interface{ run() }

// runJob runs j on a worker of the Session. The caller holds a count of
// s.wg for the job (taken while the Session was not closing), which keeps
// Close from waiting on s.workers before this worker is counted.
func (s *Session) runJob(j job) {
	select {
	case s.jobs <- j:
		return
	default:
	}
	s.workers.Add(1)
	go s.worker(j)
}

// worker runs j, then the jobs it is handed while parked.
func (s *Session) worker(j job) {
	defer s.workers.Done()
	for {
		j.run()
		j = nil // keep nothing of the last request while parked
		if s.idle.Add(1) > maxIdleWorkers {
			s.idle.Add(-1)
			return
		}
		select {
		case j = <-s.jobs:
		case <-s.done:
		}
		s.idle.Add(-1)
		if j == nil {
			return // the Session is closing
		}
	}
}
