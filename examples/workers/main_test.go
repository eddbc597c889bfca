package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/zkrecipes/zkrecipes/examples/internal/demo"
	"github.com/zkrecipes/zkrecipes/zktest"
)

func TestMain(m *testing.M) { zktest.Main(m) }

// The whole demo runs against the package's server: after the joins, the
// leave, the expiry of a partitioned worker and its return, the workers
// agree on a split that gives every job one owner, and it says so.
func TestDemo(t *testing.T) {
	var out bytes.Buffer
	env := &demo.Env{
		Servers: zktest.SharedServers(),
		Logger:  zap.NewNop(),
		Out:     demo.NewPrinter(&out),
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	start := time.Now()
	err := run(ctx, env)
	t.Logf("demo took %v:\n%s", time.Since(start).Round(time.Millisecond), out.String())
	if err != nil {
		t.Fatalf("demo: %v", err)
	}
	for _, want := range []string{
		"4 workers agree: every job has exactly one owner",
		"2 workers agree: every job has exactly one owner",
		"is back on a new session",
		"every step ended with each of the 12 jobs owned by exactly one worker",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the demo's output lacks %q", want)
		}
	}
}
