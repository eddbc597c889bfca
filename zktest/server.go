package zktest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
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
	port      int
	myid      int  // ensemble members only
	tlsPort   int  // secure client port, 0 without WithTLS
	tls       *TLS // nil without WithTLS

	mu      sync.Mutex
	proc    *process
	frozen  bool
	stopped bool
}

type process struct {
	pid    int
	exited chan struct{} // closed when the JVM has exited and been reaped
	err    error         // exit status, valid after exited is closed
}

// StartServer starts a standalone ZooKeeper server on 127.0.0.1 and a free
// port, in a new temporary data directory, and blocks until it serves (`srvr`
// reports a Mode) or 60 s have passed. If the JVM exits first the error holds
// the tail of its log; a port clash is retried with a new port. Stop must be
// called to kill the JVM and remove its directory.
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
	nports := 1
	if cfg.tls {
		if pki, err = NewTLS(); err != nil {
			_ = os.RemoveAll(dir)
			return nil, err
		}
		nports = 2
	}
	var last error
	for attempt := 0; attempt < portAttempts; attempt++ {
		ports, err := freePorts(nports)
		if err != nil {
			last = err
			break
		}
		s, err := newServer(cfg, inst, dir, true, standaloneMain, ports[0], 0, "standalone")
		if err != nil {
			last = err
			break
		}
		if pki != nil {
			if err := s.enableTLS(pki, ports[1]); err != nil {
				last = err
				break
			}
		}
		if err := s.writeConfig(nil); err != nil {
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

func newServer(cfg config, inst *install, dir string, ownDir bool, mainClass string, port, myid int, name string) (*Server, error) {
	s := &Server{
		cfg:       cfg,
		inst:      inst,
		dir:       dir,
		ownDir:    ownDir,
		dataDir:   filepath.Join(dir, "data"),
		cfgPath:   filepath.Join(dir, "zoo.cfg"),
		logPath:   filepath.Join(dir, "zookeeper.log"),
		mainClass: mainClass,
		port:      port,
		myid:      myid,
	}
	if cfg.logDir != "" {
		if err := os.MkdirAll(cfg.logDir, 0o755); err != nil {
			return nil, fmt.Errorf("zktest: %w", err)
		}
		s.logPath = filepath.Join(cfg.logDir, fmt.Sprintf("zookeeper-%s-%d.log", name, port))
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

// writeConfig writes zoo.cfg; peers holds "server.N=..." lines for an
// ensemble member.
func (s *Server) writeConfig(peers []string) error {
	c := s.cfg
	var b strings.Builder
	line := func(k, v string) { fmt.Fprintf(&b, "%s=%s\n", k, v) }
	line("tickTime", ms(c.tickTime))
	line("initLimit", "10")
	line("syncLimit", "5")
	line("dataDir", s.dataDir)
	line("clientPort", strconv.Itoa(s.port))
	line("clientPortAddress", "127.0.0.1")
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
	if len(peers) > 0 {
		line("reconfigEnabled", "false")
		line("standaloneEnabled", "false")
		for _, p := range peers {
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
	fmt.Fprintf(logf, "### zktest: starting %s on 127.0.0.1:%d%s at %s\n", s.mainClass, s.port, secure, time.Now().Format(time.RFC3339Nano))
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

// Addr returns the client address, "127.0.0.1:PORT".
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// Servers returns []string{s.Addr()}, ready for zk.Connect.
func (s *Server) Servers() []string { return []string{s.Addr()} }

// SecureAddr returns the TLS client address, "127.0.0.1:PORT", or "" when
// the server was started without WithTLS.
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
