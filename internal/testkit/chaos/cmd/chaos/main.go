// Command chaos runs the chaos run of package internal/testkit/chaos: every recipe
// used at once by many sessions on a 3-member ZooKeeper ensemble while faults
// are injected at random, then prints the report. It exits 1 if the report
// lists a violation and 2 if the run could not be carried out.
//
//	go run ./internal/testkit/chaos/cmd/chaos -rounds 1000
//	go run ./internal/testkit/chaos/cmd/chaos -rounds 1000 -seed 1712345678   # replay a run's fault schedule
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"time"

	"github.com/zkrecipes/zkrecipes/internal/testkit/chaos"
)

func main() {
	var cfg chaos.Config
	flag.IntVar(&cfg.Rounds, "rounds", 200, "fault rounds")
	flag.Int64Var(&cfg.Seed, "seed", 0, "seed of the fault schedule (0: the current time); the report prints it")
	flag.IntVar(&cfg.Sessions, "sessions", 12, "client sessions (half standard, half session-only loss policy)")
	flag.DurationVar(&cfg.SessionTimeout, "session-timeout", 1500*time.Millisecond, "session timeout of every client")
	flag.DurationVar(&cfg.Tolerance, "tolerance", 100*time.Millisecond, "how late after its ctx a call may return")
	flag.DurationVar(&cfg.DwellMin, "dwell-min", 500*time.Millisecond, "shortest time a fault is held")
	flag.DurationVar(&cfg.DwellMax, "dwell-max", 1500*time.Millisecond, "longest time a fault is held")
	flag.BoolVar(&cfg.Verbose, "v", false, "log every fault")
	flag.StringVar(&cfg.Dump, "dump", "", "write the raw records to this file as JSON")
	flag.Parse()
	lg := log.New(os.Stderr, "chaos: ", log.Ltime)
	cfg.Logf = lg.Printf

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	rep, err := chaos.Run(ctx, cfg)
	if rep != nil {
		fmt.Print(rep)
	}
	if err != nil {
		lg.Print(err)
		os.Exit(2)
	}
	if len(rep.Violations) > 0 {
		os.Exit(1)
	}
}
