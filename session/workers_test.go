package session_test

import (
	"context"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/go-zookeeper/zk"
	"go.uber.org/goleak"

	"github.com/zkrecipes/zkrecipes/internal/goid"
	"github.com/zkrecipes/zkrecipes/internal/sessiontest"
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
		id, err := session.Call(ctx, s, exists, nil)
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
			_, err := session.Call(ctx, s, func(c *zk.Conn) (struct{}, error) {
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
