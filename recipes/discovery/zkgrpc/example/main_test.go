package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/zktest"
)

func TestMain(m *testing.M) { zktest.Main(m) }

// TestExample runs the example on the shared server, with the Java side and
// without, and checks that each backend answered in the step where it
// should. The Java run needs a JDK and Curator (the Makefile's test
// dependencies): without them it fails, naming the install command.
func TestExample(t *testing.T) {
	for _, tc := range []struct {
		name string
		java bool
		want []string
	}{
		{"go and java", true, []string{
			"registered by a Java process",
			"answered by java-1 (registered by Java, Curator's ServiceDiscovery)",
			"answered by go-1   (registered by Go, discovery.Register)",
			"answered by go-2   (registered by Go, discovery.Register)",
			"step 3: the Java process exits",
			"java-1 gone          go-1 3\n",
		}},
		{"go only", false, []string{
			"-java=false",
			"answered by go-2   (registered by Go, discovery.Register)",
			"go-2 unregistered",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			var buf bytes.Buffer
			err := run(ctx, newPrinter(&buf), zktest.SharedServers(), config{java: tc.java, calls: 3, pace: time.Millisecond})
			t.Logf("output:\n%s", buf.String())
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range tc.want {
				if !strings.Contains(buf.String(), w) {
					t.Errorf("the output lacks %q", w)
				}
			}
			if tc.java && strings.Contains(buf.String(), "not available") {
				t.Errorf("the Java side did not run")
			}
		})
	}
}
