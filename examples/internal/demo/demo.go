// Package demo is the scaffolding the example programs share: the -zk,
// -connect-timeout, -v and -timeout flags (and, with MainTLS, the -tls-*
// flags), an embedded ZooKeeper (zktest) when
// -zk is not given and a first connection check when it is, Ctrl-C and SIGTERM
// handling, a printer of timestamped lines for a person to follow, and small
// helpers to wait on events with a clear message when they do not come.
package demo

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/zkrecipes/zkrecipes/session"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// Env is what an example runs on.
type Env struct {
	// Servers are the ZooKeeper addresses: the embedded server's, or -zk's.
	Servers []string
	// Options are the session options every session of the example needs:
	// session.WithTLS with the configuration of the -tls-* flags (see
	// MainTLS), or none.
	Options []session.Option
	// Embedded is the embedded server, nil with -zk.
	Embedded *zktest.Server
	// Logger is for the library (a no-op logger unless -v).
	Logger *zap.Logger
	// Out prints the example's timestamped lines.
	Out *Printer
	// Verbose is -v.
	Verbose bool
}

// Printer writes lines prefixed with the milliseconds elapsed since the
// program started. It is safe for concurrent use.
type Printer struct {
	mu    sync.Mutex
	w     io.Writer
	start time.Time
}

// NewPrinter returns a printer to w whose clock starts now.
func NewPrinter(w io.Writer) *Printer { return &Printer{w: w, start: time.Now()} }

// Printf prints one line (a trailing newline is added).
func (p *Printer) Printf(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	ms := time.Since(p.start).Milliseconds()
	fmt.Fprintf(p.w, "%6d ms  %s\n", ms, strings.TrimRight(fmt.Sprintf(format, args...), "\n"))
}

// Plain prints a line without a timestamp (tables, summaries).
func (p *Printer) Plain(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(p.w, format+"\n", args...)
}

// Since returns the milliseconds elapsed since the printer's start at t.
func (p *Printer) Since(t time.Time) int64 { return t.Sub(p.start).Milliseconds() }

// ErrInterrupted is the cause of the run context when a signal arrived.
var ErrInterrupted = errors.New("interrupted")

// DefaultConnectTimeout is the default of -connect-timeout: how long the
// first connection to the -zk ensemble may take before the program gives up.
const DefaultConnectTimeout = 5 * time.Second

// Main parses the command line (the program registers its own flags on
// flag.CommandLine before calling Main), sets up the Env, calls run and exits:
// 0 when run returns nil, 1 with the error on stderr otherwise, 130 after
// Ctrl-C or SIGTERM. The embedded server is stopped on every path. With -zk,
// Main first opens one session to the given servers (bounded by
// -connect-timeout) and fails, naming the addresses and the last dial error,
// if none comes. run's ctx ends at the first signal (cause ErrInterrupted) or
// after -timeout; a second signal kills the program at once (the embedded JVM
// dies with it).
func Main(name string, defaultTimeout time.Duration, run func(ctx context.Context, env *Env) error) {
	mainFlags(name, defaultTimeout, run, nil)
}

// MainTLS is Main with the -tls-ca, -tls-cert, -tls-key and -tls-server-name
// flags too, for an example whose sessions all take env.Options: with them,
// every session (the -zk check included) connects over TLS (see TLSConfig).
// They need -zk: the embedded server serves plaintext.
func MainTLS(name string, defaultTimeout time.Duration, run func(ctx context.Context, env *Env) error) {
	var f TLSFiles
	flag.StringVar(&f.CA, "tls-ca", "", "with -zk: connect over TLS, trusting the CA certificate(s) in this PEM file (default: the system's roots when another -tls-* flag is given)")
	flag.StringVar(&f.Cert, "tls-cert", "", "with -zk: the client certificate (PEM) to present over TLS; ZooKeeper requires one by default")
	flag.StringVar(&f.Key, "tls-key", "", "with -zk: the private key (PEM) of -tls-cert")
	flag.StringVar(&f.ServerName, "tls-server-name", "", "with -zk: the name every server's certificate must carry (default: any of the -zk hosts)")
	mainFlags(name, defaultTimeout, run, &f)
}

func mainFlags(name string, defaultTimeout time.Duration, run func(ctx context.Context, env *Env) error, tlsFiles *TLSFiles) {
	zkFlag := flag.String("zk", "", "use this ZooKeeper ensemble (host:port,...) instead of an embedded server")
	connectTimeout := flag.Duration("connect-timeout", DefaultConnectTimeout, "with -zk: give up when no ZooKeeper session comes within this long")
	verbose := flag.Bool("v", false, "print the library's log (zap, debug level) on stderr")
	timeout := flag.Duration("timeout", defaultTimeout, "give up (and fail) after this long")
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "%s: unexpected arguments %q\n", name, flag.Args())
		flag.Usage()
		os.Exit(2)
	}
	c := config{
		name: name, zk: *zkFlag, connectTimeout: *connectTimeout, verbose: *verbose, timeout: *timeout,
		stdout: os.Stdout, stderr: os.Stderr,
	}
	if tlsFiles != nil {
		c.tls = *tlsFiles
	}
	os.Exit(mainRun(c, run))
}

// config is what Main hands to mainRun: the flags and where to print.
type config struct {
	name           string
	zk             string
	connectTimeout time.Duration
	verbose        bool
	timeout        time.Duration
	tls            TLSFiles
	stdout, stderr io.Writer
}

func mainRun(c config, run func(ctx context.Context, env *Env) error) int {
	name := c.name
	stderr := c.stderr
	if c.connectTimeout <= 0 {
		c.connectTimeout = DefaultConnectTimeout
	}
	out := NewPrinter(c.stdout)
	env := &Env{Out: out, Logger: zap.NewNop(), Verbose: c.verbose}
	if c.verbose {
		lg := zap.New(zapcore.NewCore(
			zapcore.NewConsoleEncoder(zap.NewDevelopmentEncoderConfig()),
			zapcore.Lock(zapcore.AddSync(stderr)),
			zapcore.DebugLevel), zap.AddCaller(), zap.Development())
		defer lg.Sync() //nolint:errcheck // stderr
		env.Logger = lg
	}

	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	sigDone := make(chan struct{})
	var sigWG sync.WaitGroup
	sigWG.Add(1)
	go func() {
		defer sigWG.Done()
		select {
		case s := <-sigs:
			out.Printf("%v: stopping (press Ctrl-C again to kill)", s)
			cancel(ErrInterrupted)
			signal.Stop(sigs) // a second signal kills the program
		case <-sigDone:
			signal.Stop(sigs)
		}
	}()
	defer sigWG.Wait()
	defer close(sigDone)
	if c.timeout > 0 {
		var stop context.CancelFunc
		ctx, stop = context.WithTimeoutCause(ctx, c.timeout, fmt.Errorf("-timeout %v reached", c.timeout))
		defer stop()
	}

	if c.zk != "" {
		for _, s := range strings.Split(c.zk, ",") {
			if s = strings.TrimSpace(s); s != "" {
				env.Servers = append(env.Servers, s)
			}
		}
		if len(env.Servers) == 0 {
			fmt.Fprintf(stderr, "%s: -zk %q: no address (want host:port,...)\n", name, c.zk)
			return 2
		}
		over := ""
		if c.tls.Set() {
			cfg, err := TLSConfig(c.tls, env.Servers)
			if err != nil {
				fmt.Fprintf(stderr, "%s: %v\n", name, err)
				return 2
			}
			env.Options = append(env.Options, session.WithTLS(cfg))
			over = " over TLS"
		}
		out.Printf("connecting to ZooKeeper at %s%s (-connect-timeout %v)", strings.Join(env.Servers, ","), over, c.connectTimeout)
		if err := checkServers(ctx, env, c.connectTimeout); err != nil {
			if errors.Is(context.Cause(ctx), ErrInterrupted) {
				fmt.Fprintf(stderr, "%s: interrupted\n", name)
				return 130
			}
			fmt.Fprintf(stderr, "%s: %v\n", name, err)
			return 1
		}
	} else {
		if c.tls.Set() {
			fmt.Fprintf(stderr, "%s: the -tls-* flags need -zk (the embedded server serves plaintext)\n", name)
			return 2
		}
		out.Printf("starting an embedded ZooKeeper (give -zk host:port,... to use your own)")
		// ZooKeeper's own interval for reaping empty containers (a
		// minute), not zktest's half second for tests: at half a second
		// the server reaps a busy lock's directory whenever it finds it
		// between a release and the next create, and every create after
		// that pays for the directory again.
		srv, err := zktest.StartServer(zktest.WithJVMFlags("-Dznode.container.checkIntervalMs=60000"))
		if err != nil {
			fmt.Fprintf(stderr, "%s: %v\n", name, err)
			return 1
		}
		defer func() {
			if err := srv.Stop(); err != nil {
				fmt.Fprintf(stderr, "%s: stopping ZooKeeper: %v\n", name, err)
			}
		}()
		env.Embedded = srv
		env.Servers = srv.Servers()
		version := ""
		sctx, scancel := context.WithTimeout(ctx, 5*time.Second)
		if m, err := zktest.Mntr(sctx, srv.Addr()); err == nil {
			// "3.8.0-${mvngit.commit.id}, built on ..." -> "3.8.0"
			v, _, _ := strings.Cut(m["zk_version"], ",")
			v, _, _ = strings.Cut(v, "-")
			version = " " + v
		}
		scancel()
		out.Printf("ZooKeeper%s is serving on %s", version, srv.Addr())
	}

	err := run(ctx, env)
	switch {
	case err == nil:
		return 0
	case errors.Is(context.Cause(ctx), ErrInterrupted):
		fmt.Fprintf(stderr, "%s: interrupted\n", name)
		return 130
	case ctx.Err() != nil:
		fmt.Fprintf(stderr, "%s: %v: %v\n", name, context.Cause(ctx), err)
		return 1
	default:
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return 1
	}
}

// checkServers opens one session straight to env.Servers (the examples then
// connect through their own fault proxies, whose errors would name the
// proxy's port, not the user's address) and closes it. It fails within
// connectTimeout with an error that names the servers and the last dial
// error, instead of letting the example wait in silence.
func checkServers(ctx context.Context, env *Env, connectTimeout time.Duration) error {
	cctx, cancel := context.WithTimeoutCause(ctx, connectTimeout,
		fmt.Errorf("-connect-timeout %v reached", connectTimeout))
	defer cancel()
	t0 := time.Now()
	opts := append([]session.Option{session.WithLogger(env.Logger.Named("check"))}, env.Options...)
	sess, err := session.Connect(cctx, env.Servers, opts...)
	if err != nil {
		if cause := context.Cause(cctx); cause != nil && !errors.Is(cause, ErrInterrupted) && !errors.Is(err, cause) {
			err = fmt.Errorf("%w (%v)", err, cause)
		}
		return err // it names the servers
	}
	defer sess.Close()
	env.Out.Printf("ZooKeeper at %s answers: a session opened in %s (session timeout %v negotiated)",
		strings.Join(env.Servers, ","), Ms(time.Since(t0)), sess.SessionTimeout())
	return nil
}

// Wait blocks until ch yields a value or is closed, or ctx ends; the error
// then says what was being waited for.
func Wait[T any](ctx context.Context, ch <-chan T, what string) (T, error) {
	select {
	case v := <-ch:
		return v, nil
	case <-ctx.Done():
		var zero T
		return zero, fmt.Errorf("waiting for %s: %w", what, context.Cause(ctx))
	}
}

// Hex formats a zxid or session id as ZooKeeper's logs do.
func Hex(v int64) string { return fmt.Sprintf("0x%x", v) }

// Ms formats a duration in milliseconds with one decimal.
func Ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond)) }
