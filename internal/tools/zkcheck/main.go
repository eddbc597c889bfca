// Command zkcheck prints the go-zookeeper it was built with and whether the
// session accepts it; it exits 1 if not. The go command records a module's
// dependencies only in the binaries of main packages, so this program and
// its test are how the module checks that its own go.mod selects a
// go-zookeeper its wire layer was verified with.
package main

import (
	"fmt"
	"os"
	"runtime/debug"

	"github.com/zkrecipes/zkrecipes/internal/zksession"
)

func main() {
	bi, _ := debug.ReadBuildInfo()
	b, err := zksession.CheckClient(bi)
	fmt.Printf("go-zookeeper %s (recorded: %v)\n", b.Desc, b.Known)
	if err != nil || !b.Known {
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
		os.Exit(1)
	}
}
