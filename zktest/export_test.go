package zktest

import (
	"context"
	"time"
)

// Internals for the tests of package zktest_test.

var (
	InstallCommand = installCommand
	ErrBadArgument = errBadArgument
	HoldSessionCtx = holdSession
	Shared         = shared
)

// FindInstallPaths returns what FindInstall finds.
func FindInstallPaths() (java string, classpath []string, err error) {
	in, err := findInstall()
	if err != nil {
		return "", nil, err
	}
	return in.java, in.classpath, nil
}

// WithInstallPaths uses java and classpath instead of what FindInstall finds.
func WithInstallPaths(java string, classpath []string) Option {
	return withInstall(&install{java: java, classpath: classpath})
}

func (s *Server) Pid() int              { return s.pid() }
func (s *Server) Running() bool         { return s.running() }
func (s *Server) Frozen() bool          { return s.isFrozen() }
func (s *Server) LogTail(n int) string  { return s.logTail(n) }
func (c SessionCreds) Password() []byte { return c.password }
func (c SessionCreds) Timeout() time.Duration {
	return c.timeout
}

// SrvrStats is the parsed answer to srvr.
type SrvrStats struct {
	Mode, Version          string
	Zxid                   int64
	Connections, NodeCount int
}

// Srvr asks addr for srvr.
func Srvr(ctx context.Context, addr string) (*SrvrStats, error) {
	st, err := srvr(ctx, addr)
	if err != nil {
		return nil, err
	}
	return &SrvrStats{Mode: st.mode, Version: st.version, Zxid: st.zxid, Connections: st.connections, NodeCount: st.nodeCount}, nil
}

// SnapshotGoroutines and FindLeaks run Main's goroutine leak check: the
// goroutines started since the snapshot and still running after wait,
// described with their stacks, or "".
func SnapshotGoroutines() map[uint64]bool { return snapshotGoroutines() }

func FindLeaks(before map[uint64]bool, wait time.Duration) string {
	if leaked := findLeaks(before, wait); len(leaked) > 0 {
		return formatLeaks(leaked)
	}
	return ""
}

func (t *TLS) ServerKeyPEM() []byte { return t.serverKeyPEM }

// WatchCount returns the total of t's Watches.
func WatchCount(t *Tap) int { return t.watchCount() }
