package zkgrpc_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCoreHasNoGRPC: the core module (three directories up) neither
// requires grpc-go nor lists it in its go.sum: this module is where the
// dependency lives, so a service that does not import zkgrpc never finds
// gRPC in its module graph through zkrecipes.
func TestCoreHasNoGRPC(t *testing.T) {
	core := filepath.Join("..", "..", "..")
	mod, err := os.ReadFile(filepath.Join(core, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(mod), "module github.com/zkrecipes/zkrecipes\n") {
		t.Fatalf("%s is not the core module's go.mod", filepath.Join(core, "go.mod"))
	}
	sum, err := os.ReadFile(filepath.Join(core, "go.sum"))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	for name, b := range map[string][]byte{"go.mod": mod, "go.sum": sum} {
		if strings.Contains(string(b), "google.golang.org/grpc ") {
			t.Errorf("the core module's %s names google.golang.org/grpc: only zkgrpc's module may", name)
		}
	}
}
