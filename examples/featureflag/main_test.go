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

// The whole demo runs on the shared server: the service sees each change
// of the flag in order, answers from its copy while cut off, catches up
// with one event, and ends with the server's node (run checks all of it
// and returns an error otherwise).
func TestDemo(t *testing.T) {
	var out bytes.Buffer
	env := &demo.Env{Servers: zktest.SharedServers(), Logger: zap.NewNop(), Out: demo.NewPrinter(&out)}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	err := run(ctx, env)
	t.Logf("demo:\n%s", out.String())
	if err != nil {
		t.Fatalf("demo: %v", err)
	}
	for _, want := range []string{"while away: a request → new checkout", `Updated "off for good"`, "done:"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the demo's output lacks %q", want)
		}
	}
}
