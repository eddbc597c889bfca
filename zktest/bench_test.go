package zktest_test

import (
	"slices"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/zktest"
)

// Start times, as a benchmark (not a timed test). Median of 5 starts:
//
//	go test -run '^$' -bench Start -benchtime 5x ./zktest/

func BenchmarkStartServer(b *testing.B) {
	var ds []time.Duration
	for i := 0; i < b.N; i++ {
		start := time.Now()
		s, err := zktest.StartServer()
		if err != nil {
			b.Fatal(err)
		}
		ds = append(ds, time.Since(start))
		b.StopTimer()
		if err := s.Stop(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	report(b, ds)
}

func BenchmarkStartEnsemble3(b *testing.B) {
	var ds []time.Duration
	for i := 0; i < b.N; i++ {
		start := time.Now()
		e, err := zktest.StartEnsemble(3)
		if err != nil {
			b.Fatal(err)
		}
		ds = append(ds, time.Since(start))
		b.StopTimer()
		if err := e.Stop(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	report(b, ds)
}

func report(b *testing.B, ds []time.Duration) {
	s := slices.Clone(ds)
	slices.Sort(s)
	med := s[len(s)/2]
	b.ReportMetric(float64(med.Microseconds())/1000, "median-ms")
	b.Logf("%d starts, median %v, all %v", len(ds), med, ds)
}
