package zksession

import (
	"context"
	"errors"
	"net"
	"runtime/debug"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

const sum104 = "h1:DPzxraQx7OrPyXq2phlGlNSIyWEsAox0RJmjTseMV6I="

func zkDep(v, sum string, r *debug.Module) *debug.BuildInfo {
	return &debug.BuildInfo{Deps: []*debug.Module{
		{Path: "go.uber.org/zap", Version: "v1.28.0"},
		{Path: zkModule, Version: v, Sum: sum, Replace: r},
	}}
}

func TestCheckClient(t *testing.T) {
	for _, tc := range []struct {
		name  string
		bi    *debug.BuildInfo
		known bool
		ok    bool
		says  []string // in the error
	}{
		{"v1.0.4", zkDep("v1.0.4", sum104, nil), true, true, nil},
		{"v1.0.4 vendored (no hash)", zkDep("v1.0.4", "", nil), true, true, nil},
		{"v1.0.4 other hash", zkDep("v1.0.4", "h1:AAAA=", nil), true, false, []string{"h1:AAAA=", "not the published"}},
		{"v1.0.3", zkDep("v1.0.3", "h1:x=", nil), true, false, []string{"built with github.com/go-zookeeper/zk v1.0.3"}},
		{"replace to v1.0.3", zkDep("v1.0.4", "", &debug.Module{Path: zkModule, Version: "v1.0.3", Sum: "h1:x="}), true, false, []string{"v1.0.4 replaced by v1.0.3"}},
		{"v1.0.5", zkDep("v1.0.5", "h1:x=", nil), true, false, []string{"v1.0.5", "replace github.com/go-zookeeper/zk => github.com/go-zookeeper/zk v1.0.4"}},
		{"pseudo-version", zkDep("v1.0.5-0.20240819155611-6d30b8b96c60", "h1:x=", nil), true, false, []string{"v1.0.5-0.20240819155611-6d30b8b96c60"}},
		{"replace to same module v1.0.4", zkDep("v1.0.4", "", &debug.Module{Path: zkModule, Version: "v1.0.4", Sum: sum104}), true, true, nil},
		{"replace to a fork at v1.0.4", zkDep("v1.0.4", "", &debug.Module{Path: "example.com/zkfork", Version: "v1.0.4", Sum: "h1:y="}), true, false, []string{"replaced by example.com/zkfork v1.0.4"}},
		{"replace to a directory", zkDep("v1.0.4", "", &debug.Module{Path: "../zk", Version: "(devel)"}), true, false, []string{"replaced by the directory ../zk"}},
		{"replace to a directory, old toolchain", zkDep("v1.0.4", "", &debug.Module{Path: "../zk"}), true, false, []string{"replaced by the directory ../zk"}},
		{"go.work module", zkDep("(devel)", "", nil), true, false, []string{"(devel)"}},
		{"no go-zookeeper recorded", &debug.BuildInfo{}, false, true, nil},
		{"nil build info", nil, false, true, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := CheckClient(tc.bi)
			if b.Known != tc.known {
				t.Errorf("Known = %v, want %v", b.Known, tc.known)
			}
			if (err == nil) != tc.ok {
				t.Fatalf("err = %v, want ok=%v", err, tc.ok)
			}
			if err != nil && !errors.Is(err, ErrUnverifiedClient) {
				t.Errorf("err %v does not wrap ErrUnverifiedClient", err)
			}
			for _, s := range tc.says {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("err %q does not say %q", err, s)
				}
			}
		})
	}
}

// TestConnectRefusesUnverifiedClient: a binary that records go-zookeeper
// v1.0.5 makes Connect fail before it dials anything, naming the version and
// how to pin the verified one; one that records v1.0.4 dials.
func TestConnectRefusesUnverifiedClient(t *testing.T) {
	var dials atomic.Int32
	dialer := func(network, addr string, d time.Duration) (net.Conn, error) {
		dials.Add(1)
		return nil, errors.New("refused by the test")
	}
	fake := func(v, sum string) Option {
		return func(c *config) error {
			c.buildInfo = func() (*debug.BuildInfo, bool) { return zkDep(v, sum, nil), true }
			return nil
		}
	}
	_, err := Connect(context.Background(), []string{"127.0.0.1:1"}, WithDialer(dialer), fake("v1.0.5", "h1:x="))
	if !errors.Is(err, ErrUnverifiedClient) || !strings.Contains(err.Error(), "v1.0.5") ||
		!strings.Contains(err.Error(), "require github.com/go-zookeeper/zk v1.0.4") || dials.Load() != 0 {
		t.Fatalf("Connect with v1.0.5: %v (dials %d)", err, dials.Load())
	}
	t.Log(err)
	_, err = Connect(context.Background(), []string{"127.0.0.1:1"}, WithDialer(dialer), fake("v1.0.4", sum104),
		WithConnectTimeout(300*time.Millisecond))
	if errors.Is(err, ErrUnverifiedClient) || dials.Load() == 0 {
		t.Fatalf("Connect with v1.0.4: %v (dials %d), want a dial", err, dials.Load())
	}
}
