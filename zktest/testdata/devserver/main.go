// Command devserver is a development ZooKeeper: a standalone server from
// zktest, with a fault proxy in front of it, until interrupted. It is here
// for TestProgramDeps, which checks that a program importing zktest does not
// link the testing package or goleak.
package main

import (
	"fmt"
	"os"
	"os/signal"

	"github.com/zkrecipes/zkrecipes/zktest"
)

func main() {
	srv, err := zktest.StartServer()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer srv.Stop()
	px, err := zktest.NewProxy(srv.Addr())
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return
	}
	defer px.Close()
	fmt.Printf("ZooKeeper on %s, through a fault proxy on %s\n", srv.Addr(), px.Addr())
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt)
	<-sig
}
