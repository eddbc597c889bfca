// Command example shows zkgrpc at work: a Go gRPC client balancing, through
// the "zk:///" resolver, over the instances of one service that Go and Java
// processes registered in ZooKeeper with Curator's service discovery layout.
//
//   - go-1 and go-2 are Go gRPC servers that register themselves with
//     discovery.Register.
//   - java-1 is registered by a Java process with Apache Curator's
//     ServiceDiscovery (java/RegisterInstance.java, compiled with javac on
//     first use), as a Java service would. Java cannot easily serve gRPC
//     here, so the instance it registers points at a Go gRPC server that the
//     example starts for it; the output says so.
//
// A client dials zk:///greeter with round_robin balancing and prints which
// backend answered each call until every backend has; then go-2 unregisters
// (its server keeps serving: only the resolver stops picking it), and the
// Java process exits (its Curator session closes, and with it the instance's
// ephemeral node); after each step the client's calls go to what remains.
//
// Run it on an embedded ZooKeeper (zktest starts one from the local install
// and stops it on exit):
//
//	cd recipes/discovery/zkgrpc && go run ./example
//
// or on your own ensemble (the instances go under /zkgrpc-example/services):
//
//	go run ./example -zk 10.0.0.1:2181,10.0.0.2:2181
//
// The Java side needs a JDK and Curator 5.4 with curator-x-discovery; on
// Debian or Ubuntu:
//
//	sudo apt-get update && sudo apt-get install -y --no-install-recommends \
//		default-jdk-headless libcurator-recipes-java libcurator-discovery-java libslf4j-java
//
// Without them (or with -java=false) the example says so and runs with the
// Go-registered instances only. Flags: -zk, -java, -calls (calls in a row
// that each step must see), -pace (between two calls), -v (library log on
// stderr), -timeout. It exits 0 when every step happened as described.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/zkrecipes/zkrecipes/recipes/discovery"
	"github.com/zkrecipes/zkrecipes/recipes/discovery/zkgrpc"
	"github.com/zkrecipes/zkrecipes/recipes/discovery/zkgrpc/internal/backend"
	"github.com/zkrecipes/zkrecipes/session"
	"github.com/zkrecipes/zkrecipes/zktest"
)

const (
	base    = "/zkgrpc-example/services"
	service = "greeter"
)

func main() {
	zkFlag := flag.String("zk", "", "ZooKeeper servers, host:port,... (default: an embedded server started by zktest)")
	useJava := flag.Bool("java", true, "register one instance from a Java process with Curator's ServiceDiscovery")
	calls := flag.Int("calls", 6, "calls in a row each step must see")
	pace := flag.Duration("pace", 20*time.Millisecond, "time between two calls")
	verbose := flag.Bool("v", false, "library log on stderr")
	timeout := flag.Duration("timeout", 2*time.Minute, "give up after this long")
	flag.Parse()
	os.Exit(realMain(*zkFlag, config{java: *useJava, calls: *calls, pace: *pace, verbose: *verbose}, *timeout))
}

func realMain(zkFlag string, cfg config, timeout time.Duration) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	out := newPrinter(os.Stdout)
	var servers []string
	if zkFlag != "" {
		servers = strings.Split(zkFlag, ",")
	} else {
		srv, err := zktest.StartServer()
		if err != nil {
			fmt.Fprintln(os.Stderr, "example: starting an embedded ZooKeeper:", err)
			return 1
		}
		defer srv.Stop()
		servers = srv.Servers()
		out.Printf("embedded ZooKeeper (zktest) at %s", strings.Join(servers, ","))
	}
	if cfg.verbose {
		lg, err := zap.NewDevelopment()
		if err == nil {
			cfg.logger = lg
		}
	}
	if err := run(ctx, out, servers, cfg); err != nil {
		fmt.Fprintln(os.Stderr, "example:", err)
		return 1
	}
	return 0
}

// config is what run does.
type config struct {
	java    bool          // register java-1 from a Curator process
	calls   int           // calls in a row each step must see
	pace    time.Duration // between two calls
	verbose bool
	logger  *zap.Logger // nil: silent
}

// backendInfo is a backend and who registered it.
type backendInfo struct {
	srv *backend.Server
	by  string
}

// run is the example: it registers the backends, dials zk:///greeter and
// goes through the steps, printing to out.
func run(ctx context.Context, out *printer, servers []string, cfg config) (err error) {
	if cfg.calls < 1 || cfg.pace < 0 {
		return fmt.Errorf("-calls %d, -pace %v: calls must be positive, pace not negative", cfg.calls, cfg.pace)
	}
	lg := cfg.logger
	if lg == nil {
		lg = zap.NewNop()
	}
	connect := func(name string) (*session.Session, error) {
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		s, err := session.Connect(cctx, servers, session.WithSessionTimeout(5*time.Second), session.WithLogger(lg.Named(name)))
		if err != nil {
			return nil, fmt.Errorf("%s's session: %w", name, err)
		}
		return s, nil
	}
	var cleanups []func()
	defer func() {
		for i := len(cleanups) - 1; i >= 0; i-- {
			cleanups[i]()
		}
	}()

	backends := map[string]*backendInfo{}
	serve := func(name, by string) (*backend.Server, error) {
		s, err := backend.Start(name, "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		cleanups = append(cleanups, s.Stop)
		backends[name] = &backendInfo{srv: s, by: by}
		return s, nil
	}

	// The Go services: each server registers itself.
	goSess, err := connect("go-services")
	if err != nil {
		return err
	}
	cleanups = append(cleanups, func() { _ = goSess.Close() })
	regs := map[string]*discovery.Registration{}
	for _, name := range []string{"go-1", "go-2"} {
		s, err := serve(name, "Go, discovery.Register")
		if err != nil {
			return err
		}
		r, err := discovery.Register(goSess, base, discovery.Instance{Name: service, ID: name, Address: s.Host(), Port: s.Port()})
		if err != nil {
			return err
		}
		cleanups = append(cleanups, func() { _ = r.Close() })
		if err := r.Wait(ctx); err != nil {
			return fmt.Errorf("registering %s: %w", name, err)
		}
		regs[name] = r
		out.Printf("%s serves gRPC on %s; registered by Go (discovery.Register) as %s", name, s.Addr(), r.Path())
	}

	// The Java service: a Curator ServiceDiscovery registers it.
	var java *javaInstance
	if cfg.java {
		s, err := serve("java-1", "Java, Curator's ServiceDiscovery")
		if err != nil {
			return err
		}
		java, err = startJava(ctx, servers, base, service, "java-1", s.Host(), s.Port())
		if err != nil {
			s.Stop()
			delete(backends, "java-1")
			out.Printf("the Java side is not available: %v", err)
			out.Printf("to install it on Debian or Ubuntu, as root: %s", javaInstallCommand)
			out.Printf("going on with the Go-registered instances only")
			java = nil
		} else {
			cleanups = append(cleanups, func() { _ = java.stop() })
			out.Printf("java-1 serves gRPC on %s; registered by a Java process (pid %d) with Curator's ServiceDiscovery as %s", s.Addr(), java.pid, java.path)
			out.Printf("        (java-1's server is a Go gRPC server the example started for it: Java cannot easily serve gRPC here)")
		}
	} else {
		out.Printf("-java=false: the Go-registered instances only")
	}

	// The client: a session of its own, the resolver and round_robin.
	clientSess, err := connect("client")
	if err != nil {
		return err
	}
	cleanups = append(cleanups, func() { _ = clientSess.Close() })
	b, err := zkgrpc.NewBuilder(clientSess, zkgrpc.WithBase(base), zkgrpc.WithLogger(lg))
	if err != nil {
		return err
	}
	target := zkgrpc.Scheme + ":///" + service
	cc, err := grpc.NewClient(target,
		grpc.WithResolvers(b),
		grpc.WithDefaultServiceConfig(`{"loadBalancingConfig":[{"round_robin":{}}]}`),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	cleanups = append(cleanups, func() { _ = cc.Close() })
	out.Printf("client: grpc.NewClient(%q) with zkgrpc's resolver and round_robin", target)

	c := &caller{out: out, cc: cc, pace: cfg.pace, backends: backends, counts: map[string]map[string]int{}}
	names := make([]string, 0, len(backends))
	for name := range backends {
		names = append(names, name)
	}
	sort.Strings(names)

	out.Printf("--- step 1: calls until every backend has answered (%s) ---", strings.Join(names, ", "))
	seen := map[string]bool{}
	if err := c.until(ctx, "every backend", func(name string) bool {
		seen[name] = true
		return len(seen) == len(names)
	}); err != nil {
		return err
	}

	out.Printf("--- step 2: go-2 unregisters (its server keeps serving) ---")
	if err := regs["go-2"].Close(); err != nil {
		return err
	}
	if err := c.untilOnly(ctx, cfg.calls, "go-2 unregistered", without(names, "go-2")...); err != nil {
		return err
	}
	out.Printf("go-2 is still up on %s, but the resolver no longer gives its address", backends["go-2"].srv.Addr())

	if java != nil {
		out.Printf("--- step 3: the Java process exits: Curator unregisters java-1 and its session ends ---")
		if err := java.stop(); err != nil {
			return err
		}
		if err := c.untilOnly(ctx, cfg.calls, "java-1 gone", "go-1"); err != nil {
			return err
		}
	}

	out.Printf("--- summary: calls answered, by step ---")
	for _, step := range c.steps {
		var parts []string
		for _, name := range names {
			if n := c.counts[step][name]; n > 0 {
				parts = append(parts, fmt.Sprintf("%s %d", name, n))
			}
		}
		out.Plain("    %-20s %s", step, strings.Join(parts, ", "))
	}
	out.Printf("done")
	return nil
}

func without(names []string, gone string) []string {
	var out []string
	for _, n := range names {
		if n != gone {
			out = append(out, n)
		}
	}
	return out
}

// caller makes the client's calls and prints who answered each.
type caller struct {
	out      *printer
	cc       *grpc.ClientConn
	pace     time.Duration
	backends map[string]*backendInfo
	n        int
	steps    []string
	counts   map[string]map[string]int // step → backend → calls answered
}

// until calls until done holds after a call (given the backend that
// answered it), 100 calls at most.
func (c *caller) until(ctx context.Context, step string, done func(name string) bool) error {
	seen := map[string]int{}
	c.steps = append(c.steps, step)
	c.counts[step] = seen
	var tick <-chan time.Time
	if c.pace > 0 {
		t := time.NewTicker(c.pace)
		defer t.Stop()
		tick = t.C
	}
	for i := 0; i < 100; i++ {
		if i > 0 && tick != nil {
			select {
			case <-tick:
			case <-ctx.Done():
				return context.Cause(ctx)
			}
		}
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		name, err := backend.Name(cctx, c.cc, grpc.WaitForReady(true))
		cancel()
		c.n++
		if err != nil {
			if ctx.Err() != nil {
				return context.Cause(ctx)
			}
			c.out.Printf("call %3d: failed: %v", c.n, err)
			continue
		}
		seen[name]++
		by := "?"
		if b, ok := c.backends[name]; ok {
			by = b.by
		}
		c.out.Printf("call %3d: answered by %-6s (registered by %s)", c.n, name, by)
		if done(name) {
			return nil
		}
	}
	return fmt.Errorf("step %q: not done after 100 calls (answered: %v)", step, seen)
}

// untilOnly calls until n calls in a row were answered by the backends
// named only.
func (c *caller) untilOnly(ctx context.Context, n int, step string, only ...string) error {
	run := 0
	return c.until(ctx, step, func(name string) bool {
		if slices.Contains(only, name) {
			run++
		} else {
			run = 0
		}
		return run >= n
	})
}

// printer writes lines prefixed with the milliseconds since the start.
type printer struct {
	mu    sync.Mutex
	w     io.Writer
	start time.Time
}

func newPrinter(w io.Writer) *printer { return &printer{w: w, start: time.Now()} }

// Printf prints one timestamped line.
func (p *printer) Printf(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(p.w, "%6d ms  %s\n", time.Since(p.start).Milliseconds(), fmt.Sprintf(format, args...))
}

// Plain prints a line without a timestamp.
func (p *printer) Plain(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(p.w, format+"\n", args...)
}
