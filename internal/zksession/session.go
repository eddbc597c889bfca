package zksession

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/go-zookeeper/zk"
	"go.uber.org/zap"
)

// Bounds used by Close.
const (
	// closeDrainTimeout bounds how long Close lets the guaranteed-delete queue
	// drain before dropping what is left (with an error log).
	closeDrainTimeout = 2 * time.Second
	// closeSubscriberGrace bounds how long Close waits for subscribers to read
	// their last events (Closed included) before it closes their channels.
	closeSubscriberGrace = 500 * time.Millisecond
	// closeZKTimeout bounds the wait for go-zookeeper's goroutines after its
	// Close; they normally end at once because Close also closes the sockets.
	closeZKTimeout = 10 * time.Second
	// closeConnectingWait bounds the wait in closeUnconnected.
	closeConnectingWait = 200 * time.Millisecond
	// connectWarnEvery is how often Connect logs a warning while no session
	// comes.
	connectWarnEvery = 3 * time.Second
)

// Session owns one *zk.Conn and turns go-zookeeper's connection events into
// the states Connected, Suspended, Reconnected, Lost and Closed (see the
// package documentation). It is safe for concurrent use.
type Session struct {
	cfg     *config
	lg      *zap.Logger
	servers []string
	hosts   *hostProvider // resolves servers at each pass; see hosts.go
	conn    *zk.Conn
	zkDone  <-chan zk.Event // closed when go-zookeeper's main goroutine has exited
	wire    *wire

	kick  chan struct{} // wakes the state goroutine (1-buffered)
	stop  chan struct{} // stops the state goroutine
	done  chan struct{} // closed when Close begins
	force chan struct{} // closed when Close stops waiting for subscribers

	evMu         sync.Mutex
	pending      []zkEvent
	onConnecting chan struct{} // closed at the next StateConnecting (see closeUnconnected)

	mu        sync.Mutex
	state     State // 0 until the first session
	connUp    bool  // go-zookeeper has a session and has not disconnected since
	broken    bool  // the wire saw the connection of connUp break (connBroken)
	downSince time.Time
	epoch     *Epoch
	seq       int64
	timeout   time.Duration // negotiated session timeout of the current session
	lease     context.Context
	leaseStop context.CancelCauseFunc
	changed   chan struct{} // closed and replaced at every transition
	subs      map[subscriber]struct{}
	closing   bool
	drainBy   time.Time // set by Close before done is closed
	closedCtx context.Context

	gdMu     sync.Mutex
	watches  watchRegistry
	nodeSubs nodeSubs
	trees    treeSubs
	endHooks endHooks

	gdItems   []*gdItem
	gdPending atomic.Int64 // items queued and not finished (PendingDeletes)
	gdStopped bool         // the delete queue's goroutine has exited
	gdKick    chan struct{}
	gdDone    chan struct{} // closed when the delete queue's goroutine exits

	closeOnce sync.Once
	wg        sync.WaitGroup // state goroutine, requests of call and CreateEphemeral workers
	jobs      chan job       // unbuffered: hands a request to a parked worker (workers.go)
	idle      atomic.Int32   // parked workers
	workers   sync.WaitGroup // request workers (workers.go)
	subWG     sync.WaitGroup // subscription pumps

	// The State hook's gate (see OpenHooks): closed once Connect has
	// returned the Session (hookPub set) or failed (hookDrop set).
	hookGate chan struct{}
	hookOnce sync.Once
	hookPub  any
	hookDrop bool
	// heardAtBreak is when the server was last heard from (monoNow) as the
	// last established connection broke (FaultHeard).
	heardAtBreak atomic.Int64
}

// zkEvent is a session event as recorded by the callback.
type zkEvent struct {
	state   zk.State
	id      int64         // for StateHasSession: session id from the ConnectResponse
	timeout time.Duration // for StateHasSession: negotiated timeout
	at      time.Time
	server  string
}

// Connect creates a Session: it starts go-zookeeper's connection to servers
// (each "host:port", or "host" for port 2181; a single comma-separated string
// is split) and blocks until the first ZooKeeper session exists and the
// credentials are added. The wait is bounded by ctx and by the connect
// timeout (WithConnectTimeout, default DefaultConnectTimeout; 0 leaves ctx
// as the only bound), whichever ends first; then Connect closes everything
// it started and returns an error that names the servers and each one's
// last failure to connect, if any (a lookup error for a name that did not
// resolve, a dial error, a failed TLS handshake, or a server that closed
// the connection before it answered, which is what a TLS-only port does to
// a client without WithTLS), and wraps ctx's error or,
// for the connect timeout, context.DeadlineExceeded. It returns within that
// bound plus a few milliseconds, with one exception it cannot avoid: closing
// go-zookeeper's connection waits up to one second for an answer to its
// closeSession request when no server ever answered, if go-zookeeper's
// reconnect loop happens to stop before that request is queued (a race
// inside zk.Conn.Close). A malformed or empty server list, a bad option or a
// nil ctx fail at once with ErrBadArgument, before anything is started.
//
// While it waits it logs a warning every few seconds naming the servers, the
// time waited and their last failures. The "session established" log line
// gives the negotiated session timeout, which SessionTimeout also returns.
func Connect(ctx context.Context, servers []string, opts ...Option) (*Session, error) {
	s, err := connect(ctx, servers, opts)
	if err != nil && errors.Is(err, ErrBadArgument) {
		return nil, fmt.Errorf("session: connect: %w", err)
	}
	return s, err
}

func connect(ctx context.Context, servers []string, opts []Option) (*Session, error) {
	if ctx == nil {
		return nil, badOption("nil context")
	}
	cfg := defaultConfig()
	for _, o := range opts {
		if o == nil {
			return nil, badOption("nil option")
		}
		if err := o(cfg); err != nil {
			return nil, err
		}
	}
	srv, err := normalizeServers(servers)
	if err != nil {
		return nil, err
	}
	bi, _ := cfg.buildInfo()
	client, err := CheckClient(bi)
	if err != nil {
		return nil, err
	}
	if !client.Known {
		cfg.logger.Debug("the binary records no go-zookeeper version (a library package's test binary?): assuming " + latestVerified)
	}
	closedCtx, cancelClosed := context.WithCancelCause(context.Background())
	cancelClosed(ErrClosed)
	s := &Session{
		cfg:       cfg,
		lg:        cfg.logger,
		servers:   srv,
		wire:      newWire(cfg.dialer),
		kick:      make(chan struct{}, 1),
		stop:      make(chan struct{}),
		done:      make(chan struct{}),
		jobs:      make(chan job),
		force:     make(chan struct{}),
		changed:   make(chan struct{}),
		subs:      make(map[subscriber]struct{}),
		closedCtx: closedCtx,
		gdKick:    make(chan struct{}, 1),
		gdDone:    make(chan struct{}),
		timeout:   cfg.sessionTimeout,
	}
	s.hosts = newHostProvider(cfg.logger, cfg.resolver)
	s.wire.hosts = s.hosts
	s.wire.onBroken = s.connBroken
	if h := cfg.hooks; h != nil && h.Request != nil {
		s.wire.onRequest = h.Request
	}
	s.wire.tls = cfg.tls
	s.wire.handshakeLimit = handshakeBound(cfg.sessionTimeout, len(srv))
	// Until the first session the lease context is canceled: nothing is held.
	s.lease = closedCtx
	conn, events, err := zk.Connect(srv, cfg.sessionTimeout,
		zk.WithEventCallback(s.onEvent),
		zk.WithLogger(zkLogger{s.lg.Named("zk")}),
		zk.WithDialer(s.wire.Dial),
		zk.WithHostProvider(s.hosts))
	if err != nil {
		s.hosts.close()
		return nil, fmt.Errorf("session: connect to %s: %w", strings.Join(srv, ","), err)
	}
	s.conn = conn
	// The channel is not read: go-zookeeper drops events when it is full, and
	// the callback sees all of them. It is closed when go-zookeeper's main
	// goroutine exits, which Close waits for.
	s.zkDone = events
	// Before the state goroutine runs: the hook sees the first Connected.
	s.startStateHook()
	s.wg.Add(1)
	go s.run()
	go s.runDeletes()
	s.startRearm()
	var tracked chan struct{} // closed at the tracker's first read
	if cfg.trackEnsemble {
		tracked = make(chan struct{})
		s.wg.Add(1)
		go s.runTracker(tracked)
	}

	wctx, stop := ctx, context.CancelFunc(func() {})
	if cfg.connectTimeout > 0 {
		wctx, stop = context.WithTimeoutCause(ctx, cfg.connectTimeout, errConnectTimeout)
	}
	defer stop()
	if err := s.waitFirstSession(wctx); err != nil {
		s.dropHooks()
		s.Close()
		return nil, s.connectError(ended(wctx, err))
	}
	for _, cred := range cfg.auth {
		if err := s.addAuth(wctx, cred); err != nil {
			s.dropHooks()
			s.Close()
			return nil, fmt.Errorf("session: connect to %s: add %s credentials: %w", strings.Join(srv, ","), cred.scheme, ended(wctx, err))
		}
	}
	if tracked != nil {
		// The ensemble's member list, read once (a round trip): not a
		// condition of the session, so an end of wctx does not fail Connect.
		select {
		case <-tracked:
		case <-wctx.Done():
		}
	}
	return s, nil
}

// errConnectTimeout is the cause of Connect's wait ended by its connect
// timeout; it wraps context.DeadlineExceeded, which the error matches.
var errConnectTimeout = fmt.Errorf("no session within the connect timeout (WithConnectTimeout): %w", context.DeadlineExceeded)

// ended returns why Connect's wait ctx ended, or err if it has not ended:
// errConnectTimeout, or the caller's ctx error (which errors.Is matches),
// with the cause the caller gave its ctx, if any.
func ended(ctx context.Context, err error) error {
	if ctx.Err() == nil {
		return err
	}
	cause := context.Cause(ctx)
	if cause == errConnectTimeout {
		return cause
	}
	if cause != nil && cause != ctx.Err() {
		return fmt.Errorf("%w (cause: %w)", ctx.Err(), cause)
	}
	return ctx.Err()
}

// waitFirstSession is WaitConnected for Connect. While no session comes it
// logs a warning every connectWarnEvery, so that a Connect against a dead
// address (and, without a deadline, blocked for ever) is not silent.
func (s *Session) waitFirstSession(ctx context.Context) error {
	start := time.Now()
	for {
		wctx, cancel := context.WithTimeout(ctx, connectWarnEvery)
		_, err := s.WaitConnected(wctx)
		cancel()
		if err == nil || ctx.Err() != nil || !errors.Is(err, context.DeadlineExceeded) {
			return err
		}
		fields := []zap.Field{
			zap.Strings("servers", s.servers),
			zap.Duration("waited", time.Since(start).Round(time.Millisecond)),
		}
		if report := s.connectFailures(); report != "" {
			fields = append(fields, zap.String("last_dial_error", report))
		} else {
			fields = append(fields, zap.String("last_dial_error", "none: the TCP connection opens, but no ZooKeeper session comes (not a ZooKeeper server, or one that does not serve, e.g. without a quorum)"))
		}
		_, hasDeadline := ctx.Deadline()
		if !hasDeadline {
			fields = append(fields, zap.String("hint", "Connect's ctx has no deadline: it waits until a server answers"))
		}
		s.lg.Warn("no ZooKeeper session yet, still trying", fields...)
	}
}

func (s *Session) connectError(err error) error {
	msg := fmt.Sprintf("session: connect to %s", strings.Join(s.servers, ","))
	if err != errConnectTimeout {
		msg += ": no session"
	}
	if report := s.connectFailures(); report != "" {
		return fmt.Errorf("%s: %w (%s)", msg, err, report)
	}
	return fmt.Errorf("%s: %w", msg, err)
}

// addAuth adds credentials, retrying connection-level failures; go-zookeeper
// remembers them only once the server accepted them, and sends them again on
// every later connection.
func (s *Session) addAuth(ctx context.Context, cred authCred) error {
	b := s.cfg.retry()
	for {
		if _, err := s.WaitConnected(ctx); err != nil {
			return err
		}
		_, err := call(ctx, s, func(c *zk.Conn) (struct{}, error) { return struct{}{}, c.AddAuth(cred.scheme, cred.auth) }, nil)
		if err == nil || !retryable(err) {
			return err
		}
		d := b.NextBackOff()
		if d < 0 {
			return err
		}
		if err := s.sleep(ctx, d, nil); err != nil {
			return err
		}
	}
}

func normalizeServers(servers []string) ([]string, error) {
	var out []string
	for _, s := range servers {
		for _, part := range strings.Split(s, ",") {
			part = strings.TrimSpace(part)
			if part == "" {
				continue
			}
			addr, err := checkServer(part)
			if err != nil {
				return nil, err
			}
			out = append(out, addr)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: the server list %q is empty", ErrBadArgument, servers)
	}
	return out, nil
}

// checkServer returns the address of the server part, "host:port" or "host"
// (port 2181, as go-zookeeper fills it in), or an error for a malformed one:
// a missing host, a port that is not a number from 1 to 65535, a chroot.
func checkServer(part string) (string, error) {
	if strings.Contains(part, "/") {
		return "", badOption("server %q: a chroot in the server list is not supported, use WithNamespace", part)
	}
	host, port, err := net.SplitHostPort(part)
	if err != nil {
		// No port: a host name or IPv4 address, or an IPv6 address, bare or
		// in brackets; go-zookeeper adds 2181. Anything else is malformed.
		host, port = part, "2181"
		if strings.HasPrefix(part, "[") && strings.HasSuffix(part, "]") {
			host = part[1 : len(part)-1]
		}
		if _, perr := netip.ParseAddr(host); strings.Contains(host, ":") && perr != nil || strings.ContainsAny(host, "[]") {
			return "", badOption("server %q: %v", part, err)
		}
	}
	if host == "" {
		return "", badOption("server %q: no host", part)
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 1 || n > 65535 {
		return "", badOption("server %q: port %q is not a number from 1 to 65535", part, port)
	}
	return net.JoinHostPort(host, port), nil
}

// onEvent is go-zookeeper's event callback. It runs on go-zookeeper's
// goroutine, so it only records the event and wakes the state goroutine.
func (s *Session) onEvent(ev zk.Event) {
	if ev.Type != zk.EventSession {
		s.dispatchNode(ev)
		s.dispatchTree(ev)
		return
	}
	if ev.State == zk.StateDisconnected {
		s.connBroken() // if the wire has not seen it first
	}
	if ev.State == zk.StateConnecting {
		s.evMu.Lock()
		if s.onConnecting != nil {
			close(s.onConnecting)
			s.onConnecting = nil
		}
		s.evMu.Unlock()
	}
	e := zkEvent{state: ev.State, at: time.Now(), server: ev.Server}
	if ev.State == zk.StateHasSession {
		// authenticate() read the ConnectResponse through our wire just before
		// emitting this event, so the sniffed values belong to this session.
		if ci := s.wire.info.Load(); ci != nil {
			e.id, e.timeout = ci.sessionID, ci.timeout
		}
		// The address dialed (go-zookeeper reports the one its host
		// provider named, which may have been resolved again at the dial).
		if a := s.wire.currentAddr(); a != "" {
			e.server = a
		}
	}
	s.evMu.Lock()
	s.pending = append(s.pending, e)
	s.evMu.Unlock()
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// connBroken ends the leases of the current connected interval at once, on
// whichever goroutine first sees the connection break (our wire's failed
// read, the earliest, or go-zookeeper's Disconnected event), when the policy
// says the break ends them: under EndAtDisconnect always, under Standard
// when the lease deadline (see leaseDeadline) has passed already, which is
// the case of a silent connection (the wire breaks it at that deadline, see
// wireConn.heardDeadline). A connection that breaks before its deadline (a
// reset, a server restarting) ends nothing here: the state goroutine ends
// the leases at the deadline unless the same session is back by then.
// When a session is ended on the server at once (an operator's kill), the
// server closes our connection only a round trip before it deletes our
// nodes, and an EndAtDisconnect holder should be told as early as that lead
// allows; the state goroutine, which reports Suspended right after, is
// several goroutine hops later. Only the lock is taken, never held across
// I/O.
func (s *Session) connBroken() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.connUp {
		s.heardAtBreak.Store(s.wire.lastRead.Load())
	}
	if s.connUp && !s.closing && s.epoch != nil && s.epoch.live() && s.endsAtBreak(time.Now()) {
		s.leaseStop(causeErr(ErrSuspended, s.epoch.id))
	}
	if s.connUp && !s.broken {
		// go-zookeeper reports Disconnected only once its send loop has
		// ended, which a write blocked on a full socket can delay: the
		// lease deadline is watched from now on (pendingLeaseDeadline).
		s.broken = true
		select {
		case s.kick <- struct{}{}:
		default:
		}
	}
}

// endsAtBreak reports whether a connection that breaks at now ends the
// leases of the current interval at once. s.mu held.
func (s *Session) endsAtBreak(now time.Time) bool {
	if s.cfg.policy == Standard {
		return !now.Before(s.leaseDeadline())
	}
	// EndAtDisconnect. (SessionOnly's leases follow the epoch: the
	// interval's context is not theirs.)
	return true
}

// leaseDeadline is when the leases of a Standard session end if the
// connection is down by then: two thirds of the negotiated session timeout T
// after the send time of the newest request a server answered (heardSince;
// zero, if there is none, which ends them at once). That server received the
// request no earlier than its send time, and a session expires no sooner
// than T after the server last heard from the client, so a lease ended then
// ends at least T/3 before the session can expire: the margin its holder has
// to stop before anyone else can acquire (docs/design.md: behind a follower
// that dies, or that is cut off from its leader, the leader may have heard
// of the session less recently, and the margin is weaker). A
// reconnection to the same session before the deadline proves the session
// live on the ensemble's leader (a follower revalidates a reconnecting
// session with it), so the leases go on. It is the same moment at which the
// wire gives up on a silent connection (wireConn.heardDeadline). s.mu held.
func (s *Session) leaseDeadline() time.Time {
	hb := s.wire.heardSince()
	if hb.IsZero() {
		return time.Time{}
	}
	return hb.Add(s.timeout * 2 / 3)
}

// run is the state goroutine: it applies recorded events in order and runs
// the local loss timer and, under Standard, the lease deadline (one timer,
// set for the earlier of the two).
func (s *Session) run() {
	defer s.wg.Done()
	var timer *time.Timer
	var timerC <-chan time.Time
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		select {
		case <-s.stop:
			return
		case <-s.kick:
		case <-timerC:
		}
		s.evMu.Lock()
		evs := s.pending
		s.pending = nil
		s.evMu.Unlock()
		for _, ev := range evs {
			s.handle(ev)
		}
		if timer != nil {
			timer.Stop()
			timer, timerC = nil, nil
		}
		var next time.Time
		if deadline, armed := s.pendingLeaseDeadline(); armed {
			if d := time.Until(deadline); d > 0 {
				next = deadline
			} else {
				s.endLeases(deadline)
			}
		}
		if deadline, armed := s.lossDeadline(); armed {
			if d := time.Until(deadline); d > 0 {
				if next.IsZero() || deadline.Before(next) {
					next = deadline
				}
			} else {
				s.localLoss(deadline)
			}
		}
		if !next.IsZero() {
			timer = time.NewTimer(time.Until(next))
			timerC = timer.C
		}
	}
}

// pendingLeaseDeadline returns the lease deadline (see leaseDeadline) while
// the connection is down and the leases of a Standard session are held.
func (s *Session) pendingLeaseDeadline() (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing || (s.connUp && !s.broken) || s.cfg.policy != Standard || s.epoch == nil || !s.epoch.live() || s.lease.Err() != nil {
		return time.Time{}, false
	}
	return s.leaseDeadline(), true
}

// endLeases ends the leases of a Standard session whose connection is still
// down at their deadline.
func (s *Session) endLeases(deadline time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing || (s.connUp && !s.broken) || s.epoch == nil || !s.epoch.live() || s.lease.Err() != nil {
		return
	}
	s.leaseStop(causeErr(ErrSuspended, s.epoch.id))
	s.lg.Warn("connection still down at the lease deadline: leases ended",
		zap.Duration("session_timeout", s.timeout), zap.Time("deadline", deadline), hexID(s.epoch.id))
}

// lossDeadline returns when the local timer declares the current epoch lost:
// one negotiated session timeout after the server last heard from us, as far
// as we can tell. The server expires a session one timeout after it last
// heard from the client (rounded up to its next tick). The last thing we read
// from the server was its answer to something we sent earlier, which it
// received one network delay before it answered: the server may therefore
// have last heard from us up to one server-to-client delay BEFORE our last
// read, and expire the session that much before lastHeard + timeout. (It may
// also have heard from us later, through a ping whose answer was lost; that
// only delays the expiry, and an early Lost is the safe mistake.) go-zookeeper
// does not expose its round-trip times, so the delay is bounded by
// lossMargin: a conservative figure for a LAN, not a measurement; and the
// wire knows a time at which the server certainly heard from us, the send
// time of the newest request it answered (heardSince), which a slow network
// puts well before lastHeard. The deadline counts from the earliest of
// lastHeard - lossMargin, that send time and the disconnect.
func (s *Session) lossDeadline() (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing || s.connUp || s.epoch == nil || !s.epoch.live() {
		return time.Time{}, false
	}
	start := s.downSince
	if heard := s.wire.lastHeard(); !heard.IsZero() {
		if h := heard.Add(-lossMargin(s.timeout)); h.Before(start) {
			start = h
		}
	}
	if hb := s.wire.heardSince(); !hb.IsZero() && hb.Before(start) {
		start = hb
	}
	return start.Add(s.timeout), true
}

// lossMargin is how much earlier than one session timeout after the last read
// the local timer fires (see lossDeadline): a twentieth of the timeout, at
// most 100 ms.
func lossMargin(timeout time.Duration) time.Duration {
	return min(timeout/20, 100*time.Millisecond)
}

func (s *Session) localLoss(deadline time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing || s.connUp || s.epoch == nil || !s.epoch.live() {
		return
	}
	s.loseEpoch(time.Now(), "connection down for the session timeout",
		zap.Duration("session_timeout", s.timeout), zap.Time("since", deadline.Add(-s.timeout)))
}

func (s *Session) handle(ev zkEvent) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		return
	}
	switch ev.state {
	case zk.StateHasSession:
		id := ev.id
		if id == 0 {
			id = s.conn.SessionID()
		}
		if ev.timeout > 0 {
			s.timeout = ev.timeout
		}
		wasUp := s.connUp
		s.connUp, s.broken = true, false
		switch {
		case s.epoch == nil:
			s.startEpoch(id)
			s.emit(Connected, ev.at, "session established", zap.String("server", ev.server),
				zap.Duration("session_timeout", s.timeout))
		case s.epoch.live() && s.epoch.id == id:
			if !wasUp {
				if s.lease.Err() != nil {
					// Ended at the disconnect (EndAtDisconnect) or at its
					// deadline; under Standard a reconnection before the
					// deadline keeps the leases of the interval.
					s.startInterval()
				}
				s.emit(Reconnected, ev.at, "connection restored, same session", zap.String("server", ev.server))
			}
		case s.epoch.live():
			s.loseEpoch(ev.at, "session id changed", zap.String("new_session_id", fmtID(id)))
			s.startEpoch(id)
			s.emit(Reconnected, ev.at, "new session", zap.String("server", ev.server),
				zap.Duration("session_timeout", s.timeout))
		default:
			s.startEpoch(id)
			s.emit(Reconnected, ev.at, "new session", zap.String("server", ev.server),
				zap.Duration("session_timeout", s.timeout))
		}
	case zk.StateDisconnected:
		if !s.connUp {
			return
		}
		s.connUp = false
		s.downSince = ev.at
		if s.epoch != nil && s.epoch.live() {
			if s.cfg.policy != Standard {
				s.leaseStop(causeErr(ErrSuspended, s.epoch.id))
			}
			// Under Standard the leases end at their deadline (run), if the
			// same session is not back by then.
			s.emit(Suspended, ev.at, "connection lost, session may still be alive",
				zap.Duration("session_timeout", s.timeout))
		}
	case zk.StateExpired:
		s.connUp = false
		if s.epoch != nil && s.epoch.live() {
			s.loseEpoch(ev.at, "session expired")
		}
	case zk.StateAuthFailed:
		s.lg.Warn("authentication failed", zap.String("server", ev.server))
	case zk.StateConnectedReadOnly:
		// go-zookeeper v1.0.4 never asks for read-only mode.
		s.lg.Debug("read-only connection reported", zap.String("server", ev.server))
	}
}

// startEpoch begins a new epoch and a new connected interval. s.mu held.
func (s *Session) startEpoch(id int64) {
	s.seq++
	s.epoch = newEpoch(s, s.seq, id)
	s.startInterval()
}

// startInterval begins a lease interval: the lease context of Standard and
// EndAtDisconnect, canceled at the next Suspended under EndAtDisconnect, at
// the lease deadline of a connection still down under Standard, and at Lost
// or Closed. s.mu held.
func (s *Session) startInterval() {
	s.lease, s.leaseStop = context.WithCancelCause(s.epoch.ctx)
}

// loseEpoch ends the current epoch with ErrLost and emits Lost. s.mu held.
func (s *Session) loseEpoch(at time.Time, why string, fields ...zap.Field) {
	ep := s.epoch
	ep.cancel(causeErr(ErrLost, ep.id)) // also cancels the interval's lease context
	s.lease = ep.ctx                    // leases taken now are lost already
	s.emit(Lost, at, "session lost: "+why, fields...)
}

// emit records a transition and hands it to every subscriber. s.mu held.
func (s *Session) emit(st State, at time.Time, msg string, fields ...zap.Field) {
	s.state = st
	ev := Event{State: st, At: at}
	if s.epoch != nil {
		ev.Epoch, ev.SessionID = s.epoch, s.epoch.id
	}
	for sub := range s.subs {
		sub.push(ev)
	}
	close(s.changed)
	s.changed = make(chan struct{})

	fields = append(fields, zap.Stringer("state", st), hexID(ev.SessionID))
	if ev.Epoch != nil {
		fields = append(fields, zap.Int64("epoch", ev.Epoch.seq))
	}
	switch st {
	case Suspended:
		s.lg.Warn(msg, fields...)
	default:
		s.lg.Info(msg, fields...)
	}
}

// Conn returns the raw connection, the same pointer for the Session's life.
// Use full paths (see Path). Do not Close it; use Session.Close.
func (s *Session) Conn() *zk.Conn { return s.conn }

// Logger returns the Session's logger; recipes add their own name and fields.
func (s *Session) Logger() *zap.Logger { return s.lg }

// ACL returns the ACL for nodes that recipes create: the Session's own
// slice, not a copy (a create per acquire would copy it), for go-zookeeper's
// create requests, which only read it. Callers must not modify its
// elements; its capacity is its length, so an append copies.
func (s *Session) ACL() []zk.ACL { return s.cfg.acl[:len(s.cfg.acl):len(s.cfg.acl)] }

// Policy returns the loss policy.
func (s *Session) Policy() LossPolicy { return s.cfg.policy }

// Servers returns the servers the Session connects to.
func (s *Session) Servers() []string { return append([]string(nil), s.servers...) }

// SessionTimeout returns the session timeout negotiated with the server for
// the current session (the requested one until the first session).
func (s *Session) SessionTimeout() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.timeout
}

// State returns the current state (the last transition delivered to
// subscribers).
func (s *Session) State() State {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.state
}

// Epoch returns the current epoch: the live one, or after Lost the one that
// was lost, until the next session begins a new one. Never nil after Connect
// returns.
func (s *Session) Epoch() *Epoch {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.epoch
}

// Changed returns a channel that is closed at the Session's next state
// transition (the one after the current State), for waits that must end
// when the connection goes down or comes back.
func (s *Session) Changed() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.changed
}

// Done returns a channel that is closed when Close begins.
func (s *Session) Done() <-chan struct{} { return s.done }

// leaseContext implements Session.LeaseContext.
func (s *Session) leaseContext() context.Context {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.closing:
		return s.closedCtx
	case s.cfg.policy == SessionOnly:
		return s.epoch.ctx
	default:
		return s.lease
	}
}

// WaitConnected blocks until the connection is up on a live epoch (state
// Connected or Reconnected) and returns that epoch. It returns ctx's error
// (wrapped) when ctx ends first and ErrClosed after Close; a nil ctx gives
// ErrBadArgument. Safe for concurrent use.
func (s *Session) WaitConnected(ctx context.Context) (*Epoch, error) {
	ep, _, err := s.waitLease(ctx)
	return ep, err
}

// waitLease implements Session.WaitLease.
func (s *Session) waitLease(ctx context.Context) (*Epoch, context.Context, error) {
	if ctx == nil {
		return nil, nil, fmt.Errorf("waiting for a connection: %w: nil context", ErrBadArgument)
	}
	for {
		s.mu.Lock()
		if s.closing {
			s.mu.Unlock()
			return nil, nil, ErrClosed
		}
		// A lease context already ended by connBroken means the connection
		// is gone and Suspended is on its way: wait for it.
		if s.connUp && s.epoch != nil && s.epoch.live() && (s.cfg.policy == SessionOnly || s.lease.Err() == nil) {
			ep, lease := s.epoch, s.lease
			if s.cfg.policy == SessionOnly {
				lease = ep.ctx
			}
			s.mu.Unlock()
			return ep, lease, nil
		}
		ch := s.changed
		s.mu.Unlock()
		select {
		case <-ch:
		case <-s.done:
		case <-ctx.Done():
			return nil, nil, fmt.Errorf("waiting for a connection: %w", ctx.Err())
		}
	}
}

// Close ends the Session: it delivers Closed, cancels every epoch and lease
// context with ErrClosed, lets the guaranteed-delete queue drain (at most
// 2 s; what is left is logged and dropped), closes the connection (which ends
// the ZooKeeper session, so its ephemeral nodes go), ends subscriptions, and
// returns after every goroutine it started has exited, and go-zookeeper's
// too (those it waits for at most 10 s, then logs an error and returns: they
// are not its to stop). Idempotent; safe to call concurrently and while
// reconnecting.
func (s *Session) Close() error {
	s.closeOnce.Do(s.close)
	return nil
}

func (s *Session) close() {
	s.mu.Lock()
	s.closing = true
	// The delete queue drains until this instant at the latest.
	s.drainBy = time.Now().Add(closeDrainTimeout)
	close(s.done)
	var id int64
	if s.epoch != nil {
		id = s.epoch.id
		s.epoch.cancel(causeErr(ErrClosed, id))
	}
	if s.leaseStop != nil {
		s.leaseStop(causeErr(ErrClosed, id))
	}
	s.emit(Closed, time.Now(), "session closing")
	for sub := range s.subs {
		sub.closeQueued()
	}
	s.mu.Unlock()

	// The delete queue sees s.done, works until it is empty or its bound, and exits.
	select {
	case <-s.gdDone:
	case <-time.After(closeDrainTimeout + 100*time.Millisecond):
		// A delete is stuck in flight; closing the connection fails it.
	}

	// zk.Conn.Close sends closeSession (so the server drops our ephemerals
	// at once) and waits up to a second for the reply; when the connection is
	// down nobody answers and it takes that second. Closing the sockets then
	// ends go-zookeeper's goroutines even if they wait on a silent server (a
	// handshake waits up to the wire's handshake bound, see handshakeBound).
	// With the connection down (or never up: Connect gave up) nobody would
	// answer go-zookeeper's closeSession, and it would wait a second for
	// the reply: close the sockets first, so that it fails at once. Decide
	// on go-zookeeper's own state now, after the drain: the connection may
	// have come back meanwhile (the state goroutine no longer records
	// transitions once Close began), and then closeSession must be sent so
	// that the server drops our ephemeral nodes at once.
	s.hosts.close() // a lookup in flight ends: go-zookeeper's loop sees its Close
	if s.conn.State() != zk.StateHasSession {
		s.closeUnconnected()
	}
	s.conn.Close()
	s.wire.closeAll()
	<-s.gdDone
	if !drain(s.zkDone, closeZKTimeout) {
		// Its goroutines are not ours to stop; ours is joined either way.
		s.lg.Error("go-zookeeper did not stop in time", zap.Duration("waited", closeZKTimeout))
	}
	close(s.stop)
	s.wg.Wait()
	s.workers.Wait()

	subsDone := make(chan struct{})
	go func() { s.subWG.Wait(); close(subsDone) }()
	select {
	case <-subsDone:
	case <-time.After(closeSubscriberGrace):
		close(s.force)
		<-subsDone
	}
}

// closeUnconnected prepares zk.Conn.Close when no connection is up (Connect
// gave up, or the connection is down). Close queues a closeSession request
// and waits up to a second for its answer. With no server answering, only
// go-zookeeper's reconnect loop answers it (with ErrClosing), and only if the
// request is queued while that loop waits between dials; if the loop is still
// handling a broken handshake, it returns without answering and Close waits
// its full second. So close the sockets (the handshake fails at once, and no
// new dial succeeds), then wait until go-zookeeper reports StateConnecting:
// from there it goes straight to that wait. The wait is bounded; a loop that
// is slower costs Close at most that second, as before.
func (s *Session) closeUnconnected() {
	ch := make(chan struct{})
	s.evMu.Lock()
	s.onConnecting = ch
	s.evMu.Unlock()
	s.wire.closeAll()
	if s.conn.State() == zk.StateConnecting {
		return
	}
	t := time.NewTimer(closeConnectingWait)
	defer t.Stop()
	select {
	case <-ch:
	case <-t.C:
	}
}

// drain discards ch's values until ch is closed (true) or the time limit
// passes (false). It runs on the caller's goroutine, so nothing of ours is
// left behind when go-zookeeper does not stop in time; nobody needs to read
// ch afterwards, since go-zookeeper drops events when it is full rather than
// block.
func drain(ch <-chan zk.Event, limit time.Duration) bool {
	t := time.NewTimer(limit)
	defer t.Stop()
	for {
		select {
		case _, ok := <-ch:
			if !ok {
				return true
			}
		case <-t.C:
			return false
		}
	}
}

// sleep waits d, or returns early with ctx's error, ErrClosed, or ep's error.
func (s *Session) sleep(ctx context.Context, d time.Duration, ep *Epoch) error {
	t := time.NewTimer(d)
	defer t.Stop()
	var lost <-chan struct{}
	if ep != nil {
		lost = ep.Lost()
	}
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-s.done:
		return ErrClosed
	case <-lost:
		return ep.Err()
	}
}

// retryable reports whether err is a connection-level error worth retrying.
func retryable(err error) bool { return IsConnectionError(err) }

// IsConnectionError reports whether err means "the connection failed, the
// request may or may not have reached the server": zk.ErrConnectionClosed,
// zk.ErrNoServer, zk.ErrSessionMoved, and the raw transport errors that
// go-zookeeper v1.0.4 hands to a request when writing it to the socket fails
// (a net.Error such as "broken pipe", io.EOF, ECONNRESET). Such errors are
// retried within the session's epoch; every other error is permanent.
func IsConnectionError(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, zk.ErrConnectionClosed) || errors.Is(err, zk.ErrNoServer) || errors.Is(err, zk.ErrSessionMoved) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNRESET)
}
