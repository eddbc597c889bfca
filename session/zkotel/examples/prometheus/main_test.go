package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/zktest"
)

func TestMain(m *testing.M) { zktest.Main(m) }

// TestScrapeShowsLockWaits runs the example and scrapes its /metrics until
// the lock wait histogram of the mutex named "report" has counted
// acquisitions.
func TestScrapeShowsLockWaits(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx, zktest.SharedServers(), ln, 3, 5*time.Millisecond) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
	}()

	url := "http://" + ln.Addr().String() + "/metrics"
	const series = `zkrecipes_acquire_duration_seconds_count{`
	var page string
	zktest.Eventually(t, 30*time.Second, func() bool {
		resp, err := http.Get(url)
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		page = string(b)
		if !strings.Contains(page, "zkrecipes_lease_duration_seconds_count{") {
			return false // no lease has ended yet
		}
		for _, line := range strings.Split(page, "\n") {
			if strings.HasPrefix(line, series) && strings.Contains(line, `zkrecipes_kind="mutex"`) &&
				strings.Contains(line, `zkrecipes_name="report"`) && strings.Contains(line, `zkrecipes_outcome="acquired"`) &&
				!strings.HasSuffix(line, " 0") {
				return true
			}
		}
		return false
	}, "no acquisitions in the lock wait histogram at %s", url)
	// The series the alerts of docs/observability.md use are there.
	for _, want := range []string{"zkrecipes_acquire_duration_seconds_bucket{", "zkrecipes_request_duration_seconds_bucket{", "zkrecipes_lease_active",
		"zkrecipes_lease_duration_seconds_count{", "zkrecipes_session_suspended_age_seconds", "zkrecipes_session_timeout_seconds"} {
		if !strings.Contains(page, want) {
			t.Errorf("scrape lacks %s", want)
		}
	}
	if strings.Contains(page, "/zkrecipes-demo/metrics/report") {
		t.Errorf("a lock path is a metric attribute:\n%s", page)
	}
}
