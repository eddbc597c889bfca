package zksession

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"net"
	"net/netip"
	"slices"
	"strings"

	"github.com/go-zookeeper/zk"
	"go.uber.org/zap"
)

// configPath is where a ZooKeeper 3.5+ ensemble announces its members.
const configPath = "/zookeeper/config"

// The ensemble tracker follows the members the ensemble announces, as
// Curator's EnsembleTracker does: it reads /zookeeper/config with a watch,
// again at every change and after every reconnection, and hands the
// members' client addresses to the host provider, which tries them first
// (the configured names stay the fallback). When the member the session is
// connected to leaves the ensemble (a reconfig removed it), it closes that
// connection: go-zookeeper reconnects to a member that stays, on the same
// session.
//
// It adopts the announced members only while the session is connected to
// one of them: a client that reaches the ensemble through a proxy or a NAT,
// whose addresses the ensemble does not announce, keeps its configured
// names (Curator would replace them with addresses it may not reach).
// WithEnsembleTracking(false) turns it off altogether. Connect waits for
// the first read (firstRead closed), so that a new Session's requests do not
// race with it.
func (s *Session) runTracker(firstRead chan<- struct{}) {
	defer s.wg.Done()
	var st trackState
	var following bool // the members are followed (and watched)
	var readOn string  // the server of the last completed read, while not following
	for first := true; ; first = false {
		ep, err := s.WaitConnected(context.Background())
		if err != nil {
			return // closed
		}
		changed := s.Changed() // a transition after the read wakes us
		var fired <-chan zk.Event
		var w *Watch
		// While the members are not followed, what decides whether they
		// can be is the server the session is on: a reconnection to the
		// same server reads nothing. While they are, every reconnection
		// reads the config again.
		if on := s.wire.currentAddr(); following || on == "" || on != readOn {
			// A plain read first: the watch is set only while the members
			// are followed, so that a session on a standalone server, on
			// an ensemble that announces no client addresses or behind a
			// proxy pays no watch for it.
			var data []byte
			err = s.Retry(ep.Context(), ep, func(c *zk.Conn) error {
				var err error
				data, _, err = c.Get(configPath)
				return err
			})
			readOn = ""
			switch {
			case err == nil:
				if following = s.applyConfig(data, &st); following {
					err = s.Retry(ep.Context(), ep, func(c *zk.Conn) error {
						var err error
						data, _, w, err = s.GetW(configPath)
						return err
					})
					if err == nil {
						fired = w.Events()
						s.applyConfig(data, &st)
					}
				} else {
					readOn = on
				}
			case errors.Is(err, zk.ErrNoNode), errors.Is(err, zk.ErrNoAuth):
				// A 3.4 server, or a config we may not read: nothing to
				// follow.
				readOn = on
				if ce := s.lg.Check(zap.DebugLevel, "no ensemble config to follow"); ce != nil {
					ce.Write(zap.String("path", configPath), zap.Error(err))
				}
			}
			// Otherwise the epoch ended, the session closed, or an error
			// that the next transition may cure: read again then.
		}
		if first {
			close(firstRead)
		}
		select {
		case ev, ok := <-fired:
			w.Event(ev, ok)
		case <-changed:
		case <-ep.Lost():
		case <-s.done:
			return
		}
	}
}

// trackState is what the tracker remembers between reads.
type trackState struct {
	// members holds the addresses the followed members resolved to (nil
	// while it follows none).
	members map[string]bool
	// removed holds the addresses of members that a reconfig removed while
	// they were followed: a session that lands on one again (a removed
	// member may go on serving, and it stays among the configured servers)
	// moves off it again.
	removed map[string]bool
}

// applyConfig adopts the members of a /zookeeper/config payload if the
// session is connected to one of them, or follows them already, and moves
// off a member that left. It reports whether it follows the members.
func (s *Session) applyConfig(data []byte, st *trackState) bool {
	members := parseEnsembleConfig(data)
	if len(members) == 0 {
		return st.members != nil
	}
	current := s.wire.currentAddr()
	resolved, complete := s.resolveMembers(members)
	isMember := resolved[current]
	left := st.removed[current] || (st.members[current] && !isMember)
	if current == "" || (!isMember && !left && st.members == nil) {
		if ce := s.lg.Check(zap.DebugLevel, "the server we are connected to is not among the members the ensemble announces (a proxy or NAT?): keeping the configured servers"); ce != nil {
			ce.Write(zap.String("server", current), zap.Strings("announced", members))
		}
		return false
	}
	if !equalSets(members, s.hosts.learnedMembers()) {
		s.lg.Info("following the ensemble's members", zap.Strings("members", members))
	}
	s.hosts.setLearned(members)
	if st.removed == nil {
		st.removed = make(map[string]bool)
	}
	if complete {
		for a := range st.members {
			if !resolved[a] {
				st.removed[a] = true
			}
		}
	} else {
		// A member that did not resolve (a DNS hiccup) may still be one:
		// keep what it resolved to before, and conclude nothing of it.
		for a := range st.members {
			resolved[a] = true
		}
	}
	for a := range resolved {
		delete(st.removed, a)
	}
	st.members = resolved
	if left && !resolved[current] {
		st.removed[current] = true
		s.lg.Info("the server we are connected to left the ensemble: moving to a member that stays",
			zap.String("server", current))
		s.wire.dropCurrent()
	}
	return true
}

// resolveMembers returns the addresses ("ip:port") the members resolve to
// now (through the host provider's lookups), and whether every member
// resolved.
func (s *Session) resolveMembers(members []string) (map[string]bool, bool) {
	ctx, cancel := context.WithTimeout(s.hosts.ctx, lookupTimeout)
	defer cancel()
	out := make(map[string]bool)
	complete := true
	for _, a := range s.hosts.lookupAll(ctx, members) {
		if a.lookupErr != nil {
			complete = false
			continue
		}
		out[a.addr] = true
	}
	return out, complete
}

// parseEnsembleConfig returns the client addresses ("host:port") of the
// members in a /zookeeper/config payload: lines
// "server.N=host:quorumPort:electionPort[:role][;[clientHost:]clientPort]".
// A member without a client address is left out; a wildcard client host
// (0.0.0.0, ::) is replaced by the member's quorum host, as Curator does.
func parseEnsembleConfig(data []byte) []string {
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		key, value, ok := strings.Cut(line, "=")
		if !ok || !strings.HasPrefix(key, "server.") {
			continue
		}
		quorum, client, ok := strings.Cut(value, ";")
		if !ok || client == "" {
			continue
		}
		qhost := splitQuorumHost(quorum)
		chost, cport := "", client
		if i := strings.LastIndex(client, ":"); i >= 0 {
			chost, cport = strings.Trim(client[:i], "[]"), client[i+1:]
		}
		if ip, err := netip.ParseAddr(chost); chost == "" || (err == nil && ip.IsUnspecified()) {
			chost = qhost
		}
		if chost == "" || cport == "" {
			continue
		}
		addr := net.JoinHostPort(chost, cport)
		if !slices.Contains(out, addr) {
			out = append(out, addr)
		}
	}
	return out
}

// splitQuorumHost returns the host of "host:port:port[:role]" (an IPv6 host
// in brackets).
func splitQuorumHost(q string) string {
	if strings.HasPrefix(q, "[") {
		if i := strings.Index(q, "]"); i > 0 {
			return q[1:i]
		}
		return ""
	}
	host, _, _ := strings.Cut(q, ":")
	return host
}
