package zktest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// Ensemble is a ZooKeeper ensemble of 3 or 5 members (QuorumPeerMain), each
// with its own data directory, client address (a loopback address of its
// own, as a standalone server's) and quorum and election ports on 127.0.0.1.
// It is safe for concurrent use.
type Ensemble struct {
	cfg  config
	inst *install
	pki  *TLS
	dir  string
	stop sync.Once

	reconfig sync.Mutex // held by Reconfig

	mu      sync.Mutex
	members []*Server // the current members, in order
	joining []*Server // members Reconfig has started and not yet added
	nextID  int       // the myid of the next member Reconfig adds
	stopped bool
}

// StartEnsemble starts an ensemble of n members (3 or 5; any n >= 1 works)
// and blocks until every member has a Mode and exactly one is leader, or 60 s
// have passed. On a port clash it retries with new ports. Stop must be
// called.
func StartEnsemble(n int, opts ...Option) (*Ensemble, error) {
	if n < 1 {
		return nil, fmt.Errorf("zktest: ensemble of %d members", n)
	}
	cfg := buildConfig(opts)
	inst, err := cfg.findInstall()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "zktest-ensemble-")
	if err != nil {
		return nil, fmt.Errorf("zktest: %w", err)
	}
	var pki *TLS
	if cfg.tls {
		if pki, err = NewTLS(); err != nil {
			_ = os.RemoveAll(dir)
			return nil, err
		}
	}
	var last error
	for attempt := 0; attempt < portAttempts; attempt++ {
		e, err := tryEnsemble(cfg, inst, dir, n, pki)
		if err == nil {
			return e, nil
		}
		last = err
		if !errors.Is(err, errPortClash) {
			break
		}
	}
	_ = os.RemoveAll(dir)
	return nil, last
}

func tryEnsemble(cfg config, inst *install, dir string, n int, pki *TLS) (*Ensemble, error) {
	// Per member: a client address of its own and ports on 127.0.0.1: one
	// unused, quorum and election, then the secure client ports (WithTLS)
	// after all of those.
	nports := 3 * n
	if pki != nil {
		nports += n
	}
	ports, err := freePorts(nports)
	if err != nil {
		return nil, err
	}
	eps := make([]endpoint, n)
	for i := range eps {
		if eps[i], err = freeEndpoint(0, ""); err != nil {
			return nil, err
		}
	}
	e := &Ensemble{cfg: cfg, inst: inst, pki: pki, dir: dir, nextID: n + 1}
	var peers []string
	for i := 0; i < n; i++ {
		peers = append(peers, peerLine(i+1, ports[3*i+1], ports[3*i+2], eps[i], cfg.reconfigEnabled()))
	}
	for i := 0; i < n; i++ {
		s, err := e.newMember(i+1, eps[i], peers)
		if err != nil {
			return nil, err
		}
		if pki != nil {
			if err := s.enableTLS(pki, ports[3*n+i]); err != nil {
				return nil, err
			}
		}
		if err := s.writeConfig(); err != nil {
			return nil, err
		}
		e.members = append(e.members, s)
	}
	fail := func(err error) (*Ensemble, error) {
		for _, m := range e.members {
			_ = m.Kill()
		}
		return nil, err
	}
	for _, m := range e.members {
		if err := m.startProc(); err != nil {
			return fail(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), cfg.startTimeout)
	defer cancel()
	for _, m := range e.members {
		if err := m.waitReady(ctx); err != nil {
			return fail(err)
		}
	}
	if err := e.WaitReady(ctx); err != nil {
		return fail(err)
	}
	return e, nil
}

// StartEnsembleT is StartEnsemble for a test: it fails the test on error and
// stops the ensemble in t.Cleanup, printing every member's log tail if the
// test failed.
func StartEnsembleT(t TB, n int, opts ...Option) *Ensemble {
	t.Helper()
	e, err := StartEnsemble(n, opts...)
	if err != nil {
		t.Fatalf("%v", err)
	}
	t.Cleanup(func() {
		members := e.current()
		if t.Failed() {
			for _, m := range members {
				logTailOnce(t, m)
			}
		}
		for _, m := range members {
			forgetTails(m)
		}
		if err := e.Stop(); err != nil {
			t.Fatalf("zktest: stop ensemble: %v", err) // in a cleanup: the other cleanups still run
		}
	})
	return e
}

// Member returns member i of the current membership (0-based, below
// len(e.Servers()); the original members' ZooKeeper myid is i+1, Reconfig
// removes members from the list and appends the ones it adds). Kill,
// Restart, Move, Freeze and Thaw act on that member alone; Stop also removes
// its data directory, after which it cannot be restarted. With WithTLS every
// member has the same TLS and its own SecureServers.
func (e *Ensemble) Member(i int) *Server {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.members[i]
}

// Servers returns every current member's client address, in member order.
func (e *Ensemble) Servers() []string {
	members := e.current()
	out := make([]string, len(members))
	for i, m := range members {
		out[i] = m.Addr()
	}
	return out
}

// current returns a copy of the member list.
func (e *Ensemble) current() []*Server {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]*Server(nil), e.members...)
}

// Leader returns the index of the member whose srvr Mode is "leader". Members
// that are killed or frozen are skipped. It fails if no member, or more than
// one, says it leads.
func (e *Ensemble) Leader() (int, error) {
	modes := e.modes(context.Background())
	leader, count := -1, 0
	for i, m := range modes {
		if m == "leader" {
			leader = i
			count++
		}
	}
	if count != 1 {
		return -1, fmt.Errorf("zktest: %d leaders (modes %q)", count, modes)
	}
	return leader, nil
}

// modes asks every running, unfrozen member for its Mode ("" when it does not
// serve or does not answer within a second, "-" when killed or frozen).
func (e *Ensemble) modes(ctx context.Context) []string {
	members := e.current()
	out := make([]string, len(members))
	var wg sync.WaitGroup
	for i, m := range members {
		if !m.running() || m.isFrozen() {
			out[i] = "-"
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			cctx, cancel := context.WithTimeout(ctx, time.Second)
			defer cancel()
			if mode, err := srvrMode(cctx, m.Addr()); err == nil {
				out[i] = mode
			}
		}()
	}
	wg.Wait()
	return out
}

// WaitReady blocks until every running, unfrozen member reports a Mode and
// exactly one of them is leader, or ctx ends. A nil ctx gives an error.
func (e *Ensemble) WaitReady(ctx context.Context) error {
	if ctx == nil {
		return fmt.Errorf("zktest: ensemble: %w: nil context", errBadArgument)
	}
	t := time.NewTimer(0)
	defer t.Stop()
	var modes []string
	for {
		select {
		case <-ctx.Done():
			return fmt.Errorf("zktest: ensemble not ready (modes %q): %w", modes, ctx.Err())
		case <-t.C:
		}
		modes = e.modes(ctx)
		ok, leaders := true, 0
		for _, m := range modes {
			switch m {
			case "":
				ok = false
			case "leader":
				leaders++
			}
		}
		if ok && leaders == 1 {
			return nil
		}
		t.Reset(readyPoll)
	}
}

// Stop kills every member (and any that Reconfig is adding) and removes the
// ensemble's directory. It is idempotent; Reconfig fails after it.
func (e *Ensemble) Stop() error {
	e.mu.Lock()
	e.stopped = true
	all := append(append([]*Server(nil), e.members...), e.joining...)
	e.mu.Unlock()
	var errs []error
	for _, m := range all {
		if err := m.Stop(); err != nil {
			errs = append(errs, err)
		}
	}
	e.stop.Do(func() {
		if err := os.RemoveAll(e.dir); err != nil {
			errs = append(errs, fmt.Errorf("zktest: %w", err))
		}
	})
	return errors.Join(errs...)
}

// newMember creates (without starting it) member myid in its own directory,
// with the "server.N=" lines peers.
func (e *Ensemble) newMember(myid int, ep endpoint, peers []string) (*Server, error) {
	name := fmt.Sprintf("member-%d", myid)
	mdir := filepath.Join(e.dir, name)
	_ = os.RemoveAll(mdir)
	s, err := newServer(e.cfg, e.inst, mdir, true, quorumMain, ep, myid, name)
	if err != nil {
		return nil, err
	}
	s.peers = peers
	s.dynamic = e.cfg.reconfigEnabled()
	return s, nil
}

// peerLine is member myid's "server.N=" line: with its client address when
// the configuration is dynamic, so that /zookeeper/config announces it.
func peerLine(myid, quorumPort, electionPort int, client endpoint, dynamic bool) string {
	l := fmt.Sprintf("server.%d=127.0.0.1:%d:%d", myid, quorumPort, electionPort)
	if dynamic {
		l += fmt.Sprintf(":participant;%s:%d", client.host, client.port)
	}
	return l
}
