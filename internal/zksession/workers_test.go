package zksession_test

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"go.uber.org/goleak"

	"github.com/zkrecipes/zkrecipes/internal/goid"
	"github.com/zkrecipes/zkrecipes/internal/testkit/sessiontest"
	"github.com/zkrecipes/zkrecipes/internal/zksession"
	"github.com/zkrecipes/zkrecipes/session"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// parkedWorkers counts the goroutines in the Session's request worker loop.
func parkedWorkers() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return strings.Count(string(buf[:n]), "session.(*Session).worker(")
		}
		buf = make([]byte, 2*len(buf))
	}
}

// TestRequestWorkers checks the doc's "Goroutines" paragraph: a worker whose
// request is done serves the next one, at most 4 stay parked after a burst,
// and Close ends them all.
func TestRequestWorkers(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	ns := zktest.NewNamespace(t)
	s := sessiontest.Connect(t, ns)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	exists := func(*zk.Conn) (uint64, error) { return goid.ID(), nil }

	// One request after another: parked workers run them.
	seen := make(map[uint64]bool)
	for i := 0; i < 50; i++ {
		id, err := zksession.Call(ctx, sessiontest.Core(s), exists, nil)
		if err != nil {
			t.Fatal(err)
		}
		seen[id] = true
	}
	// A caller may send its next request before the worker of the last one
	// has parked again; then a second worker starts, and from there on one
	// of the two is always parked. A third allows for a request of the
	// Session's own. Without reuse there would be 50.
	if len(seen) > 3 {
		t.Errorf("50 requests one after another ran on %d goroutines, want at most 3", len(seen))
	}

	// 100 requests in flight at once: 100 workers, then at most 4 parked.
	const burst = 100
	release := make(chan struct{})
	started := make(chan struct{}, burst)
	var wg sync.WaitGroup
	errs := make(chan error, burst)
	for i := 0; i < burst; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := zksession.Call(ctx, sessiontest.Core(s), func(c *zk.Conn) (struct{}, error) {
				started <- struct{}{}
				<-release
				_, _, err := c.Exists("/")
				return struct{}{}, err
			}, nil)
			errs <- err
		}()
	}
	for i := 0; i < burst; i++ {
		sessiontest.Recv(t, started, wait, "a request of the burst starting")
	}
	if n := parkedWorkers(); n < burst {
		t.Errorf("%d requests in flight on %d workers", burst, n)
	}
	close(release)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	zktest.Eventually(t, wait, func() bool { return parkedWorkers() <= 4 },
		"more than 4 workers still there after the burst")

	s.Close()
	if n := parkedWorkers(); n != 0 {
		t.Errorf("%d workers left after Close", n)
	}
	if err := goleak.Find(ignore); err != nil {
		t.Error(err)
	}
}

// TestStart checks Start's documentation: it returns at once and the result
// is in the Pending once Done closes; a result the caller abandons before it
// came goes to late, on a goroutine that Close waits for; one that came
// before Abandon is returned by it; after Close, Start returns ErrClosed; a
// nil Session or op is refused.
func TestStart(t *testing.T) {
	ns := zktest.NewNamespace(t)
	s := sessiontest.Connect(t, ns)
	exists := func(c *zk.Conn) (bool, error) {
		ok, _, err := c.Exists("/")
		return ok, err
	}

	// The result, picked up after Done.
	p, err := zksession.Start(sessiontest.Core(s), exists, nil)
	if err != nil {
		t.Fatal(err)
	}
	sessiontest.Recv(t, p.Done(), wait, "the started request's result")
	if ok, err := p.Result(); !ok || err != nil {
		t.Fatalf("Result: %v, %v; want true, nil", ok, err)
	}

	// Abandoned before the result: late gets it.
	release := make(chan struct{})
	late := make(chan bool, 1)
	p, err = zksession.Start(sessiontest.Core(s), func(c *zk.Conn) (bool, error) {
		<-release
		return exists(c)
	}, func(ok bool, err error) { late <- ok && err == nil })
	if err != nil {
		t.Fatal(err)
	}
	if _, _, ok := p.Abandon(); ok {
		t.Fatal("Abandon returned a result that cannot have come yet")
	}
	close(release)
	if !sessiontest.Recv(t, late, wait, "the abandoned result, at late") {
		t.Fatal("late got a failed result")
	}

	// Abandoned after the result: Abandon returns it, late gets nothing.
	p, err = zksession.Start(sessiontest.Core(s), exists, func(bool, error) { late <- true })
	if err != nil {
		t.Fatal(err)
	}
	sessiontest.Recv(t, p.Done(), wait, "the started request's result")
	if v, err, ok := p.Abandon(); !ok || !v || err != nil {
		t.Fatalf("Abandon after the result: %v, %v, %v; want true, nil, true", v, err, ok)
	}
	select {
	case <-late:
		t.Fatal("late got a result that Abandon returned")
	default:
	}

	// Close waits for a late function still running, then Start refuses.
	release = make(chan struct{})
	lateRuns, lateGate := make(chan struct{}), make(chan struct{})
	p, err = zksession.Start(sessiontest.Core(s), func(c *zk.Conn) (bool, error) {
		<-release
		return exists(c)
	}, func(bool, error) {
		close(lateRuns)
		<-lateGate
	})
	if err != nil {
		t.Fatal(err)
	}
	p.Abandon()
	closed := make(chan struct{})
	go func() {
		s.Close()
		close(closed)
	}()
	sessiontest.Recv(t, s.Done(), wait, "Close beginning")
	close(release)
	sessiontest.Recv(t, lateRuns, wait, "the late function running")
	// Close returns within milliseconds when it has nothing to wait for:
	// give it a fifth of a second to show that it waits.
	select {
	case <-closed:
		t.Fatal("Close returned while a late function was still running")
	case <-time.After(200 * time.Millisecond):
	}
	close(lateGate)
	sessiontest.Recv(t, closed, wait, "Close, once the late function ended")
	if _, err := zksession.Start(sessiontest.Core(s), exists, nil); !errors.Is(err, session.ErrClosed) {
		t.Fatalf("Start after Close: %v, want ErrClosed", err)
	}
	if _, err := zksession.Start(nil, exists, nil); !errors.Is(err, session.ErrBadArgument) {
		t.Fatalf("Start on a nil Session: %v, want ErrBadArgument", err)
	}
	if _, err := zksession.Start[bool](sessiontest.Core(s), nil, nil); !errors.Is(err, session.ErrBadArgument) {
		t.Fatalf("Start of a nil op: %v, want ErrBadArgument", err)
	}
}
