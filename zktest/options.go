package zktest

import (
	"fmt"
	"time"
)

// Option configures StartServer and StartEnsemble.
type Option func(*config)

type config struct {
	tickTime          time.Duration
	minSessionTimeout time.Duration
	maxSessionTimeout time.Duration
	logDir            string
	jvmFlags          []string
	extra             [][2]string
	startTimeout      time.Duration
	install           *Install
	containerCheck    time.Duration
	tls               bool
}

func defaultConfig() config {
	return config{
		tickTime:          200 * time.Millisecond,
		minSessionTimeout: 500 * time.Millisecond,
		maxSessionTimeout: 60 * time.Second,
		startTimeout:      60 * time.Second,
		containerCheck:    500 * time.Millisecond,
	}
}

func buildConfig(opts []Option) config {
	c := defaultConfig()
	for _, o := range opts {
		if o != nil {
			o(&c)
		}
	}
	return c
}

// WithTickTime sets zoo.cfg's tickTime (default 200 ms).
func WithTickTime(d time.Duration) Option { return func(c *config) { c.tickTime = d } }

// WithMinSessionTimeout sets zoo.cfg's minSessionTimeout (default 500 ms).
func WithMinSessionTimeout(d time.Duration) Option {
	return func(c *config) { c.minSessionTimeout = d }
}

// WithMaxSessionTimeout sets zoo.cfg's maxSessionTimeout (default 60 s, so
// clients get the timeout they ask for).
func WithMaxSessionTimeout(d time.Duration) Option {
	return func(c *config) { c.maxSessionTimeout = d }
}

// WithLogDir writes the server logs into dir (kept after Stop) instead of the
// server's temporary directory (removed by Stop).
func WithLogDir(dir string) Option { return func(c *config) { c.logDir = dir } }

// WithJVMFlags appends flags to the JVM command line (after zktest's own, so
// they win).
func WithJVMFlags(flags ...string) Option {
	return func(c *config) { c.jvmFlags = append(c.jvmFlags, flags...) }
}

// WithConfig adds a line key=value to the generated zoo.cfg (after zktest's
// own lines).
func WithConfig(key, value string) Option {
	return func(c *config) { c.extra = append(c.extra, [2]string{key, value}) }
}

// WithStartTimeout bounds how long a start or restart waits for readiness
// (default 60 s, generous for loaded machines).
func WithStartTimeout(d time.Duration) Option { return func(c *config) { c.startTimeout = d } }

// WithInstall uses in instead of FindInstall.
func WithInstall(in *Install) Option { return func(c *config) { c.install = in } }

// WithContainerCheckInterval sets how often the server reaps empty container
// and expired TTL nodes (default 500 ms; ZooKeeper's default is 60 s).
func WithContainerCheckInterval(d time.Duration) Option {
	return func(c *config) { c.containerCheck = d }
}

func ms(d time.Duration) string { return fmt.Sprint(d.Milliseconds()) }

// WithTLS makes the servers serve TLS too: each server (each ensemble member)
// gets a secure client port on 127.0.0.1 next to its plaintext one, served by
// ZooKeeper's NettyServerCnxnFactory (which then serves the plaintext port
// too) with PEM key and trust stores. StartServer generates a new TLS (a test
// CA, a server certificate for 127.0.0.1 and localhost, a client
// certificate) for the server, StartEnsemble one for the whole ensemble; the
// server requires a client certificate signed by that CA, as ZooKeeper does
// by default (WithConfig("ssl.clientAuth", "none") turns that off). Server.TLS
// and Ensemble.TLS return it, with a ready client configuration;
// Server.SecureServers and Ensemble.SecureServers the secure addresses. The
// plaintext port keeps working: zktest's own probes, namespaces and session
// killer use it.
func WithTLS() Option { return func(c *config) { c.tls = true } }
