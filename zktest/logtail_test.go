package zktest_test

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/zktest"
)

// logTailChildEnv makes TestLogTailChild fail on purpose, in the child test
// binary that TestLogTailOnce starts; its value says how.
const logTailChildEnv = "ZKTEST_LOGTAIL_CHILD"

// TestLogTailChild is the child side of TestLogTailOnce: it fails after
// using the shared server through two namespaces ("namespaces") or through
// Shared ("shared"), after starting its own server with a namespace on it
// ("own"), or without using zktest ("none"). Run on its own it is skipped.
func TestLogTailChild(t *testing.T) {
	mode := os.Getenv(logTailChildEnv)
	switch mode {
	case "namespaces":
		zktest.NewNamespace(t)
		zktest.NewNamespace(t)
	case "shared":
		zktest.Shared(t)
	case "own":
		zktest.NewNamespaceOn(t, zktest.StartServerT(t))
	case "none":
	default:
		t.Skip("the child side of TestLogTailOnce")
	}
	t.Errorf("failing on purpose (%s)", mode)
}

// A failing test prints a server's log tail exactly once: not once per
// namespace and again from Main; from its own cleanups when it used a server,
// from Main when it did not (as for a failing Example).
func TestLogTailOnce(t *testing.T) {
	for _, mode := range []string{"namespaces", "shared", "own", "none"} {
		t.Run(mode, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestLogTailChild$", "-test.count=1")
			cmd.Env = append(os.Environ(), logTailChildEnv+"="+mode)
			out, err := cmd.CombinedOutput()
			if err == nil {
				t.Fatalf("the child passed; it should have failed:\n%s", out)
			}
			if !strings.Contains(string(out), "failing on purpose") {
				t.Fatalf("the child did not run its failing test (%v):\n%s", err, out)
			}
			if n := strings.Count(string(out), "log tail:"); n != 1 {
				t.Errorf("%d log tails printed, want 1:\n%s", n, out)
			}
		})
	}
}
