package zktest_test

import (
	"os"
	"testing"

	"github.com/zkrecipes/zkrecipes/zktest"
)

func TestMain(m *testing.M) {
	if runChildIfAsked() {
		return
	}
	if os.Getenv("ZKTEST_LEAK_CHILD") == "1" { // see TestMainReportsLeak
		zktest.Main(leakingRun{})
	}
	zktest.Main(m)
}

// leakingRun stands for a *testing.M whose tests pass but leave a goroutine
// running.
type leakingRun struct{}

func (leakingRun) Run() int {
	go leakedByChild(make(chan struct{}))
	return 0
}

// leakedByChild blocks forever: the goroutine leakingRun leaks.
func leakedByChild(never <-chan struct{}) { <-never }
