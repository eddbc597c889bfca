package main

import (
	"runtime/debug"
	"testing"

	"github.com/zkrecipes/zkrecipes/internal/zksession"
)

// TestModuleSelectsVerifiedClient: the module's go.mod selects a go-zookeeper
// the session accepts (a main package's test binary records its
// dependencies, which a library package's does not).
func TestModuleSelectsVerifiedClient(t *testing.T) {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		t.Fatal("no build information")
	}
	b, err := zksession.CheckClient(bi)
	if !b.Known || err != nil {
		t.Fatalf("go-zookeeper %q (recorded: %v): %v", b.Desc, b.Known, err)
	}
	t.Logf("go-zookeeper %s", b.Desc)
}
