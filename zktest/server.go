package zktest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

const (
	standaloneMain = "org.apache.zookeeper.server.ZooKeeperServerMain"
	quorumMain     = "org.apache.zookeeper.server.quorum.QuorumPeerMain"
	// portAttempts bounds how often a start is retried with new ports after
	// a port clash.
	portAttempts = 5
	// readyPoll is the interval between readiness probes.
	readyPoll = 20 * time.Millisecond
)

// errPortClash marks a start that failed because a port was taken; the caller
// retries with new ports.
var errPortClash = errors.New("zktest: port already in use")

// errStopped is returned by Restart after Stop.
var errStopped = errors.New("zktest: server stopped")

// Server is one ZooKeeper JVM: a standalone server from StartServer, or a
// member of an Ensemble. It is safe for concurrent use.
type Server struct {
	cfg       config
	inst      *install
	dir       string // private directory: data, zoo.cfg, log (unless WithLogDir)
	ownDir    bool   // dir is removed by Stop
	dataDir   string
	cfgPath   string
	logPath   string
	mainClass string
	myid      int      // ensemble members only
	peers     []string // the "server.N=" lines of an ensemble member's zoo.cfg
	dynamic   bool     // a member of a reconfig-enabled ensemble
	tlsPort   int      // secure client port on 127.0.0.1, 0 without WithTLS
	tls       *TLS     // nil without WithTLS

	// ep is the client address: a loopback address of the server's own
	// and a port. Move changes it, so it is read without s.mu (Addr is
	// called with s.mu held).
	ep atomic.Pointer[endpoint]

	mu      sync.Mutex
	proc    *process
	frozen  bool
	stopped bool
}

type endpoint struct {
	host string
	port int
}

type process struct {
	pid    int
	exited chan struct{} // closed when the JVM has exited and been reaped
	err    error         // exit status, valid after exited is closed
}

// StartServer starts a standalone ZooKeeper server on a loopback address of
// its own (127.x.y.z, chosen at random; 127.0.0.1 where the system has no
// other loopback address) and a free port, in a new temporary data
// directory, and blocks until it serves (`srvr` reports a Mode) or 60 s have
// passed. If the JVM exits first the error holds the tail of its log; a port
// clash is retried with a new address. Stop must be called to kill the JVM
// and remove its directory.
func StartServer(opts ...Option) (*Server, error) {
	cfg := buildConfig(opts)
	inst, err := cfg.findInstall()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "zktest-")
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
		ep, err := freeEndpoint(0, "")
		if err != nil {
			last = err
			break
		}
		s, err := newServer(cfg, inst, dir, true, standaloneMain, ep, 0, "standalone")
		if err != nil {
			last = err
			break
		}
		if pki != nil {
			ports, err := freePorts(1)
			if err != nil {
				last = err
				break
			}
			if err := s.enableTLS(pki, ports[0]); err != nil {
				last = err
				break
			}
		}
		if err := s.writeConfig(); err != nil {
			last = err
			break
		}
		ctx, cancel := context.WithTimeout(context.Background(), cfg.startTimeout)
		err = s.startAndWait(ctx)
		cancel()
		if err == nil {
			return s, nil
		}
		_ = s.Kill()
		last = err
		if !errors.Is(err, errPortClash) {
			break
		}
	}
	_ = os.RemoveAll(dir)
	return nil, last
}

// StartServerT is StartServer for a test: it fails the test on error and
// stops the server in t.Cleanup, which prints the tail of its log if the
// test failed. Tests that stop, kill, freeze or restart a server use their
// own from StartServerT rather than the shared one.
func StartServerT(t TB, opts ...Option) *Server {
	t.Helper()
	s, err := StartServer(opts...)
	if err != nil {
		t.Fatalf("%v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			logTailOnce(t, s)
		}
		forgetTails(s)
		if err := s.Stop(); err != nil {
			t.Fatalf("zktest: stop %s: %v", s, err) // in a cleanup: the other cleanups still run
		}
	})
	return s
}

func (c *config) findInstall() (*install, error) {
	if c.install != nil {
		return c.install, nil
	}
	return findInstall()
}

func newServer(cfg config, inst *install, dir string, ownDir bool, mainClass string, ep endpoint, myid int, name string) (*Server, error) {
	s := &Server{
		cfg:       cfg,
		inst:      inst,
		dir:       dir,
		ownDir:    ownDir,
		dataDir:   filepath.Join(dir, "data"),
		cfgPath:   filepath.Join(dir, "zoo.cfg"),
		logPath:   filepath.Join(dir, "zookeeper.log"),
		mainClass: mainClass,
		myid:      myid,
	}
	s.ep.Store(&ep)
	if cfg.logDir != "" {
		if err := os.MkdirAll(cfg.logDir, 0o755); err != nil {
			return nil, fmt.Errorf("zktest: %w", err)
		}
		s.logPath = filepath.Join(cfg.logDir, fmt.Sprintf("zookeeper-%s-%d.log", name, ep.port))
	}
	if err := os.MkdirAll(s.dataDir, 0o755); err != nil {
		return nil, fmt.Errorf("zktest: %w", err)
	}
	if myid > 0 {
		if err := os.WriteFile(filepath.Join(s.dataDir, "myid"), []byte(strconv.Itoa(myid)+"\n"), 0o644); err != nil {
			return nil, fmt.Errorf("zktest: %w", err)
		}
	}
	return s, nil
}

// enableTLS gives the server a secure client port served with pki's server
// certificate; call it before writeConfig.
func (s *Server) enableTLS(pki *TLS, port int) error {
	if err := pki.writeStores(s.dir); err != nil {
		return err
	}
	s.tls, s.tlsPort = pki, port
	return nil
}

// writeConfig writes zoo.cfg, with s.peers (the "server.N=..." lines of an
// ensemble member).
func (s *Server) writeConfig() error {
	c := s.cfg
	ep := s.ep.Load()
	var b strings.Builder
	line := func(k, v string) { fmt.Fprintf(&b, "%s=%s\n", k, v) }
	line("tickTime", ms(c.tickTime))
	line("initLimit", "10")
	line("syncLimit", "5")
	line("dataDir", s.dataDir)
	line("clientPort", strconv.Itoa(ep.port))
	line("clientPortAddress", ep.host)
	line("minSessionTimeout", ms(c.minSessionTimeout))
	line("maxSessionTimeout", ms(c.maxSessionTimeout))
	line("admin.enableServer", "false")
	line("4lw.commands.whitelist", "*")
	line("extendedTypesEnabled", "true")
	line("maxClientCnxns", "0")
	if s.tls != nil {
		// Unknown zoo.cfg keys become "zookeeper."+key system properties,
		// which is where ZooKeeper's X509Util reads the ssl.* settings.
		line("serverCnxnFactory", "org.apache.zookeeper.server.NettyServerCnxnFactory")
		line("secureClientPort", strconv.Itoa(s.tlsPort))
		line("secureClientPortAddress", "127.0.0.1")
		line("ssl.keyStore.location", filepath.Join(s.dir, keyStoreFile))
		line("ssl.keyStore.type", "PEM")
		line("ssl.trustStore.location", filepath.Join(s.dir, trustStoreFile))
		line("ssl.trustStore.type", "PEM")
		line("ssl.clientAuth", "need")
	}
	if len(s.peers) > 0 {
		line("reconfigEnabled", "false")
		line("standaloneEnabled", "false")
		for _, p := range s.peers {
			b.WriteString(p + "\n")
		}
	}
	for _, kv := range c.extra {
		line(kv[0], kv[1])
	}
	if err := os.WriteFile(s.cfgPath, []byte(b.String()), 0o644); err != nil {
		return fmt.Errorf("zktest: %w", err)
	}
	return nil
}

func (s *Server) jvmArgs() []string {
	args := []string{
		"-Xshare:auto",
		"-XX:+UseSerialGC",
		"-XX:TieredStopAtLevel=1",
		"-XX:-UsePerfData",
		"-Xms32m",
		"-Xmx128m",
		"-Xss512k",
		"-Djava.awt.headless=true",
		"-Djava.net.preferIPv4Stack=true",
		"-Dzookeeper.admin.enableServer=false",
		"-Dznode.container.checkIntervalMs=" + ms(s.cfg.containerCheck),
		"-Dzookeeper.forceSync=no",
		"-Dzookeeper.snapshot.trust.empty=true",
		"-Dzookeeper.jmx.log4j.disable=true",
		"-Dzookeeper.cnxTimeout=500",
		"-Dzookeeper.electionPortBindRetry=3",
		"-Dorg.slf4j.simpleLogger.showDateTime=true",
		"-Dorg.slf4j.simpleLogger.dateTimeFormat=HH:mm:ss.SSS",
	}
	if s.dynamic {
		args = append(args, "-Dzookeeper.DigestAuthenticationProvider.superDigest="+superDigest())
	}
	args = append(args, s.cfg.jvmFlags...)
	return append(args, "-cp", s.inst.classpathArg(), s.mainClass, s.cfgPath)
}

// spawn starts the JVM. The goroutine that starts it is locked to its OS
// thread and waits for the JVM: Linux delivers the parent-death signal when
// the creating thread exits, so that thread must live exactly as long as the
// JVM. The goroutine ends (taking its thread with it) only after the JVM has
// exited.
func (s *Server) spawn() (*process, error) {
	logf, err := os.OpenFile(s.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("zktest: %w", err)
	}
	defer logf.Close()
	secure := ""
	if s.tls != nil {
		secure = fmt.Sprintf(" (TLS on %d)", s.tlsPort)
	}
	fmt.Fprintf(logf, "### zktest: starting %s on %s%s at %s\n", s.mainClass, s.Addr(), secure, time.Now().Format(time.RFC3339Nano))
	cmd := exec.Command(s.inst.java, s.jvmArgs()...)
	cmd.Dir = s.dir
	cmd.Stdout = logf
	cmd.Stderr = logf
	cmd.SysProcAttr = sysProcAttr()
	p := &process{exited: make(chan struct{})}
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: see above
		if err := cmd.Start(); err != nil {
			started <- err
			p.err = err
			close(p.exited)
			return
		}
		p.pid = cmd.Process.Pid
		started <- nil
		p.err = cmd.Wait()
		close(p.exited)
	}()
	if err := <-started; err != nil {
		return nil, fmt.Errorf("zktest: start %s: %w", s.inst.java, err)
	}
	return p, nil
}

// startAndWait spawns the JVM and waits until it serves.
func (s *Server) startAndWait(ctx context.Context) error {
	if err := s.startProc(); err != nil {
		return err
	}
	return s.waitReady(ctx)
}

func (s *Server) startProc() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return errStopped
	}
	if s.proc != nil {
		return nil
	}
	p, err := s.spawn()
	if err != nil {
		return err
	}
	s.proc = p
	s.frozen = false
	return nil
}

// waitReady polls srvr until it shows a Mode (an ensemble member shows one
// only once it has joined a quorum), the JVM exits, or ctx ends.
func (s *Server) waitReady(ctx context.Context) error {
	s.mu.Lock()
	p := s.proc
	s.mu.Unlock()
	if p == nil {
		return fmt.Errorf("zktest: server %s is not running", s.Addr())
	}
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-p.exited:
			return s.exitError(p)
		case <-ctx.Done():
			return fmt.Errorf("zktest: server %s not ready: %w\n%s", s.Addr(), ctx.Err(), s.logTail(30))
		case <-t.C:
		}
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		mode, err := srvrMode(pctx, s.Addr())
		if err == nil && mode != "" {
			err = s.checkOwner(pctx)
			cancel()
			if err != nil {
				return err
			}
			return nil
		}
		cancel()
		t.Reset(readyPoll)
	}
}

// checkOwner makes sure the server answering on our port is ours (another
// process may have taken the port between our probe and the JVM's bind).
func (s *Server) checkOwner(ctx context.Context) error {
	out, err := FourLetterWord(ctx, s.Addr(), "conf")
	if err != nil {
		return err
	}
	if !strings.Contains(out, s.dataDir) {
		return fmt.Errorf("%w: %s answers for another server", errPortClash, s.Addr())
	}
	return nil
}

func (s *Server) exitError(p *process) error {
	tail := s.logTail(40)
	err := fmt.Errorf("zktest: server %s exited before it was ready (%v); log tail:\n%s", s.Addr(), p.err, tail)
	if strings.Contains(tail, "Address already in use") {
		return fmt.Errorf("%w: %w", errPortClash, err)
	}
	return err
}

// Addr returns the client address, "127.x.y.z:PORT": a loopback address of
// the server's own (127.0.0.1 where the system has no other), which Move
// changes.
func (s *Server) Addr() string {
	ep := s.ep.Load()
	return net.JoinHostPort(ep.host, strconv.Itoa(ep.port))
}

// Servers returns []string{s.Addr()}, ready for zk.Connect.
func (s *Server) Servers() []string { return []string{s.Addr()} }

// SecureAddr returns the TLS client address, "127.0.0.1:PORT" (it matches
// the server certificate and does not move), or "" when the server was
// started without WithTLS.
func (s *Server) SecureAddr() string {
	if s.tls == nil {
		return ""
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.tlsPort))
}

// SecureServers returns []string{s.SecureAddr()}, or nil without WithTLS.
// Connect to it with the configuration from s.TLS().ClientConfig(), e.g.
// session.WithTLS(s.TLS().ClientConfig()).
func (s *Server) SecureServers() []string {
	if s.tls == nil {
		return nil
	}
	return []string{s.SecureAddr()}
}

// TLS returns the CA and certificates the server uses (shared by every
// member of an ensemble), or nil when it was started without WithTLS.
func (s *Server) TLS() *TLS { return s.tls }

// pid returns the process id of the JVM, or 0 when it is not running.
func (s *Server) pid() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		return 0
	}
	select {
	case <-s.proc.exited:
		return 0
	default:
		return s.proc.pid
	}
}

// running reports whether the JVM is running (possibly frozen).
func (s *Server) running() bool { return s.pid() != 0 }

// isFrozen reports whether the JVM is stopped by Freeze.
func (s *Server) isFrozen() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.frozen && s.proc != nil
}

// Kill kills the JVM's process group with SIGKILL and waits for it to exit,
// keeping the data directory so that Restart can bring it back. It is a no-op
// when the JVM is not running.
func (s *Server) Kill() error {
	s.mu.Lock()
	p := s.proc
	s.proc = nil
	s.frozen = false
	s.mu.Unlock()
	if p == nil {
		return nil
	}
	select {
	case <-p.exited:
		return nil
	default:
	}
	err := syscall.Kill(-p.pid, syscall.SIGKILL)
	if err != nil && !errors.Is(err, syscall.ESRCH) {
		_ = syscall.Kill(p.pid, syscall.SIGKILL)
	}
	<-p.exited
	return nil
}

// Stop kills the JVM (as Kill) and removes its temporary directory. It is
// idempotent; Restart fails after it.
func (s *Server) Stop() error {
	err := s.Kill()
	s.mu.Lock()
	already := s.stopped
	s.stopped = true
	s.mu.Unlock()
	if !already && s.ownDir {
		if rerr := os.RemoveAll(s.dir); rerr != nil && err == nil {
			err = fmt.Errorf("zktest: %w", rerr)
		}
	}
	return err
}

// Restart kills the JVM if it runs, starts it again on the same port and data
// directory, and blocks until it serves (for an ensemble member: until it has
// joined as leader or follower) or 60 s have passed.
func (s *Server) Restart() error {
	if err := s.Kill(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.startTimeout)
	defer cancel()
	for {
		err := s.startAndWait(ctx)
		if err == nil {
			return nil
		}
		_ = s.Kill()
		// The port may linger for a moment; retry a port clash on the same
		// port while time remains.
		if !errors.Is(err, errPortClash) || ctx.Err() != nil {
			return err
		}
		t := time.NewTimer(100 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
	}
}

// Move kills the JVM (as Kill) and starts it again with its data on a new
// loopback address of its own and the same port, like a Kubernetes pod that
// comes back with a new IP, and blocks until it serves (a member: until it
// has rejoined the quorum) or 60 s have passed. It returns the new Addr;
// nothing listens on the old one any more, so a connection to it is refused.
// Where the system has no loopback address but 127.0.0.1, the port changes
// instead. An ensemble member moves only its client address: its quorum and
// election ports stay on 127.0.0.1, where the other members' configuration
// names them. A member of an ensemble started with reconfigEnabled=true
// cannot move (the configuration announces its client address): replace it
// with Ensemble.Reconfig. Move fails after Stop.
func (s *Server) Move() (string, error) {
	if s.dynamic {
		return "", fmt.Errorf("zktest: %s is in a reconfig-enabled ensemble: replace it with Ensemble.Reconfig", s)
	}
	s.mu.Lock()
	stopped := s.stopped
	s.mu.Unlock()
	if stopped {
		return "", errStopped
	}
	if err := s.Kill(); err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.startTimeout)
	defer cancel()
	old := *s.ep.Load()
	for attempt := 1; ; attempt++ {
		ep, err := freeEndpoint(old.port, old.host)
		if err != nil {
			return "", err
		}
		s.ep.Store(&ep)
		if err := s.writeConfig(); err != nil {
			return "", err
		}
		err = s.startAndWait(ctx)
		if err == nil {
			return s.Addr(), nil
		}
		_ = s.Kill()
		if !errors.Is(err, errPortClash) || ctx.Err() != nil || attempt >= portAttempts {
			return "", err
		}
	}
}

// Freeze stops the JVM with SIGSTOP: its sockets stay open but it answers
// nothing, like a hung machine.
func (s *Server) Freeze() error { return s.signal(syscall.SIGSTOP, true) }

// Thaw resumes a JVM stopped by Freeze (SIGCONT).
func (s *Server) Thaw() error { return s.signal(syscall.SIGCONT, false) }

func (s *Server) signal(sig syscall.Signal, frozen bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		return fmt.Errorf("zktest: server %s is not running", s.Addr())
	}
	if err := syscall.Kill(-s.proc.pid, sig); err != nil {
		return fmt.Errorf("zktest: signal %v to server %s: %w", sig, s.Addr(), err)
	}
	s.frozen = frozen
	return nil
}

// logTail returns the last n lines of the server's log (stdout and stderr of
// the JVM, across restarts).
func (s *Server) logTail(n int) string {
	f, err := os.Open(s.logPath)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	defer f.Close()
	const max = 256 << 10
	if st, err := f.Stat(); err == nil && st.Size() > max {
		_, _ = f.Seek(st.Size()-max, io.SeekStart)
	}
	b, _ := io.ReadAll(f)
	b = bytes.TrimRight(b, "\n")
	lines := bytes.Split(b, []byte("\n"))
	if n > 0 && len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}

// String returns a short description for logs.
func (s *Server) String() string {
	if s.myid > 0 {
		return fmt.Sprintf("zookeeper member %d at %s", s.myid, s.Addr())
	}
	return "zookeeper at " + s.Addr()
}

// freeEndpoint returns a client address for a server: a random loopback
// address other than avoid (in 127.1.0.1 to 127.254.255.254, which leaves
// out 127.0.0.1, systemd-resolved's 127.0.0.53 and Debian's 127.0.1.1) on
// which port (0: any free port) is free. Where the system has no loopback
// address but 127.0.0.1 (binding another fails), it returns 127.0.0.1 and a
// free port.
func freeEndpoint(port int, avoid string) (endpoint, error) {
	var last error
	for i := 0; i < 16; i++ {
		host := fmt.Sprintf("127.%d.%d.%d", 1+rand.IntN(254), rand.IntN(256), 1+rand.IntN(254))
		if host == avoid {
			continue
		}
		l, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
		if err != nil {
			last = err
			if errors.Is(err, syscall.EADDRNOTAVAIL) {
				break
			}
			continue
		}
		ep := endpoint{host: host, port: l.Addr().(*net.TCPAddr).Port}
		l.Close()
		return ep, nil
	}
	if !errors.Is(last, syscall.EADDRNOTAVAIL) {
		return endpoint{}, fmt.Errorf("zktest: free client address: %w", last)
	}
	ports, err := freePorts(1)
	if err != nil {
		return endpoint{}, err
	}
	return endpoint{host: "127.0.0.1", port: ports[0]}, nil
}

// freePorts returns n distinct free loopback ports. The listeners are all open
// at once so the kernel cannot hand out the same port twice.
func freePorts(n int) ([]int, error) {
	ls := make([]net.Listener, 0, n)
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	ports := make([]int, 0, n)
	for i := 0; i < n; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("zktest: free port: %w", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
