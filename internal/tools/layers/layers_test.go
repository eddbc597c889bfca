package layers

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/zkrecipes/zkrecipes"

// layer is a package's height; group says whether packages of one layer may
// import each other.
type layer struct {
	rank  int
	group bool
}

// layerOf returns the layer of the module package p (its path below the
// module), and false for a package missing from the table.
func layerOf(p string) (layer, bool) {
	switch p {
	case "internal/goid", "internal/participant", "internal/eventqueue":
		return layer{0, false}, true
	case "internal/zksession":
		return layer{1, false}, true
	case "session":
		return layer{2, false}, true
	case "recipes":
		return layer{3, false}, true
	case "internal/engine", "internal/keeper":
		return layer{4, false}, true
	case "mutex", "rwlock", "semaphore", "leader", "recipes/barrier", "recipes/counter", "recipes/cache", "recipes/group":
		return layer{5, false}, true
	case "zktest", "recipes/discovery": // discovery is built on recipes/cache and recipes/group
		return layer{6, false}, true
	case "internal/testkit/sessiontest", "internal/testkit/curatortest", "internal/testkit/leasetest":
		return layer{7, false}, true
	case "internal/testkit/chaos":
		return layer{8, false}, true
	}
	for _, top := range []string{"internal/testkit/chaos/", "examples/", "cmd/", "internal/tools/"} {
		if strings.HasPrefix(p, top) {
			return layer{9, true}, true
		}
	}
	return layer{}, false
}

type pkg struct {
	ImportPath string
	Imports    []string
	Deps       []string
}

// TestImportsPointDown lists every package of the module with go list and
// checks each of its non-test imports of the module against the table.
func TestImportsPointDown(t *testing.T) {
	out, err := exec.Command("go", "list", "-json", module+"/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	n := 0
	for dec.More() {
		var p pkg
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		n++
		name := strings.TrimPrefix(strings.TrimPrefix(p.ImportPath, module), "/")
		if name == "" {
			continue
		}
		for _, d := range p.Deps {
			if strings.HasPrefix(d, "go.opentelemetry.io/") {
				t.Errorf("%s depends on %s: OpenTelemetry belongs to the zkotel module only", name, d)
				break
			}
		}
		from, ok := layerOf(name)
		if !ok {
			t.Errorf("package %s is not in the layer table of package layers", name)
			continue
		}
		for _, imp := range p.Imports {
			if !strings.HasPrefix(imp, module+"/") {
				continue
			}
			to, ok := layerOf(strings.TrimPrefix(imp, module+"/"))
			switch {
			case !ok:
				t.Errorf("%s imports %s, which is not in the layer table", name, imp)
			case to.rank > from.rank:
				t.Errorf("%s (layer %d) imports %s (layer %d): imports must point down", name, from.rank, imp, to.rank)
			case to.rank == from.rank && !from.group:
				t.Errorf("%s imports %s of its own layer %d", name, imp, from.rank)
			}
		}
	}
	if n < 10 {
		t.Fatalf("go list found %d packages; the check did not run on the module", n)
	}
}

// TestLayerTable checks the check: an upward import and an import between
// two recipes are reported by the table's rules.
func TestLayerTable(t *testing.T) {
	for _, tc := range []struct {
		from, to string
		ok       bool
	}{
		{"mutex", "internal/engine", true},
		{"internal/engine", "mutex", false},
		{"mutex", "rwlock", false},
		{"recipes/cache", "internal/engine", true},
		{"recipes/cache", "mutex", false},
		{"leader", "recipes/cache", false},
		{"recipes/group", "internal/engine", true},
		{"recipes/group", "leader", false},
		{"recipes/group", "recipes/cache", false},
		{"recipes/counter", "internal/engine", true},
		{"recipes/counter", "mutex", false},
		{"recipes/barrier", "recipes/counter", false},
		{"session", "internal/zksession", true},
		{"internal/zksession", "session", false},
		{"mutex", "zktest", false},
		{"internal/testkit/chaos", "mutex", true},
		{"examples/locks", "examples/internal/demo", true},
	} {
		from, _ := layerOf(tc.from)
		to, _ := layerOf(tc.to)
		ok := to.rank < from.rank || to.rank == from.rank && from.group
		if ok != tc.ok {
			t.Errorf("%s -> %s allowed = %v, want %v", tc.from, tc.to, ok, tc.ok)
		}
	}
}
