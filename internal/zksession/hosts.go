package zksession

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"net"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
)

// Resolver looks up the addresses of a host name; *net.Resolver satisfies
// it (net.DefaultResolver is the default).
type Resolver interface {
	LookupHost(ctx context.Context, host string) (addrs []string, err error)
}

// lookupTimeout bounds the lookups of one pass (they run concurrently), as
// go-zookeeper bounds its own.
const lookupTimeout = 3 * time.Second

// hostProvider is the Session's zk.HostProvider. go-zookeeper's default
// resolves every name once, in Connect, fails Connect if any name does not
// resolve, and never resolves again, so a server that comes back on a new
// address under the same name (a Kubernetes pod) is never reached. This one
// resolves the names for every pass over the servers (ZOOKEEPER-2184's
// rule: after a pass in which none answered, at the first dial of the
// next), skips a name that does not resolve while another address can be
// tried, and puts first the members the ensemble announces (tracker.go),
// with the configured names as the fallback.
//
// go-zookeeper calls Init, Next and Connected from its connecting
// goroutine; the Session's other goroutines read and set the rest.
type hostProvider struct {
	lg       *zap.Logger
	resolver Resolver
	ctx      context.Context // ends at Close: a lookup in flight returns
	stop     context.CancelFunc

	mu         sync.Mutex
	configured []string // "host:port", as given to Connect
	learned    []string // "host:port" the ensemble announces (nil: none adopted)
	pass       []hostAddr
	next       int  // index in pass of the next address to try
	tried      int  // addresses tried since the pass began or the last connection
	stale      bool // learned changed: resolve before the next attempt
	deferred   bool // a pass is due: resolve when go-zookeeper dials (target)
	gen        int  // counts setLearned calls
	failures   map[string]error
	lookupErrs map[string]string // name -> last lookup error logged (to log a change once)
	seed       uint64            // orders the addresses of a pass (rank)
}

// rank is addr's place in this Session's order of addresses.
func (h *hostProvider) rank(addr string) uint64 {
	f := fnv.New64a()
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], h.seed)
	f.Write(b[:])
	f.Write([]byte(addr))
	return f.Sum64()
}

// hostAddr is one address to try: addr is "ip:port" (or the name itself when
// lookupErr is set: the name did not resolve), name the entry it came from.
type hostAddr struct {
	addr, name string
	lookupErr  error
}

func newHostProvider(lg *zap.Logger, r Resolver) *hostProvider {
	ctx, stop := context.WithCancel(context.Background())
	return &hostProvider{
		lg: lg, resolver: r, ctx: ctx, stop: stop, seed: rand.Uint64(),
		failures:   make(map[string]error),
		lookupErrs: make(map[string]string),
	}
}

// Init records the servers; nothing is resolved before the first attempt.
func (h *hostProvider) Init(servers []string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.configured = append([]string(nil), servers...)
	return nil
}

// Len returns the number of addresses in the current pass (at least one).
func (h *hostProvider) Len() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return max(len(h.pass), 1)
}

// Next returns the next address to try. Once every address of the pass has
// been tried without an answer (counting the one last connected to, as
// go-zookeeper's own provider does), a new pass begins with retryStart
// true: go-zookeeper then fails the requests waiting to be sent
// (zk.ErrNoServer) and pauses a second before it dials. The names are
// resolved again when it dials, after that pause (see target), so that a
// server that came back under its name during the pause is dialed at once.
// So after a disconnect the other servers are tried at once, and the one
// just lost a second later, under the address its name has then.
func (h *hostProvider) Next() (server string, retryStart bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.pass != nil && h.tried >= len(h.pass) && !h.stale {
		// The address go-zookeeper reports until the dial (target may dial
		// another, if the names moved meanwhile).
		h.deferred, h.tried = true, 0
		return h.pass[h.next].addr, true
	}
	// The first pass, or new members announced: resolve now, and try them
	// at once.
	if h.pass == nil || h.stale {
		h.deferred = false
		h.resolveLocked()
	}
	return h.takeLocked().addr, false
}

// resolveLocked begins a new pass, resolving the names with h.mu released
// meanwhile. A pass begun because the learned members changed starts with
// them; otherwise the pass goes on from where the last one stopped. h.mu
// held.
func (h *hostProvider) resolveLocked() {
	learned, configured, gen, stale := h.learned, h.configured, h.gen, h.stale
	h.mu.Unlock()
	pass := h.resolve(learned, configured)
	h.mu.Lock()
	h.pass, h.tried = pass, 0
	// A setLearned during the lookups leaves the next pass stale.
	h.stale = h.gen != gen
	if stale || h.next >= len(pass) {
		h.next = 0
	}
}

// takeLocked returns the next address of the pass and counts it tried.
// h.mu held.
func (h *hostProvider) takeLocked() hostAddr {
	a := h.pass[h.next]
	h.next = (h.next + 1) % len(h.pass)
	h.tried++
	return a
}

// target returns what to dial for server, a value Next returned: the
// address itself, or, for the first dial of a pass that Next deferred, the
// first address of that pass, resolved now; the name it came from (the name
// TLS verifies); and the lookup error to fail the dial with at once when
// the name did not resolve.
func (h *hostProvider) target(server string) (addr, name string, lookupErr error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.deferred {
		h.deferred = false
		h.resolveLocked()
		a := h.takeLocked()
		return a.addr, a.name, a.lookupErr
	}
	for _, a := range h.pass {
		if a.addr == server {
			return a.addr, a.name, a.lookupErr
		}
	}
	return server, server, nil
}

// nameOf returns the name that addr, a dialed address, came from.
func (h *hostProvider) nameOf(addr string) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, a := range h.pass {
		if a.addr == addr {
			return a.name
		}
	}
	return addr
}

// Connected is called when a connection has a session: the pass starts
// again from there, the connected address counting as tried.
func (h *hostProvider) Connected() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.tried = 1
}

// resolve returns the addresses of a pass: those of the learned members
// first, then those of the configured names not among them, each group in
// an order random to this Session (so that clients spread over the
// servers) but the same at every pass (so that, as with go-zookeeper's own
// provider, the pass after a pause goes on where the last one stopped). A
// name that does not resolve is left out, with a log line; when no name
// resolves, the pass holds the names themselves with their lookup errors,
// which the dialer returns at once (see target).
func (h *hostProvider) resolve(learned, configured []string) []hostAddr {
	ctx, cancel := context.WithTimeout(h.ctx, lookupTimeout)
	defer cancel()
	first := h.lookupAll(ctx, learned)
	rest := h.lookupAll(ctx, configured)
	// An address that a configured name gives keeps that name (the one TLS
	// verifies, the one the user knows), even when the ensemble announces
	// it under another.
	byAddr := make(map[string]string)
	for _, a := range rest {
		if a.lookupErr == nil {
			byAddr[a.addr] = a.name
		}
	}
	for i, a := range first {
		if n, ok := byAddr[a.addr]; ok && a.lookupErr == nil {
			first[i].name = n
		}
	}
	seen := make(map[string]bool)
	var pass, failed []hostAddr
	for _, group := range [][]hostAddr{first, rest} {
		var ok []hostAddr
		for _, a := range group {
			switch {
			case a.lookupErr != nil:
				failed = append(failed, a)
			case !seen[a.addr]:
				seen[a.addr] = true
				ok = append(ok, a)
			}
		}
		sort.SliceStable(ok, func(i, j int) bool { return h.rank(ok[i].addr) < h.rank(ok[j].addr) })
		pass = append(pass, ok...)
	}
	if len(pass) == 0 {
		pass = failed
	}
	if len(pass) == 0 { // no server at all: cannot happen (Connect checks the list)
		pass = []hostAddr{{addr: "", name: "", lookupErr: errors.New("no servers")}}
	}
	return pass
}

// lookupAll resolves the names concurrently; the result keeps their order,
// each name giving one entry per address or one entry with its error.
func (h *hostProvider) lookupAll(ctx context.Context, names []string) []hostAddr {
	results := make([][]hostAddr, len(names))
	var wg sync.WaitGroup
	for i, name := range names {
		host, port, err := net.SplitHostPort(name)
		if err != nil {
			results[i] = []hostAddr{{addr: name, name: name, lookupErr: err}}
			continue
		}
		if _, err := netip.ParseAddr(host); err == nil {
			results[i] = []hostAddr{{addr: name, name: name}}
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			addrs, err := h.resolver.LookupHost(ctx, host)
			if err == nil && len(addrs) == 0 {
				err = &net.DNSError{Err: "no addresses", Name: host, IsNotFound: true}
			}
			h.noteLookup(name, err)
			if err != nil {
				results[i] = []hostAddr{{addr: name, name: name, lookupErr: err}}
				return
			}
			for _, a := range addrs {
				results[i] = append(results[i], hostAddr{addr: net.JoinHostPort(a, port), name: name})
			}
		}()
	}
	wg.Wait()
	var out []hostAddr
	for _, r := range results {
		out = append(out, r...)
	}
	return out
}

// noteLookup records a name's lookup outcome, logging a failure when it is
// new or different from the last one logged (a name that stays unresolvable
// is not logged at every pass) and a recovery once.
func (h *hostProvider) noteLookup(name string, err error) {
	if h.ctx.Err() != nil {
		return // closing: the lookup was cut short, the name is not at fault
	}
	h.mu.Lock()
	prev, had := h.lookupErrs[name]
	if err == nil {
		delete(h.lookupErrs, name)
	} else {
		h.lookupErrs[name] = err.Error()
		h.failures[name] = err
	}
	h.mu.Unlock()
	switch {
	case err != nil && (!had || prev != err.Error()):
		h.lg.Warn("server name does not resolve, skipping it", zap.String("server", name), zap.Error(err))
	case err == nil && had:
		h.lg.Info("server name resolves again", zap.String("server", name))
	}
}

// noteFailure records why an attempt on addr failed, for Connect's error.
func (h *hostProvider) noteFailure(addr string, err error) {
	name := h.nameOf(addr)
	h.mu.Lock()
	defer h.mu.Unlock()
	h.failures[name] = err
}

// failureReport names each server's last failure, the configured ones in
// the order given (order), for Connect's error; "" when none was recorded.
func (h *hostProvider) failureReport(order []string) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var parts []string
	names := append([]string(nil), order...)
	for _, n := range h.learned {
		if _, ok := h.failures[n]; ok && !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	for _, n := range names {
		if err := h.failures[n]; err != nil {
			parts = append(parts, n+": "+err.Error())
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return strings.Join(parts, "; ")
}

// setLearned adopts the members the ensemble announces (nil: none) for the
// next passes; the pass under way ends, so that the next attempt resolves
// them at once.
func (h *hostProvider) setLearned(members []string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if equalSets(h.learned, members) {
		return
	}
	h.learned = append([]string(nil), members...)
	h.stale = true
	h.gen++
}

// learnedMembers returns the members adopted from the ensemble's config.
func (h *hostProvider) learnedMembers() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.learned...)
}

func (h *hostProvider) close() { h.stop() }

// equalSets reports whether a and b hold the same strings, in any order.
func equalSets(a, b []string) bool {
	x, y := slices.Clone(a), slices.Clone(b)
	slices.Sort(x)
	slices.Sort(y)
	return slices.Equal(x, y)
}

// connectFailures returns the per-server report for Connect's error, or the
// wire's last dial error when no server has a failure of its own recorded.
func (s *Session) connectFailures() string {
	if r := s.hosts.failureReport(s.servers); r != "" {
		return r
	}
	if derr := s.wire.dialError(); derr != nil {
		return fmt.Sprintf("last dial error: %v", derr)
	}
	return ""
}

// Server returns the address of the server the Session dialed last: the one
// it is connected to while it is up.
func (s *Session) Server() string { return s.wire.currentAddr() }
