package zktest_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestProgramDeps: a program that imports zktest (testdata/devserver) links
// neither the testing package nor goleak, so that zktest can serve demos and
// development servers.
func TestProgramDeps(t *testing.T) {
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go command: %v", err)
	}
	out, err := exec.Command(goCmd, "list", "-deps", "./testdata/devserver").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps ./testdata/devserver: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	found := false
	for _, d := range deps {
		switch {
		case d == "github.com/zkrecipes/zkrecipes/zktest":
			found = true
		case d == "testing", strings.HasPrefix(d, "testing/"), strings.HasPrefix(d, "go.uber.org/goleak"):
			t.Errorf("a program importing zktest depends on %s", d)
		}
	}
	if !found {
		t.Fatalf("go list -deps ./testdata/devserver does not list zktest:\n%s", out)
	}
}
