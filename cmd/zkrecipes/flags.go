package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/zkrecipes/zkrecipes/internal/zksession"
	"github.com/zkrecipes/zkrecipes/session"
)

// usageError is bad input: a one-line message, exit code exitUsage.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return usageError{fmt.Sprintf(format, args...)} }

// optDuration is a duration flag that remembers whether it was set.
type optDuration struct {
	d   time.Duration
	set bool
}

func (o *optDuration) String() string {
	if o == nil || !o.set {
		return "auto"
	}
	return o.d.String()
}

func (o *optDuration) Set(s string) error {
	d, err := parseDuration(s)
	if err != nil {
		return err
	}
	o.d, o.set = d, true
	return nil
}

// durationFlag is a duration flag whose error shows the expected form.
type durationFlag struct{ d *time.Duration }

func (f durationFlag) String() string {
	if f.d == nil {
		return ""
	}
	return f.d.String()
}

func (f durationFlag) Set(s string) error {
	d, err := parseDuration(s)
	if err != nil {
		return err
	}
	*f.d = d
	return nil
}

// durationVar defines a duration flag with the value d.
func durationVar(fs *flag.FlagSet, p *time.Duration, name string, d time.Duration) {
	*p = d
	fs.Var(durationFlag{p}, name, "")
}

// errNotDuration is the error of every duration flag and variable.
var errNotDuration = errors.New("not a duration such as 1.5s or 500ms")

func parseDuration(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, errNotDuration
	}
	return d, nil
}

// checkPath validates a recipe path as the session does, before anything
// connects.
func checkPath(p string) error {
	var pe *zksession.PathError
	if err := zksession.ValidatePath(p); errors.As(err, &pe) {
		return usagef("PATH %q: %s; want an absolute path such as /locks/backup", p, pe.Reason)
	} else if err != nil {
		return usagef("PATH %q: %v", p, err)
	}
	return nil
}

// connFlags are the connection settings every command takes, each from a
// flag or else from its environment variable.
type connFlags struct {
	servers        string
	sessionTimeout time.Duration
	connectTimeout time.Duration
	namespace      string
	tlsCA          string
	tlsCert        string
	tlsKey         string
	tlsServerName  string
	auth           string
	verbose        bool
}

// envDefaults are the environment variables of the connection flags.
var envDefaults = []struct{ flag, env string }{
	{"servers", "ZKRECIPES_SERVERS"},
	{"session-timeout", "ZKRECIPES_SESSION_TIMEOUT"},
	{"connect-timeout", "ZKRECIPES_CONNECT_TIMEOUT"},
	{"namespace", "ZKRECIPES_NAMESPACE"},
	{"tls-ca", "ZKRECIPES_TLS_CA"},
	{"tls-cert", "ZKRECIPES_TLS_CERT"},
	{"tls-key", "ZKRECIPES_TLS_KEY"},
	{"tls-server-name", "ZKRECIPES_TLS_SERVER_NAME"},
	{"auth", "ZKRECIPES_AUTH"},
}

func (c *connFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&c.servers, "servers", "127.0.0.1:2181", "")
	durationVar(fs, &c.sessionTimeout, "session-timeout", session.DefaultSessionTimeout)
	durationVar(fs, &c.connectTimeout, "connect-timeout", session.DefaultConnectTimeout)
	fs.StringVar(&c.namespace, "namespace", "", "")
	fs.StringVar(&c.tlsCA, "tls-ca", "", "")
	fs.StringVar(&c.tlsCert, "tls-cert", "", "")
	fs.StringVar(&c.tlsKey, "tls-key", "", "")
	fs.StringVar(&c.tlsServerName, "tls-server-name", "", "")
	fs.StringVar(&c.auth, "auth", "", "")
	fs.BoolVar(&c.verbose, "v", false, "")
}

// parseFlags parses args into fs after applying the environment defaults of
// the connection flags; every error is a usageError of one line.
func parseFlags(fs *flag.FlagSet, args []string, getenv func(string) string) error {
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	for _, e := range envDefaults {
		v := getenv(e.env)
		if v == "" || fs.Lookup(e.flag) == nil {
			continue
		}
		if err := fs.Set(e.flag, v); err != nil {
			return usagef("%s=%q: %v", e.env, v, err)
		}
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		// The flag package's messages are one line: "invalid value ... for
		// flag -x: ..." or "flag provided but not defined: -x".
		return usageError{err.Error()}
	}
	return nil
}

// check validates the connection settings that need no I/O.
func (c *connFlags) check() error {
	if strings.TrimSpace(c.servers) == "" {
		return usagef("--servers is empty: give host:port[,host:port...] or set ZKRECIPES_SERVERS")
	}
	if c.sessionTimeout <= 0 {
		return usagef("--session-timeout %v: must be positive", c.sessionTimeout)
	}
	if c.connectTimeout <= 0 {
		return usagef("--connect-timeout %v: must be positive", c.connectTimeout)
	}
	if (c.tlsCert == "") != (c.tlsKey == "") {
		return usagef("--tls-cert and --tls-key go together")
	}
	if c.auth != "" {
		user, _, ok := strings.Cut(c.auth, ":")
		if !ok || user == "" {
			return usagef("--auth (or ZKRECIPES_AUTH): want user:password")
		}
	}
	return nil
}

// options returns the session options of the settings; files that cannot be
// read are usage errors.
func (c *connFlags) options() ([]session.Option, error) {
	opts := []session.Option{
		session.WithSessionTimeout(c.sessionTimeout),
		session.WithConnectTimeout(c.connectTimeout),
	}
	if c.namespace != "" {
		opts = append(opts, session.WithNamespace(c.namespace))
	}
	if c.auth != "" {
		user, password, _ := strings.Cut(c.auth, ":")
		opts = append(opts, session.WithDigestAuth(user, password))
	}
	if c.tlsCA != "" || c.tlsCert != "" || c.tlsServerName != "" {
		cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: c.tlsServerName}
		if c.tlsCA != "" {
			pem, err := os.ReadFile(c.tlsCA)
			if err != nil {
				return nil, usagef("--tls-ca: %v", err)
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return nil, usagef("--tls-ca %s: no PEM certificate in it", c.tlsCA)
			}
			cfg.RootCAs = pool
		}
		if c.tlsCert != "" {
			cert, err := tls.LoadX509KeyPair(c.tlsCert, c.tlsKey)
			if err != nil {
				return nil, usagef("--tls-cert/--tls-key: %v", err)
			}
			cfg.Certificates = []tls.Certificate{cert}
		}
		opts = append(opts, session.WithTLS(cfg))
	}
	return opts, nil
}

func (c *connFlags) serverList() []string {
	var out []string
	for _, s := range strings.Split(c.servers, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// defaultID is the participant id when --id is not given: host:pid, so that
// holders and leader name the process to look for, also among several on one
// host. The library's default (Curator's) is the local IP address: one id per
// host, which would not tell two commands apart.
func defaultID() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "localhost"
	}
	return host + ":" + strconv.Itoa(os.Getpid())
}
