package zkotel_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// requires returns the module paths that the go.mod file at path requires,
// directly or as indirect requirements, from its require lines and blocks.
func requires(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var mods []string
	inBlock := false
	for _, line := range strings.Split(string(b), "\n") {
		if i := strings.Index(line, "//"); i >= 0 {
			line = line[:i]
		}
		f := strings.Fields(line)
		switch {
		case len(f) == 0:
		case inBlock && f[0] == ")":
			inBlock = false
		case inBlock:
			mods = append(mods, strings.Trim(f[0], `"`))
		case f[0] == "require" && len(f) >= 2 && f[1] == "(":
			inBlock = true
		case f[0] == "require" && len(f) >= 2:
			mods = append(mods, strings.Trim(f[1], `"`))
		}
	}
	return mods
}

// TestNoPrometheusRequired: the adapter's module requires no Prometheus
// module (the exporter, client_golang and their dependencies belong to the
// example, a module of its own), so a service that imports the adapter does
// not find them in its module graph. The example's module is where they
// are.
func TestNoPrometheusRequired(t *testing.T) {
	mods := requires(t, "go.mod")
	if len(mods) == 0 {
		t.Fatal("go.mod requires nothing: the parse is wrong")
	}
	for _, m := range mods {
		if strings.Contains(strings.ToLower(m), "prometheus") {
			t.Errorf("zkotel's go.mod requires %s: Prometheus modules belong to the example's own module", m)
		}
	}
	ex := requires(t, filepath.Join("examples", "prometheus", "go.mod"))
	found := false
	for _, m := range ex {
		found = found || m == "go.opentelemetry.io/otel/exporters/prometheus"
	}
	if !found {
		t.Errorf("the example's go.mod does not require the Prometheus exporter: %v", ex)
	}
}
