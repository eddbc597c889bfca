package leader_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/zkrecipes/zkrecipes/leader"
	"github.com/zkrecipes/zkrecipes/session"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// The examples run against the package's shared ZooKeeper server, which
// TestMain starts (zktest.Main): zktest.SharedServers() returns its
// addresses. In a program, pass your ensemble's addresses instead, such as
// []string{"zk1:2181", "zk2:2181", "zk3:2181"}.

// Make a background worker highly available: every replica calls Run; the
// one that leads runs the work until its context ends (leadership lost, or
// shutting down), then the next replica takes over.
func ExampleRun() {
	sess, err := session.Connect(context.Background(), zktest.SharedServers(), session.WithNamespace("/examples/run"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer sess.Close()

	ctx, shutdown := context.WithCancel(context.Background())
	err = leader.Run(ctx, sess, "/leaders/compactor", func(ctx context.Context) error {
		// Our node is the first of the election: Leader reads our id back.
		if p, _, err := leader.Leader(ctx, sess, "/leaders/compactor"); err == nil {
			fmt.Println("leading as", p.ID)
		}
		shutdown() // for the example: stop after the first term
		<-ctx.Done()
		// Stop touching the resource: leadership is lost or we shut down.
		return ctx.Err()
	}, leader.WithID("replica-1"))
	fmt.Println("Run returned:", errors.Is(err, context.Canceled))
	// Output:
	// leading as replica-1
	// Run returned: true
}

// A Latch stays in the election until Close. Await blocks until it leads;
// the term's Done says when leadership ends, and why.
func ExampleLatch() {
	sess, err := session.Connect(context.Background(), zktest.SharedServers(), session.WithNamespace("/examples/latch"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer sess.Close()

	l, err := leader.NewLatch(sess, "/leaders/scheduler", leader.WithID("node-a"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer l.Close()
	if err := l.Start(); err != nil {
		fmt.Println(err)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	term, err := l.Await(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	p, _, err := leader.Leader(ctx, sess, "/leaders/scheduler")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("leader:", p.ID, l.IsLeader())

	l.Close()     // for the example: step down (a lost session would do the same)
	<-term.Done() // leadership over: stop leading work here
	fmt.Println("term ended:", errors.Is(term.Err(), session.ErrClosed))
	// Output:
	// leader: node-a true
	// term ended: true
}

// A Selector calls its function while it leads; the context is canceled
// when leadership is lost. Observe shows the leader to processes that do not
// take part.
func ExampleSelector() {
	sess, err := session.Connect(context.Background(), zktest.SharedServers(), session.WithNamespace("/examples/selector"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer sess.Close()

	octx, stopObserving := context.WithCancel(context.Background())
	defer stopObserving()
	leaders, err := leader.Observe(octx, sess, "/leaders/mailer")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("observed leader: %q\n", (<-leaders).ID) // nobody yet

	leading := make(chan struct{})
	sel, err := leader.NewSelector(sess, "/leaders/mailer", func(ctx context.Context) error {
		close(leading)
		<-ctx.Done() // leadership lost or Close: stop the leader's work
		return nil
	}, leader.WithID("mailer-1"))
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := sel.Start(); err != nil {
		fmt.Println(err)
		return
	}
	<-leading
	fmt.Println("leading")
	for p := range leaders {
		if p.ID != "" {
			fmt.Printf("observed leader: %q\n", p.ID)
			break
		}
	}
	sel.Close() // cancels the callback's context and waits for it
	// Output:
	// observed leader: ""
	// leading
	// observed leader: "mailer-1"
}
