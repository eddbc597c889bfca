package zktest

import (
	"fmt"
	"strings"
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
	install           *install
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

// WithConfig adds a line key=value to the generated zoo.cfg, after zktest's
// own lines; ZooKeeper reads zoo.cfg as Java properties, so the last line of
// a key wins: WithConfig("tickTime", "2000") replaces zktest's 200 ms tick,
// and minSessionTimeout and maxSessionTimeout (500 ms and 60 s) go the same
// way. WithConfig("reconfigEnabled", "true") makes an ensemble
// reconfigurable: see Ensemble.Reconfig.
func WithConfig(key, value string) Option {
	return func(c *config) { c.extra = append(c.extra, [2]string{key, value}) }
}

// reconfigEnabled reports whether zoo.cfg ends up with reconfigEnabled=true
// (the last line of a key wins; Java's Boolean.parseBoolean ignores case).
func (c *config) reconfigEnabled() bool {
	on := false
	for _, kv := range c.extra {
		if kv[0] == "reconfigEnabled" {
			on = strings.EqualFold(strings.TrimSpace(kv[1]), "true")
		}
	}
	return on
}

// WithJVMFlags appends flags to the JVM command line, after zktest's own, so
// they win: WithJVMFlags("-Dznode.container.checkIntervalMs=60000") restores
// ZooKeeper's own reaping interval for empty containers and expired TTL nodes
// (zktest's is 500 ms).
func WithJVMFlags(flags ...string) Option {
	return func(c *config) { c.jvmFlags = append(c.jvmFlags, flags...) }
}

// WithLogDir writes the server logs into dir, as
// zookeeper-<standalone|member-N>-<port>.log, and keeps them after Stop;
// without it each server logs into its temporary directory, which Stop
// removes.
func WithLogDir(dir string) Option { return func(c *config) { c.logDir = dir } }

// WithTLS makes the servers serve TLS too: each server (each ensemble member)
// gets a secure client port on 127.0.0.1 next to its plaintext one, served by
// ZooKeeper's NettyServerCnxnFactory (which then serves the plaintext port
// too) with PEM key and trust stores. StartServer generates a new TLS (a test
// CA, a server certificate for 127.0.0.1 and localhost, a client
// certificate) for the server, StartEnsemble one for the whole ensemble; the
// server requires a client certificate signed by that CA, as ZooKeeper does
// by default (WithConfig("ssl.clientAuth", "none") turns that off).
// Server.TLS returns it, with a ready client configuration, and
// Server.SecureServers the secure address (for an ensemble, of each
// Member). The plaintext port keeps working: zktest's own probes, namespaces
// and session killer use it.
func WithTLS() Option { return func(c *config) { c.tls = true } }

// withInstall uses in instead of what FindInstall finds (for zktest's
// tests).
func withInstall(in *install) Option { return func(c *config) { c.install = in } }

func ms(d time.Duration) string { return fmt.Sprint(d.Milliseconds()) }
