package zktest

import (
	"context"
	"crypto/sha1"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"
)

// The superuser that Reconfig authenticates as: reconfig writes
// /zookeeper/config, whose ACL lets only a superuser write. Members of a
// reconfig-enabled ensemble get its digest on their command line.
const (
	superUser     = "zktest"
	superPassword = "zktest-reconfig"
)

func superDigest() string {
	h := sha1.Sum([]byte(superUser + ":" + superPassword))
	return superUser + ":" + base64.StdEncoding.EncodeToString(h[:])
}

// Reconfig changes the membership of an ensemble started with
// WithConfig("reconfigEnabled", "true") (whose configuration is dynamic and
// announces each member's client address in /zookeeper/config): it starts
// add new members as joiners, each on a client address of its own and with
// the next unused myid, runs one incremental reconfig that adds them and
// removes the members in remove (as a superuser), waits until every member
// of the new configuration has committed it and the ensemble has a leader,
// then stops the removed members (removing their directories). It returns
// the new members, which Member and Servers then list after the members
// that stayed; Stop stops them with the ensemble.
//
// It blocks until that is done, ctx ends or 60 s have passed; on an error
// the joiners are stopped, and the membership may or may not have changed
// (Servers still lists the members before the call). Calls are serialized.
// Replacing members one at a time keeps a quorum throughout, as it does
// outside tests.
func (e *Ensemble) Reconfig(ctx context.Context, add int, remove ...*Server) ([]*Server, error) {
	if ctx == nil {
		return nil, fmt.Errorf("zktest: reconfig: %w: nil context", errBadArgument)
	}
	if !e.cfg.reconfigEnabled() {
		return nil, fmt.Errorf("zktest: reconfig: %w: the ensemble was started without WithConfig(\"reconfigEnabled\", \"true\")", errBadArgument)
	}
	e.reconfig.Lock()
	defer e.reconfig.Unlock()
	e.mu.Lock()
	stopped := e.stopped
	e.mu.Unlock()
	if stopped {
		return nil, fmt.Errorf("zktest: reconfig: %w", errStopped)
	}
	members := e.current()
	var stay []*Server
	var leaving []string
	for _, m := range members {
		if slices.Contains(remove, m) {
			leaving = append(leaving, strconv.Itoa(m.myid))
		} else {
			stay = append(stay, m)
		}
	}
	if add < 0 || len(leaving) != len(remove) || len(stay)+add == 0 || add+len(remove) == 0 {
		return nil, fmt.Errorf("zktest: reconfig: %w: add %d, remove %v of members %v", errBadArgument, add, remove, members)
	}
	ctx, cancel := context.WithTimeout(ctx, e.cfg.startTimeout)
	defer cancel()

	admin := stay
	if len(admin) == 0 {
		admin = members
	}
	conn, err := e.superConn(ctx, admin)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	cur, err := readConfig(conn)
	if err != nil {
		return nil, err
	}

	joiners, err := e.startJoiners(ctx, add, cur)
	defer func() {
		e.mu.Lock()
		e.joining = nil
		e.mu.Unlock()
	}()
	stopJoiners := func() {
		for _, j := range joiners {
			_ = j.Stop()
		}
	}
	if err != nil {
		stopJoiners()
		return nil, err
	}
	var joining []string
	for _, j := range joiners {
		joining = append(joining, j.peers[len(j.peers)-1])
	}
	if err := incrementalReconfig(ctx, conn, joining, leaving); err != nil {
		stopJoiners()
		return nil, err
	}
	next := append(stay, joiners...)
	if err := waitConfig(ctx, next); err != nil {
		stopJoiners()
		return nil, err
	}
	e.mu.Lock()
	if e.stopped { // Stop ran meanwhile and stopped the joiners too
		e.mu.Unlock()
		return nil, fmt.Errorf("zktest: reconfig: %w", errStopped)
	}
	e.members, e.joining = next, nil
	e.mu.Unlock()
	var errs []error
	for _, m := range remove {
		if err := m.Stop(); err != nil {
			errs = append(errs, err)
		}
	}
	if err := e.WaitReady(ctx); err != nil {
		errs = append(errs, err)
	}
	return joiners, errors.Join(errs...)
}

// superConn connects to servers and authenticates as the superuser.
func (e *Ensemble) superConn(ctx context.Context, servers []*Server) (*zk.Conn, error) {
	var addrs []string
	for _, s := range servers {
		addrs = append(addrs, s.Addr())
	}
	wait := 10 * time.Second
	if d, ok := ctx.Deadline(); ok && time.Until(d) < wait {
		wait = time.Until(d)
	}
	conn, err := dialRaw(addrs, 10*time.Second, wait, discardLogger{})
	if err != nil {
		return nil, fmt.Errorf("zktest: reconfig: %w", err)
	}
	if err := conn.AddAuth("digest", []byte(superUser+":"+superPassword)); err != nil {
		conn.Close()
		return nil, fmt.Errorf("zktest: reconfig: authenticate: %w", err)
	}
	return conn, nil
}

// readConfig returns the "server.N=" lines of /zookeeper/config, as the
// member conn is connected to has them (after a sync).
func readConfig(conn *zk.Conn) ([]string, error) {
	if _, err := conn.Sync("/zookeeper/config"); err != nil {
		return nil, fmt.Errorf("zktest: reconfig: sync: %w", err)
	}
	data, _, err := conn.Get("/zookeeper/config")
	if err != nil {
		return nil, fmt.Errorf("zktest: reconfig: read /zookeeper/config: %w", err)
	}
	return serverLines(string(data)), nil
}

// serverLines returns the "server.N=" lines of a configuration (as in
// /zookeeper/config or the answer to conf).
func serverLines(cfg string) []string {
	var out []string
	for _, l := range strings.Split(cfg, "\n") {
		if l = strings.TrimSpace(l); strings.HasPrefix(l, "server.") {
			out = append(out, l)
		}
	}
	return out
}

// startJoiners starts n new members whose configuration is cur plus
// themselves, and waits until they serve (as non-voting followers of the
// current leader).
func (e *Ensemble) startJoiners(ctx context.Context, n int, cur []string) ([]*Server, error) {
	var joiners []*Server
	for i := 0; i < n; i++ {
		ep, err := freeEndpoint(0, "")
		if err != nil {
			return joiners, err
		}
		nports := 2
		if e.pki != nil {
			nports++
		}
		ports, err := freePorts(nports)
		if err != nil {
			return joiners, err
		}
		e.mu.Lock()
		if e.stopped {
			e.mu.Unlock()
			return joiners, fmt.Errorf("zktest: reconfig: %w", errStopped)
		}
		myid := e.nextID
		e.nextID++
		line := peerLine(myid, ports[0], ports[1], ep, true)
		s, err := e.newMember(myid, ep, append(slices.Clip(cur), line))
		if err == nil {
			e.joining = append(e.joining, s) // from here on, Stop stops it too
		}
		e.mu.Unlock()
		if err != nil {
			return joiners, err
		}
		if e.pki != nil {
			if err := s.enableTLS(e.pki, ports[2]); err != nil {
				return joiners, err
			}
		}
		if err := s.writeConfig(); err != nil {
			return joiners, err
		}
		if err := s.startProc(); err != nil {
			return joiners, err
		}
		joiners = append(joiners, s)
	}
	for _, j := range joiners {
		if err := j.waitReady(ctx); err != nil {
			return joiners, err
		}
	}
	return joiners, nil
}

// incrementalReconfig runs the reconfig, retrying while the leader answers
// that the new configuration has no quorum yet (the joiners are still
// syncing) or that another reconfig is in progress, and after connection
// errors.
func incrementalReconfig(ctx context.Context, conn *zk.Conn, joining, leaving []string) error {
	t := time.NewTimer(0)
	defer t.Stop()
	var err error
	for {
		select {
		case <-ctx.Done():
			return fmt.Errorf("zktest: reconfig +%q -%q: %w (last error: %v)", joining, leaving, ctx.Err(), err)
		case <-t.C:
		}
		_, err = conn.IncrementalReconfig(joining, leaving, -1)
		switch {
		case err == nil:
			return nil
		case reconfigBusy(err), errors.Is(err, zk.ErrConnectionClosed), errors.Is(err, zk.ErrNoServer):
			t.Reset(50 * time.Millisecond)
		default:
			return fmt.Errorf("zktest: reconfig +%q -%q: %w", joining, leaving, err)
		}
	}
}

// reconfigBusy reports whether err is ZooKeeper's NewConfigNoQuorum (-13) or
// ReconfigInProgress (-14), which go-zookeeper does not name: it returns
// them as "unknown error: -13".
func reconfigBusy(err error) bool {
	msg := err.Error()
	return strings.HasSuffix(msg, "error: -13") || strings.HasSuffix(msg, "error: -14")
}

// waitConfig waits until every member of next answers conf with exactly
// next's myids.
func waitConfig(ctx context.Context, next []*Server) error {
	want := make([]string, len(next))
	for i, m := range next {
		want[i] = "server." + strconv.Itoa(m.myid) + "="
	}
	t := time.NewTimer(0)
	defer t.Stop()
	var last string
	for {
		select {
		case <-ctx.Done():
			return fmt.Errorf("zktest: reconfig: the new configuration %q was not committed everywhere: %w (last seen: %s)", want, ctx.Err(), last)
		case <-t.C:
		}
		done := true
		for _, m := range next {
			cctx, cancel := context.WithTimeout(ctx, time.Second)
			out, err := FourLetterWord(cctx, m.Addr(), "conf")
			cancel()
			if err != nil {
				done, last = false, fmt.Sprintf("%s: %v", m, err)
				break
			}
			got := serverLines(out)
			if !sameIDs(got, want) {
				done, last = false, fmt.Sprintf("%s: %q", m, got)
				break
			}
		}
		if done {
			return nil
		}
		t.Reset(readyPoll)
	}
}

// sameIDs reports whether lines are one "server.N=" line for each prefix in
// want.
func sameIDs(lines, want []string) bool {
	if len(lines) != len(want) {
		return false
	}
	for _, w := range want {
		if !slices.ContainsFunc(lines, func(l string) bool { return strings.HasPrefix(l, w) }) {
			return false
		}
	}
	return true
}
